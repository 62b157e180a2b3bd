// c10d-comm-bench: bandwidth and latency of the collectives of a c10d process group, measured
// the way nccl-tests measures NCCL's, with the same columns; optionally side by side with the
// same operation run straight on Gloo, so the cost of the c10d layer shows.
//
//   c10drun --nproc-per-node N c10d-comm-bench [--op OP|all] [-b MIN] [-e MAX] [-f STEP]
//           [-d DTYPE] [-o REDOP] [-r ROOT] [-n ITERS] [-w WARMUP] [--device cpu|cuda]
//           [--raw] [--json]
//           [--check|--no-check]
//
// Also runs under mpirun, srun or anything else initProcessGroup() understands; the backend
// comes from C10D_BACKEND (default gloo).
//
// Method (nccl-tests'): per size, `warmup` untimed then `iters` timed blocking operations
// (op()->wait()); with --raw the paths run in the order c10d, raw, raw, c10d (half the
// iterations each time, each after its own warm-up). `time` is the slowest rank's
// average per operation; p50/p99 are taken over every rank's individual iterations, min/max over
// the ranks' averages. algbw = size / time, busbw = algbw * the op's bus factor (allreduce
// 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce, sendrecv 1). For
// allgather, reduce_scatter and alltoall `size` is the whole (gathered / scattered / exchanged)
// buffer and `count` the elements of one rank's share; sizes too small to give every rank an
// element are skipped.
//
// --check (the default) fills the inputs so that every result is known, runs the op once per
// size before timing it, and counts the wrong elements over all ranks (#wrong). --raw adds a row
// per size for the same op made straight on the library of the backend that serves CPU tensors:
// Gloo (a context of its own over the job's store, under the prefix "raw-gloo") or MPI (one
// blocking call on a duplicate of MPI_COMM_WORLD). The difference between the rows is the c10d
// layer. The raw paths live in comm_bench_raw_<library>.cpp.
//
// --device cuda puts the buffers on cuda:LOCAL_RANK (the NCCL backend with C10D_BACKEND=nccl,
// or a CPU backend staging through host memory); each timed op then ends when the calling
// thread's stream has finished it.
//
// Rank 0 prints; with --json it prints exactly one JSON line (an array of rows) on stdout.
// Exit status: 0 when every check passed, 3 when any element was wrong (after printing), 2 on a
// usage error, 1 on any other failure.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "CommBench.hpp"
#include "backends/common/Dispatch.hpp"
#include "c10d/Backend.hpp"
#include "c10d/Init.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/Work.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Half.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"
#include "c10d/core/Tensor.hpp"

namespace commbench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRuntimeErrorExitCode = 1;
constexpr int kUsageExitCode = 2;
constexpr int kWrongResultsExitCode = 3;

// premul_sum needs a factor and the command line has no place for one; 2 is exact in every
// dtype, so the check stays exact, and unlike 1 it proves the factor is applied.
constexpr double kPremulFactor = 2.0;

const OpInfo& info(Op op) {
  for (const OpInfo& entry : kOps) {
    if (entry.op == op) return entry;
  }
  std::abort();  // every Op is in kOps
}

// nccl-tests' bus bandwidth factors: what each rank's link must carry relative to the size,
// so that busbw compares across ops and rank counts with the hardware's peak.
double busFactor(Op op, int ranks) {
  double n = ranks;
  switch (op) {
    case Op::Allreduce:
      return 2.0 * (n - 1) / n;
    case Op::Allgather:
    case Op::ReduceScatter:
    case Op::Alltoall:
      return (n - 1) / n;
    case Op::Broadcast:
    case Op::Reduce:
    case Op::SendRecv:
      return 1.0;
  }
  return 1.0;
}

