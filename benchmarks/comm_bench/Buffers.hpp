#pragma once

// The memory each op runs on, and its trips between the host and the benchmark's device.

#include <cstdint>

#include "benchmarks/comm_bench/CommBench.hpp"
#include "benchmarks/comm_bench/Options.hpp"
#include "c10d/core/Device.hpp"

namespace commbench {

// One op's memory, allocated once for the largest size (as nccl-tests does); each size uses a
// prefix of it.
struct Buffers {
  Tensor input;
  Tensor output;     // undefined for in-place ops
  Tensor scratch;    // raw reduce_scatter's full-size allreduce buffer
  Tensor hostInput;  // with --device cuda: where checks fill and read
  Tensor hostOutput;
};

Buffers allocate(Op op, const Options& options, int ranks, const c10d::Device& device,
                 bool scratch);

Tensor view(const Tensor& memory, int64_t count, ScalarType dtype);

// With --device cuda: the host views to the device before a run, and back after it.
void upload(const Case& c);
void download(const Case& c);

}  // namespace commbench
