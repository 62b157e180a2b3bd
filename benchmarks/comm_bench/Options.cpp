#include "benchmarks/comm_bench/Options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "benchmarks/comm_bench/Ops.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"

namespace commbench {
namespace {

constexpr int kUsageExitCode = 2;

// premul_sum needs a factor and the command line has no place for one; 2 is exact in every
// dtype, so the check stays exact, and unlike 1 it proves the factor is applied.
constexpr double kPremulFactor = 2.0;

[[noreturn]] void usageError(const std::string& message) {
  std::fprintf(stderr, "c10d-comm-bench: %s (see --help)\n", message.c_str());
  std::exit(kUsageExitCode);
}

// "8", "64K", "32M", "1G" (powers of 1024, as nccl-tests reads them; a trailing B is allowed).
std::optional<int64_t> parseBytes(std::string text) {
  if (!text.empty() && (text.back() == 'B' || text.back() == 'b')) text.pop_back();
  int64_t multiplier = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K':
        multiplier = int64_t{1} << 10;
        break;
      case 'm':
      case 'M':
        multiplier = int64_t{1} << 20;
        break;
      case 'g':
      case 'G':
        multiplier = int64_t{1} << 30;
        break;
      default:
        break;
    }
    if (multiplier != 1) text.pop_back();
  }
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      text.size() > 12) {
    return std::nullopt;
  }
  int64_t value = std::stoll(text);
  if (value > std::numeric_limits<int64_t>::max() / multiplier / 1024) return std::nullopt;
  return value * multiplier;
}

}  // namespace

Options parseOptions(int argc, char** argv) {
  Options options;
  std::string op = "allreduce";
  std::string minBytes = "8";
  std::string maxBytes = "32M";
  std::string dtype = "float32";
  std::string redop = "sum";
  std::string opNames = "all";
  for (const OpInfo& entry : kOps) opNames += std::string(", ") + entry.name;

  CLI::App app{"Measures c10d collectives like nccl-tests (run it under c10drun or mpirun).",
               "c10d-comm-bench"};
  app.add_option("--op", op, "Operation: " + opNames)->capture_default_str();
  app.add_option("-b,--minbytes", minBytes, "Smallest size in bytes (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", maxBytes, "Largest size in bytes (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-f,--stepfactor", options.stepFactor, "Size multiplier between rows")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("-d,--datatype", dtype, "Element type (any c10d dtype name)")
      ->capture_default_str();
  app.add_option("-o,--op-reduce", redop,
                 "Reduce op: sum, avg, product, min, max, band, bor, bxor, premul_sum (factor 2)")
      ->capture_default_str();
  app.add_option("-r,--root", options.root, "Root rank of broadcast and reduce")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("-n,--iters", options.iters, "Timed iterations per size")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  app.add_option("-w,--warmup", options.warmup, "Untimed iterations per size before timing")
      ->check(CLI::Range(0, 100000000))
      ->capture_default_str();
  app.add_flag("--raw", options.raw,
               "Also run each op straight on the CPU backend's library (Gloo or MPI, no c10d "
               "layer) for comparison");
  std::string device = "cpu";
  app.add_option("--device", device, "Where the buffers live: cpu, or cuda (cuda:LOCAL_RANK)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_flag("--json", options.json, "Rank 0 prints one JSON line instead of tables");
  app.add_flag("--check,!--no-check", options.check,
               "Verify every size's result once before timing it (default: on)");
  app.add_option("--op-timeout", options.opTimeoutMs,
                 "Give every op its own timeout of this many ms (0: none, the group's applies)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) std::exit(app.exit(e));  // --help
    usageError(e.what());
  }

  if (op == "all") {
    options.ops.clear();
    for (const OpInfo& entry : kOps) options.ops.push_back(entry.op);
  } else {
    auto it = std::find_if(std::begin(kOps), std::end(kOps),
                           [&](const OpInfo& entry) { return op == entry.name; });
    if (it == std::end(kOps)) usageError("unknown --op '" + op + "'; expected " + opNames);
    options.ops = {it->op};
  }
  std::optional<int64_t> low = parseBytes(minBytes);
  std::optional<int64_t> high = parseBytes(maxBytes);
  if (!low || *low < 1) usageError("--minbytes '" + minBytes + "' is not a positive byte count");
  if (!high || *high < 1) usageError("--maxbytes '" + maxBytes + "' is not a positive byte count");
  if (*low > *high) usageError("--minbytes is larger than --maxbytes");
  options.minBytes = *low;
  options.maxBytes = *high;
  try {
    options.dtype = c10d::scalarTypeFromName(dtype);
    ReduceOp::Kind kind = c10d::reduceOpFromName(redop);
    options.redop =
        kind == ReduceOp::PREMUL_SUM ? ReduceOp::premulSum(kPremulFactor) : ReduceOp(kind);
  } catch (const c10d::InvalidArgument& e) {
    usageError(e.what());
  }
  options.cuda = device == "cuda";
  if (options.raw && options.cuda) usageError("--raw compares CPU paths; it has no --device cuda");
  // Refused here, identically on every rank, rather than by the first collective.
  for (Op selected : options.ops) {
    if (info(selected).reduces && !c10d::supports(options.redop, options.dtype)) {
      usageError(std::string("reduce op ") + std::string(c10d::name(options.redop.kind())) +
                 " is not defined on " + std::string(c10d::name(options.dtype)) + " (needed by " +
                 info(selected).name + ")");
    }
  }
  return options;
}

}  // namespace commbench