Shape shapeFor(Op op, int64_t bytes, int ranks, size_t elementSize) {
  auto element = static_cast<int64_t>(elementSize);
  Shape shape;
  switch (op) {
    case Op::Allreduce:
    case Op::Broadcast:
    case Op::Reduce:
      shape.count = bytes / element;
      shape.inputCount = shape.count;
      shape.bytes = shape.count * element;
      break;
    case Op::SendRecv:
      shape.count = bytes / element;
      shape.inputCount = shape.outputCount = shape.count;
      shape.bytes = shape.count * element;
      break;
    case Op::Allgather:
      shape.count = bytes / (element * ranks);
      shape.inputCount = shape.count;
      shape.outputCount = shape.count * ranks;
      shape.bytes = shape.outputCount * element;
      break;
    case Op::ReduceScatter:
      shape.count = bytes / (element * ranks);
      shape.inputCount = shape.count * ranks;
      shape.outputCount = shape.count;
      shape.bytes = shape.inputCount * element;
      break;
    case Op::Alltoall:
      shape.count = bytes / (element * ranks);
      shape.inputCount = shape.outputCount = shape.count * ranks;
      shape.bytes = shape.inputCount * element;
      break;
  }
  return shape;
}

// ---- options ----

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
};

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

// ---- element access ----

template <typename T>
void store(void* data, int64_t i, double value) {
  T* out = static_cast<T*>(data) + i;
  if constexpr (c10d::kComputesViaFloat<T>) {
    *out = T(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    *out = value != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    *out = static_cast<T>(static_cast<int64_t>(value));  // wraps like the kernels would
  } else {
    *out = static_cast<T>(value);
  }
}

template <typename T>
double load(const void* data, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    // Read as bytes: a byte other than 0 or 1 (garbage, or the poison) must count as wrong, and
    // reading it as bool would be undefined.
    uint8_t byte = static_cast<const uint8_t*>(data)[i];
    return byte <= 1 ? static_cast<double>(byte) : 2.0;
  } else {
    return static_cast<double>(static_cast<float>(static_cast<const T*>(data)[i]));
  }
}

template <>
double load<double>(const void* data, int64_t i) {
  return static_cast<const double*>(data)[i];
}
template <>
double load<int64_t>(const void* data, int64_t i) {
  return static_cast<double>(static_cast<const int64_t*>(data)[i]);
}
template <>
double load<int32_t>(const void* data, int64_t i) {
  return static_cast<double>(static_cast<const int32_t*>(data)[i]);
}

// value as the dtype holds it, back in double: what an exact collective would produce.
double roundTrip(ScalarType dtype, double value) {
  return c10d::dispatchByDtype(dtype, [&]<typename T>() {
    T stored{};
    store<T>(&stored, 0, value);
    return load<T>(&stored, 0);
  });
}

// Largest integer such that every integer up to it is exact in dtype (and fits).
double exactLimit(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float32:
      return 16777216.0;
    case ScalarType::Float64:
      return 9007199254740992.0;
    case ScalarType::Float16:
      return 2048.0;
    case ScalarType::BFloat16:
      return 256.0;
    case ScalarType::Int8:
      return 127.0;
    case ScalarType::Int16:
      return 32767.0;
    case ScalarType::Int32:
      return 2147483647.0;
    case ScalarType::Int64:
      return 4611686018427387904.0;
    case ScalarType::UInt8:
      return 254.0;  // 255 is the poison (see poison())
    case ScalarType::Bool:
      return 1.0;
  }
  return 1.0;
}

// Relative tolerance: only avg divides, and c10d rounds its quotient through float where this
// program rounds from double, which can differ by one unit in the last place.
double tolerance(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float32:
      return 1e-6;
    case ScalarType::Float64:
      return 1e-12;
    case ScalarType::Float16:
      return 2e-3;
    case ScalarType::BFloat16:
      return 1.6e-2;
    default:
      return 0.0;
  }
}

// ---- check pattern ----

// Small integers chosen per op so that every result, reductions over all ranks included, is
// exactly representable in the dtype (no rounding, no overflow): the expected value can then be
// computed here independently and compared exactly. Values depend on rank and index, so a
// block landing at the wrong offset or from the wrong rank is caught.
class Pattern {
 public:
  Pattern(const OpInfo& op, const ReduceOp& redop, ScalarType dtype, int ranks)
      : redop_(redop),
        dtype_(dtype),
        ranks_(ranks),
        reduces_(op.reduces),
        isBool_(dtype == ScalarType::Bool) {
    double limit = exactLimit(dtype);
    auto clampModulus = [](double m) { return static_cast<int64_t>(std::clamp(m, 1.0, 100.0)); };
    modulus_ = clampModulus(limit);
    if (reduces_) {
      switch (redop.kind()) {
        case ReduceOp::SUM:
        case ReduceOp::AVG:
          modulus_ = clampModulus(std::floor(limit / ranks));
          break;
        case ReduceOp::PREMUL_SUM:
          modulus_ = clampModulus(std::floor(limit / (ranks * redop.factor())));
          break;
        case ReduceOp::PRODUCT:
          // Only ranks below twos_ contribute a 2: the product stays a power of two <= limit.
          twos_ = std::min<int64_t>(ranks, static_cast<int64_t>(std::floor(std::log2(limit))));
          break;
        default:
          break;
      }
    }
  }

