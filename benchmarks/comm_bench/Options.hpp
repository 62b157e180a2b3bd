#pragma once

// c10d-comm-bench's command line.

#include <cstdint>
#include <vector>

#include "benchmarks/comm_bench/CommBench.hpp"

namespace commbench {

struct Options {
  std::vector<Op> ops{Op::Allreduce};
  int64_t minBytes = 8;
  int64_t maxBytes = int64_t{32} << 20;
  int64_t stepFactor = 2;
  ScalarType dtype = ScalarType::Float32;
  ReduceOp redop = ReduceOp::SUM;
  int root = 0;
  int iters = 20;
  int warmup = 5;
  bool raw = false;
  bool cuda = false;
  bool json = false;
  bool check = true;
  // Each op's own timeout (ms; 0: none, the group's applies), to compare what one costs.
  int64_t opTimeoutMs = 0;
};

// Exits the process on a usage error (status 2) and after --help (status 0).
Options parseOptions(int argc, char** argv);

}  // namespace commbench
