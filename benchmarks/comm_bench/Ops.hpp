#pragma once

// The c10d side of each op: how large its buffers are for a size, its bus factor, and how the
// c10d path issues it. The table of ops itself (kOps) is in CommBench.hpp, which the raw paths
// share.

#include <cstddef>
#include <cstdint>

#include "benchmarks/comm_bench/CommBench.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Device.hpp"

namespace commbench {

const OpInfo& info(Op op);

// nccl-tests' bus bandwidth factors: what each rank's link must carry relative to the size,
// so that busbw compares across ops and rank counts with the hardware's peak.
double busFactor(Op op, int ranks);

Shape shapeFor(Op op, int64_t bytes, int ranks, size_t elementSize);

Runner c10dRunner(c10d::ProcessGroup& pg, const Case& c);

// Device work counts until the calling thread's stream has finished it (a NCCL Work's wait()
// only orders that stream after the op).
Runner onDevice(Runner run, const c10d::Device& device);

}  // namespace commbench