  // Rank r's input element i.
  double value(int r, int64_t i) const {
    if (isBool_) return (r + i) % (reduces_ ? 3 : 2) == 0 ? 1.0 : 0.0;
    if (reduces_ && redop_.kind() == ReduceOp::PRODUCT) {
      return r < twos_ && (r + i) % 2 == 0 ? 2.0 : 1.0;
    }
    if (reduces_ && (redop_.kind() == ReduceOp::BAND || redop_.kind() == ReduceOp::BOR ||
                     redop_.kind() == ReduceOp::BXOR)) {
      return static_cast<double>((r * 7 + i * 5 + 3) % (modulus_ + 1));
    }
    return static_cast<double>(1 + (r * 7 + i) % modulus_);
  }

  // The reduction of element i over every rank's input, as the dtype holds it.
  double reduced(int64_t i) const {
    double acc = 0.0;
    for (int r = 0; r < ranks_; ++r) {
      double v = value(r, i);
      if (redop_.kind() == ReduceOp::PREMUL_SUM) v *= redop_.factor();
      if (r == 0) {
        acc = v;
        continue;
      }
      switch (redop_.kind()) {
        case ReduceOp::SUM:
        case ReduceOp::AVG:
        case ReduceOp::PREMUL_SUM:
          acc = isBool_ ? static_cast<double>(acc != 0.0 || v != 0.0) : acc + v;
          break;
        case ReduceOp::PRODUCT:
          acc = isBool_ ? static_cast<double>(acc != 0.0 && v != 0.0) : acc * v;
          break;
        case ReduceOp::MIN:
          acc = std::min(acc, v);
          break;
        case ReduceOp::MAX:
          acc = std::max(acc, v);
          break;
        case ReduceOp::BAND:
          acc = static_cast<double>(static_cast<int64_t>(acc) & static_cast<int64_t>(v));
          break;
        case ReduceOp::BOR:
          acc = static_cast<double>(static_cast<int64_t>(acc) | static_cast<int64_t>(v));
          break;
        case ReduceOp::BXOR:
          acc = static_cast<double>(static_cast<int64_t>(acc) ^ static_cast<int64_t>(v));
          break;
      }
    }
    if (redop_.kind() == ReduceOp::AVG) {
      acc = c10d::isIntegral(dtype_)
                ? static_cast<double>(static_cast<int64_t>(acc) / ranks_)  // truncates, as c10d
                : acc / ranks_;
    }
    return roundTrip(dtype_, acc);
  }

  // Fills count elements of data with rank r's input.
  void fill(void* data, int r, int64_t count) const {
    c10d::dispatchByDtype(dtype_, [&]<typename T>() {
      for (int64_t i = 0; i < count; ++i) store<T>(data, i, value(r, i));
    });
  }

  // Elements of data that differ from expected(i), i over [0, count).
  template <typename Expected>
  int64_t countWrong(const void* data, int64_t count, Expected&& expected) const {
    double tol = tolerance(dtype_);
    return c10d::dispatchByDtype(dtype_, [&]<typename T>() {
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i) {
        double got = load<T>(data, i);
        double want = expected(i);
        if (got == want) continue;
        if (tol > 0.0 && std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want))) continue;
        ++wrong;
      }
      return wrong;
    });
  }

 private:
  ReduceOp redop_;
  ScalarType dtype_;
  int ranks_;
  bool reduces_;
  bool isBool_;
  int64_t modulus_ = 1;
  int64_t twos_ = 0;
};

// Output memory gets all-ones bytes, which no correct result here holds (NaN for floats, -1 for
// signed integers, 255 for uint8, an invalid bool), so an output never written counts as wrong.
void poison(void* data, int64_t count, ScalarType dtype) {
  std::memset(data, 0xff, static_cast<size_t>(count) * c10d::elementSize(dtype));
}

// ---- buffers ----

