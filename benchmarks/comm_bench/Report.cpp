#include "benchmarks/comm_bench/Report.hpp"

#include <cstdio>
#include <cstring>

#include "c10d/core/ScalarType.hpp"

namespace commbench {
namespace {

std::string formatTime(double us) {
  char text[32];
  std::snprintf(text, sizeof(text), us < 1e5 ? "%.2f" : "%.0f", us);
  return text;
}

}  // namespace

void Reporter::preamble(int ranks, const std::string& backend, const std::string& rawPath) {
  if (!printing_ || options_.json) return;
  std::printf(
      "# c10d-comm-bench: %d rank%s, backend %s, %s, %d warm-up + %d timed iterations "
      "per size, check %s\n",
      ranks, ranks == 1 ? "" : "s", backend.c_str(),
      std::string(c10d::name(options_.dtype)).c_str(), options_.warmup, options_.iters,
      options_.check ? "on" : "off");
  std::printf(
      "# time: the slowest rank's average per op; p50, p99: over every rank's "
      "iterations; min, max: of the ranks' averages (all in us)\n");
  if (!rawPath.empty()) std::printf("# path %s\n", rawPath.c_str());
  std::fflush(stdout);
}

void Reporter::beginOp(const OpInfo& op, const std::vector<std::string>& notes) {
  rows_in_op_.clear();
  if (!printing_ || options_.json) return;
  std::printf("#\n# op: %s\n", op.name);
  for (const std::string& note : notes) std::printf("# %s\n", note.c_str());
  std::printf("#%11s  %12s  %8s  %10s  %6s  %9s  %7s  %7s  %6s  %9s  %9s  %9s  %9s  %s\n", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "p50", "p99",
              "min", "max", "path");
  std::printf("#%11s  %12s  %8s  %10s  %6s  %9s  %7s  %7s  %6s  %9s  %9s  %9s  %9s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)",
              "(us)");
  std::fflush(stdout);
}

void Reporter::row(const Row& row) {
  rows_.push_back(row);
  rows_in_op_.push_back(row);
  if (!printing_ || options_.json) return;
  std::string wrong = row.wrong ? std::to_string(*row.wrong) : "N/A";
  std::printf("%12lld  %12lld  %8s  %10s  %6d  %9s  %7.2f  %7.2f  %6s  %9s  %9s  %9s  %9s  %s\n",
              static_cast<long long>(row.bytes), static_cast<long long>(row.count),
              row.dtype.c_str(), row.redop.c_str(), row.root, formatTime(row.stats.timeUs).c_str(),
              row.algbw, row.busbw, wrong.c_str(), formatTime(row.stats.p50Us).c_str(),
              formatTime(row.stats.p99Us).c_str(), formatTime(row.stats.minUs).c_str(),
              formatTime(row.stats.maxUs).c_str(), row.path);
  std::fflush(stdout);
}

void Reporter::endOp() {
  if (!printing_ || options_.json) return;
  std::string line;
  for (const char* path : {"c10d", "raw"}) {
    double sum = 0.0;
    int rows = 0;
    for (const Row& row : rows_in_op_) {
      if (std::strcmp(row.path, path) != 0) continue;
      sum += row.busbw;
      ++rows;
    }
    if (rows == 0) continue;
    char text[96];
    std::snprintf(text, sizeof(text), "%s%s %.3f GB/s", line.empty() ? "" : ", ", path, sum / rows);
    line += text;
  }
  if (!line.empty()) std::printf("# Avg bus bandwidth: %s\n", line.c_str());
  std::fflush(stdout);
}

void Reporter::finish() {
  if (!printing_ || !options_.json) return;
  std::string out = "[";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    char text[768];
    std::snprintf(text, sizeof(text),
                  "%s{\"op\":\"%s\",\"bytes\":%lld,\"count\":%lld,\"dtype\":\"%s\","
                  "\"redop\":\"%s\",\"root\":%d,\"time_us\":%.3f,\"algbw\":%.6f,"
                  "\"busbw\":%.6f,\"wrong\":%s,\"path\":\"%s\",\"p50_us\":%.3f,"
                  "\"p99_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f}",
                  i == 0 ? "" : ",", r.op, static_cast<long long>(r.bytes),
                  static_cast<long long>(r.count), r.dtype.c_str(), r.redop.c_str(), r.root,
                  r.stats.timeUs, r.algbw, r.busbw,
                  r.wrong ? std::to_string(*r.wrong).c_str() : "null", r.path, r.stats.p50Us,
                  r.stats.p99Us, r.stats.minUs, r.stats.maxUs);
    out += text;
  }
  out += "]\n";
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace commbench
