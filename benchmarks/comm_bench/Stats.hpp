#pragma once

// Timing the paths, and the statistics of the timings over all ranks.

#include <cstdint>
#include <vector>

#include "benchmarks/comm_bench/CommBench.hpp"
#include "c10d/Backend.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Device.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"

namespace commbench {

struct Stats {
  double timeUs = 0.0;  // the slowest rank's average
  double p50Us = 0.0;
  double p99Us = 0.0;
  double minUs = 0.0;  // the fastest rank's average
  double maxUs = 0.0;
};

// Warm-up, then timed blocking iterations of every path, in the order A B B A: the first half of
// each path's iterations in path order, the second half in reverse order. Timed one path after
// the other (A B), the path that ran second at a size was measured up to 25% faster than the
// same path run first (4 ranks, alltoall 2 MiB), whichever path that was; strict turns (A B A B)
// remove that but make each op follow the other path's, which on this 2-vCPU host costs Gloo's
// spinning path up to 100x at small sizes (its peer is still busy in the event-loop path).
// Microseconds per iteration on this rank, per path.
std::vector<std::vector<double>> timeIterations(c10d::ProcessGroup& pg,
                                                const std::vector<Runner>& paths, int warmup,
                                                int iters);

// Timings and wrong counts are host values, exchanged over the process group itself. A group
// whose backend serves no CPU tensors (C10D_BACKEND=nccl) exchanges them through the
// benchmark's device instead.
struct Bookkeeping {
  c10d::ProcessGroup& pg;
  c10d::Device device;

  static Bookkeeping of(c10d::ProcessGroup& pg, c10d::Device benchDevice) {
    bool hostCapable = false;
    try {
      hostCapable = pg.backend(c10d::DeviceType::CPU)->handlesDevice(c10d::DeviceType::CPU);
    } catch (const c10d::InvalidArgument&) {
    }
    return {pg, hostCapable ? c10d::Device::cpu() : benchDevice};
  }

  // Runs op(output, input) on copies of the host tensors on `device`, then copies output back.
  // An in-place op (output and input the same tensor) gets one device copy.
  template <typename Op>
  void run(const Tensor& output, const Tensor& input, Op op) const {
    if (device.isCPU()) {
      op(output, input)->wait();
      return;
    }
    Tensor deviceInput = Tensor::empty(input.sizes(), input.dtype(), device);
    Tensor deviceOutput = output.data() == input.data()
                              ? deviceInput
                              : Tensor::empty(output.sizes(), output.dtype(), device);
    c10d::copyTensor(deviceInput, input);
    op(deviceOutput, deviceInput)->wait();
    c10d::copyTensor(output, deviceOutput);
  }
};

// Every rank's samples (after the timed loop, so it costs the measurement nothing).
Stats summarize(const Bookkeeping& group, std::vector<double> samples);

int64_t sumOverRanks(const Bookkeeping& group, int64_t value);

}  // namespace commbench