// One op's memory, allocated once for the largest size (as nccl-tests does); each size uses a
// prefix of it.
struct Buffers {
  Tensor input;
  Tensor output;     // undefined for in-place ops
  Tensor scratch;    // raw reduce_scatter's full-size allreduce buffer
  Tensor hostInput;  // with --device cuda: where checks fill and read
  Tensor hostOutput;
};

Tensor view(const Tensor& memory, int64_t count, ScalarType dtype) {
  return Tensor::fromBlob(memory.data(), dtype, {count}, memory.device());
}

// Sets up inputs (and poisons outputs) so that one run of the op gives a known result.
void prepare(const Case& c, const Pattern& pattern) {
  const Shape& s = c.shape;
  switch (c.op.op) {
    case Op::Broadcast:
      if (c.rank == c.root) {
        pattern.fill(c.hostInput.data(), c.root, s.inputCount);
      } else {
        poison(c.hostInput.data(), s.inputCount, c.dtype);
      }
      break;
    case Op::Allreduce:
    case Op::Reduce:
      pattern.fill(c.hostInput.data(), c.rank, s.inputCount);
      break;
    case Op::Allgather:
    case Op::ReduceScatter:
    case Op::Alltoall:
    case Op::SendRecv:
      pattern.fill(c.hostInput.data(), c.rank, s.inputCount);
      poison(c.hostOutput.data(), s.outputCount, c.dtype);
      break;
  }
}

// Elements of this rank's result that differ from the independently computed expectation.
int64_t countWrong(const Case& c, const Pattern& pattern) {
  const Shape& s = c.shape;
  const int64_t count = s.count;
  switch (c.op.op) {
    case Op::Allreduce:
      return pattern.countWrong(c.hostInput.data(), count,
                                [&](int64_t i) { return pattern.reduced(i); });
    case Op::Reduce:
      if (c.rank != c.root) return 0;  // non-roots' buffers are unspecified afterwards
      return pattern.countWrong(c.hostInput.data(), count,
                                [&](int64_t i) { return pattern.reduced(i); });
    case Op::Broadcast:
      return pattern.countWrong(c.hostInput.data(), count, [&](int64_t i) {
        return roundTrip(c.dtype, pattern.value(c.root, i));
      });
    case Op::Allgather:
      return pattern.countWrong(c.hostOutput.data(), s.outputCount, [&](int64_t k) {
        return roundTrip(c.dtype, pattern.value(static_cast<int>(k / count), k % count));
      });
    case Op::ReduceScatter:
      return pattern.countWrong(c.hostOutput.data(), count,
                                [&](int64_t i) { return pattern.reduced(c.rank * count + i); });
    case Op::Alltoall:
      // Block p of the output is rank p's input block for this rank.
      return pattern.countWrong(c.hostOutput.data(), s.outputCount, [&](int64_t k) {
        return roundTrip(c.dtype,
                         pattern.value(static_cast<int>(k / count), c.rank * count + k % count));
      });
    case Op::SendRecv: {
      int from = (c.rank - 1 + c.ranks) % c.ranks;
      return pattern.countWrong(c.hostOutput.data(), count, [&](int64_t i) {
        return roundTrip(c.dtype, pattern.value(from, i));
      });
    }
  }
  return 0;
}

// With --device cuda: the host views to the device before a run, and back after it.
void upload(const Case& c) {
  if (c.input.device().isCPU()) return;
  c10d::copyTensor(c.input, c.hostInput);
  if (c.output.data() != c.input.data()) c10d::copyTensor(c.output, c.hostOutput);
}

void download(const Case& c) {
  if (c.input.device().isCPU()) return;
  c10d::copyTensor(c.hostInput, c.input);
  if (c.output.data() != c.input.data()) c10d::copyTensor(c.hostOutput, c.output);
}

// ---- the c10d path ----

