#pragma once

// What rank 0 prints: the nccl-tests tables, or with --json one line of rows.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/comm_bench/CommBench.hpp"
#include "benchmarks/comm_bench/Options.hpp"
#include "benchmarks/comm_bench/Stats.hpp"

namespace commbench {

struct Row {
  const char* op;
  int64_t bytes;
  int64_t count;
  std::string dtype;
  std::string redop;
  int root;
  Stats stats;
  double algbw;
  double busbw;
  std::optional<int64_t> wrong;  // nullopt with --no-check
  const char* path;
};

class Reporter {
 public:
  Reporter(const Options& options, bool printing) : options_(options), printing_(printing) {}

  void preamble(int ranks, const std::string& backend, const std::string& rawPath);
  void beginOp(const OpInfo& op, const std::vector<std::string>& notes);
  void row(const Row& row);
  // nccl-tests' closing line, per path.
  void endOp();
  void finish();

 private:
  const Options& options_;
  bool printing_;
  std::vector<Row> rows_;
  std::vector<Row> rows_in_op_;
};

}  // namespace commbench