Runner c10dRunner(c10d::ProcessGroup& pg, const Case& c) {
  Tensor input = c.input;
  Tensor output = c.output;
  ReduceOp redop = c.redop;
  int root = c.root;
  switch (c.op.op) {
    case Op::Allreduce:
      return [&pg, input, redop] { pg.allreduce(input, {.reduceOp = redop})->wait(); };
    case Op::Allgather:
      return [&pg, input, output] { pg.allgatherIntoTensor(output, input)->wait(); };
    case Op::ReduceScatter:
      return [&pg, input, output, redop] {
        pg.reduceScatterTensor(output, input, {.reduceOp = redop})->wait();
      };
    case Op::Broadcast:
      return [&pg, input, root] { pg.broadcast(input, {.rootRank = root})->wait(); };
    case Op::Reduce:
      return [&pg, input, redop, root] {
        pg.reduce(input, {.reduceOp = redop, .rootRank = root})->wait();
      };
    case Op::Alltoall:
      return [&pg, input, output] { pg.alltoallBase(output, input)->wait(); };
    case Op::SendRecv: {
      // Both posted before either is waited for, as nccl-tests groups its send and recv; the
      // receive first, in the same order as the raw path, so Gloo's rendezvous is the same.
      int to = (c.rank + 1) % c.ranks;
      int from = (c.rank - 1 + c.ranks) % c.ranks;
      return [&pg, input, output, to, from] {
        std::shared_ptr<c10d::Work> recv = pg.recv(output, from);
        std::shared_ptr<c10d::Work> send = pg.send(input, to);
        recv->wait();
        send->wait();
      };
    }
  }
  return {};
}

// Device work counts until the calling thread's stream has finished it (a NCCL Work's wait()
// only orders that stream after the op).
Runner onDevice(Runner run, const c10d::Device& device) {
  if (device.isCPU()) return run;
  return [run = std::move(run), device] {
    run();
    c10d::synchronizeCurrentStream(device);
  };
}

// ---- measurement ----

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
                                                int iters) {
  std::vector<std::vector<double>> samples(paths.size());
  auto timed = [&](size_t p, int count) {
    for (int i = 0; i < warmup; ++i) paths[p]();
    // Without it a rank that left the warm-up early would charge its wait for the others to
    // its first timed iteration.
    pg.barrier()->wait();
    for (int i = 0; i < count; ++i) {
      Clock::time_point start = Clock::now();
      paths[p]();
      samples[p].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
  };
  const int firstHalf = (iters + 1) / 2;
  for (size_t p = 0; p < paths.size(); ++p) timed(p, firstHalf);
  for (size_t p = paths.size(); p-- > 0;) timed(p, iters - firstHalf);
  return samples;
}

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
Stats summarize(const Bookkeeping& group, std::vector<double> samples) {
  const int ranks = group.pg.size();
  const auto iters = static_cast<int64_t>(samples.size());
  Tensor mine = Tensor::fromBlob(samples.data(), ScalarType::Float64, {iters});
  Tensor all = Tensor::empty({iters * ranks}, ScalarType::Float64);
  group.run(all, mine, [&](const Tensor& out, const Tensor& in) {
    return group.pg.allgatherIntoTensor(out, in);
  });
  const double* values = all.data<double>();

  Stats stats;
  stats.minUs = std::numeric_limits<double>::infinity();
  for (int r = 0; r < ranks; ++r) {
    double sum = 0.0;
    for (int64_t i = 0; i < iters; ++i) sum += values[r * iters + i];
    double average = sum / static_cast<double>(iters);
    stats.minUs = std::min(stats.minUs, average);
    stats.maxUs = std::max(stats.maxUs, average);
  }
  stats.timeUs = stats.maxUs;
  std::vector<double> sorted(values, values + iters * ranks);
  std::sort(sorted.begin(), sorted.end());
  // Nearest-rank percentiles.
  auto percentile = [&](double p) {
    auto index = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
    return sorted[std::clamp<size_t>(index, 1, sorted.size()) - 1];
  };
  stats.p50Us = percentile(0.50);
  stats.p99Us = percentile(0.99);
  return stats;
}

int64_t sumOverRanks(const Bookkeeping& group, int64_t value) {
  Tensor tensor = Tensor::empty({1}, ScalarType::Int64);
  *tensor.data<int64_t>() = value;
  group.run(tensor, tensor,
            [&](const Tensor& out, const Tensor&) { return group.pg.allreduce(out); });
  return *tensor.data<int64_t>();
}

// ---- output ----

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

std::string formatTime(double us) {
  char text[32];
  std::snprintf(text, sizeof(text), us < 1e5 ? "%.2f" : "%.0f", us);
  return text;
}

class Reporter {
 public:
  Reporter(const Options& options, bool printing) : options_(options), printing_(printing) {}

  void preamble(int ranks, const std::string& backend, const std::string& rawPath) {
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

  void beginOp(const OpInfo& op, const std::vector<std::string>& notes) {
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

  void row(const Row& row) {
    rows_.push_back(row);
    rows_in_op_.push_back(row);
    if (!printing_ || options_.json) return;
    std::string wrong = row.wrong ? std::to_string(*row.wrong) : "N/A";
    std::printf("%12lld  %12lld  %8s  %10s  %6d  %9s  %7.2f  %7.2f  %6s  %9s  %9s  %9s  %9s  %s\n",
                static_cast<long long>(row.bytes), static_cast<long long>(row.count),
                row.dtype.c_str(), row.redop.c_str(), row.root,
                formatTime(row.stats.timeUs).c_str(), row.algbw, row.busbw, wrong.c_str(),
                formatTime(row.stats.p50Us).c_str(), formatTime(row.stats.p99Us).c_str(),
                formatTime(row.stats.minUs).c_str(), formatTime(row.stats.maxUs).c_str(), row.path);
    std::fflush(stdout);
  }

  // nccl-tests' closing line, per path.
  void endOp() {
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
      std::snprintf(text, sizeof(text), "%s%s %.3f GB/s", line.empty() ? "" : ", ", path,
                    sum / rows);
      line += text;
    }
    if (!line.empty()) std::printf("# Avg bus bandwidth: %s\n", line.c_str());
    std::fflush(stdout);
  }

  void finish() {
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

 private:
  const Options& options_;
  bool printing_;
  std::vector<Row> rows_;
  std::vector<Row> rows_in_op_;
};

// ---- driver ----

Buffers allocate(Op op, const Options& options, int ranks, const c10d::Device& device,
                 bool scratch) {
  Shape largest = shapeFor(op, options.maxBytes, ranks, c10d::elementSize(options.dtype));
  Buffers buffers;
  auto bytes = [&](int64_t count) {
    return std::max<int64_t>(count, 1) * static_cast<int64_t>(c10d::elementSize(options.dtype));
  };
  buffers.input = Tensor::empty({bytes(largest.inputCount)}, ScalarType::UInt8, device);
  buffers.hostInput = device.isCPU()
                          ? buffers.input
                          : Tensor::empty({bytes(largest.inputCount)}, ScalarType::UInt8);
  if (largest.outputCount > 0) {
    buffers.output = Tensor::empty({bytes(largest.outputCount)}, ScalarType::UInt8, device);
    buffers.hostOutput = device.isCPU()
                             ? buffers.output
                             : Tensor::empty({bytes(largest.outputCount)}, ScalarType::UInt8);
  }
  if (scratch) buffers.scratch = Tensor::empty({bytes(largest.inputCount)}, ScalarType::UInt8);
  return buffers;
}

// The GPU of this rank on its node: LOCAL_RANK's, as every launcher sets it.
c10d::Device benchmarkDevice(const Options& options) {
  if (!options.cuda) return c10d::Device::cpu();
  int devices = c10d::cudaDeviceCount();
  C10D_CHECK(devices > 0, c10d::InvalidArgument, "--device cuda: no CUDA device is visible here");
  const char* local = std::getenv("LOCAL_RANK");
  int index = local != nullptr ? std::atoi(local) : 0;
  return c10d::Device::cuda(index % devices);
}

int run(const Options& options) {
  std::shared_ptr<c10d::ProcessGroup> pg = c10d::initProcessGroup();
  const int rank = pg->rank();
  const int ranks = pg->size();
  C10D_CHECK(options.root < ranks, c10d::InvalidArgument, "--root ", options.root,
             " is not a rank of this ", ranks, "-rank job");
  const c10d::Device device = benchmarkDevice(options);
  const Bookkeeping bookkeeping = Bookkeeping::of(*pg, device);
  std::unique_ptr<RawPath> raw;
  if (options.raw) raw = connectRawPath(*pg);

  Reporter reporter(options, rank == 0);
  std::shared_ptr<c10d::Backend> backend = pg->backend(device.type);
  reporter.preamble(ranks, backend->name() + " on " + device.str(),
                    raw ? raw->describe() : std::string());
  const std::string dtypeName(c10d::name(options.dtype));
  const std::string redopName(c10d::name(options.redop.kind()));
  int64_t wrongTotal = 0;

  for (Op op : options.ops) {
    const OpInfo& opInfo = info(op);
    std::vector<std::string> notes;
    if (op == Op::SendRecv && ranks < 2) {
      notes.push_back("skipped: sendrecv needs at least 2 ranks");
      reporter.beginOp(opInfo, notes);
      reporter.endOp();
      continue;
    }
    const bool rawHere = raw && raw->prepareOp(opInfo, options.redop, options.dtype, notes);
    reporter.beginOp(opInfo, notes);
    Buffers buffers = allocate(op, options, ranks, device, rawHere && raw->needsScratch(op));
    const Pattern pattern(opInfo, options.redop, options.dtype, ranks);
    const size_t element = c10d::elementSize(options.dtype);

    for (int64_t bytes = options.minBytes; bytes <= options.maxBytes;) {
      Shape shape = shapeFor(op, bytes, ranks, element);
      if (shape.count > 0) {
        Tensor input = view(buffers.input, shape.inputCount, options.dtype);
        Tensor hostInput = view(buffers.hostInput, shape.inputCount, options.dtype);
        bool inPlace = shape.outputCount == 0;
        Tensor output = inPlace ? input : view(buffers.output, shape.outputCount, options.dtype);
        Tensor hostOutput =
            inPlace ? hostInput : view(buffers.hostOutput, shape.outputCount, options.dtype);
        Case c{.op = opInfo,
               .shape = shape,
               .dtype = options.dtype,
               .redop = options.redop,
               .root = options.root,
               .rank = rank,
               .ranks = ranks,
               .input = input,
               .output = output,
               .hostInput = hostInput,
               .hostOutput = hostOutput,
               .scratch = buffers.scratch.defined() ? buffers.scratch.data() : nullptr};
        std::vector<const char*> names{"c10d"};
        std::vector<Runner> runners{onDevice(c10dRunner(*pg, c), device)};
        if (rawHere) {
          names.push_back("raw");
          runners.push_back(raw->runner(c));
        }
        std::vector<std::optional<int64_t>> wrong(runners.size());
        for (size_t p = 0; p < runners.size(); ++p) {
          prepare(c, pattern);
          upload(c);
          if (options.check) {
            runners[p]();
            download(c);
            wrong[p] = sumOverRanks(bookkeeping, countWrong(c, pattern));
            wrongTotal += *wrong[p];
          }
        }
        std::vector<std::vector<double>> samples =
            timeIterations(*pg, runners, options.warmup, options.iters);
        for (size_t p = 0; p < runners.size(); ++p) {
          Stats stats = summarize(bookkeeping, std::move(samples[p]));
          double algbw = static_cast<double>(shape.bytes) / (stats.timeUs * 1e-6) / 1e9;
          reporter.row({opInfo.name, shape.bytes, shape.count, dtypeName,
                        opInfo.reduces ? redopName : "none", opInfo.rooted ? options.root : -1,
                        stats, algbw, algbw * busFactor(op, ranks), wrong[p], names[p]});
        }
      }
      if (bytes > options.maxBytes / options.stepFactor) break;
      bytes *= options.stepFactor;
    }
    reporter.endOp();
  }
  reporter.finish();
  raw.reset();
  // Nobody tears down its connections while a slower rank still reads the last statistics.
  pg->barrier()->wait();
  return wrongTotal > 0 ? kWrongResultsExitCode : 0;
}

}  // namespace

std::unique_ptr<RawPath> connectRawPath(c10d::ProcessGroup& pg) {
  std::shared_ptr<c10d::Backend> backend = pg.backend(c10d::DeviceType::CPU);
#if C10D_WITH_GLOO
  if (backend->name() == "gloo") return connectRawGloo(pg);
#endif
#if C10D_WITH_MPI
  if (backend->name() == "mpi") return connectRawMpi(pg);
#endif
  C10D_THROW(c10d::InvalidArgument, "--raw: this c10d-comm-bench has no raw path for backend '",
             backend->name(), "' (it has one for the gloo and mpi backends it was built with)");
}

}  // namespace commbench

int main(int argc, char** argv) {
  using namespace commbench;
  Options options = parseOptions(argc, argv);
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "c10d-comm-bench: %s\n", e.what());
    return kRuntimeErrorExitCode;
  }
}
