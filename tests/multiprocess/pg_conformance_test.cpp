// ProcessGroup conformance: every operation of ProcessGroup, run on 1 to 4 ranks (one forked
// process each) for each backend of this build. Written once against ProcessGroup; a backend
// joins with one INSTANTIATE_TEST_SUITE_P line at the bottom.
//
// Expected values are computed here, independently of the library, from inputs chosen so every
// result is exact in its dtype (small integers; sums that float16/bfloat16 hold exactly;
// products of 1, 2 and -1). Each TEST_P forks one job per world size and loops over dtypes, ops
// and sizes inside the ranks; it passes when every rank exits 0.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "c10d/Backend.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/Work.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Half.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"
#include "c10d/core/Tensor.hpp"
#include "tests/support/MultiProcess.hpp"
#include "tests/support/RanksOnBackend.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;
using test::check;
using test::checkEq;
using test::expectThrows;
using test::RankEnv;
using Clock = std::chrono::steady_clock;

// Element values are handled as long double: it holds every int64 and every float exactly.
using Value = long double;
static_assert(std::numeric_limits<Value>::digits >= 64, "expected values need 64-bit mantissas");

template <typename... Args>
std::string str(const Args&... args) {
  return detail::concat(args...);
}

// ---- element access, independent of the library's reductions ----

// What holds an element's bits here: the 16-bit floats' raw bits, and a bool's raw byte, so a
// sentinel can be a byte no bool result may hold (a bool result must be exactly 0 or 1).
template <typename T>
using Raw = std::conditional_t<
    std::is_same_v<T, bool>, uint8_t,
    std::conditional_t<(std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>), uint16_t, T>>;

template <typename T>
Value toValue(Raw<T> raw) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return T::toFloat(raw);
  return static_cast<Value>(raw);
}

template <typename T>
Raw<T> fromValue(Value v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T::fromFloat(static_cast<float>(v));
  }
  return static_cast<Raw<T>>(v);
}

Value get(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
#define C10D_GET(name, type, ...) \
  case ScalarType::name:          \
    return toValue<type>(static_cast<const Raw<type>*>(t.data())[i]);
    C10D_FORALL_SCALAR_TYPES(C10D_GET)
#undef C10D_GET
  }
  return std::numeric_limits<Value>::quiet_NaN();
}

void set(const Tensor& t, int64_t i, Value v) {
  switch (t.dtype()) {
#define C10D_SET(name, type, ...)                              \
  case ScalarType::name:                                       \
    static_cast<Raw<type>*>(t.data())[i] = fromValue<type>(v); \
    break;
    C10D_FORALL_SCALAR_TYPES(C10D_SET)
#undef C10D_SET
  }
}

std::string format(Value v) {
  if (v == std::floor(v) && std::fabs(v) < 9.2e18L) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream out;
  out.precision(20);
  out << v;
  return out.str();
}

template <typename Fn>
void fill(const Tensor& t, Fn&& value) {
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, value(i));
}

// A value no pattern()/small() produces, written into outputs before an op.
Value sentinel(ScalarType dt) {
  return dt == ScalarType::Bool ? 2 : dt == ScalarType::UInt8 ? 255 : 127;
}

void fillSentinel(const Tensor& t) {
  Value s = sentinel(t.dtype());
  fill(t, [s](int64_t) { return s; });
}

// Checks every element of t (from element offset on) against expected(i).
template <typename Fn>
bool checkTensor(const Tensor& t, Fn&& expected, const std::string& what, int64_t offset = 0,
                 int64_t count = -1, std::source_location where = std::source_location::current()) {
  if (count < 0) count = t.numel() - offset;
  int64_t bad = 0;
  int64_t first = -1;
  Value firstExpected = 0, firstActual = 0;
  for (int64_t i = 0; i < count; ++i) {
    Value e = expected(i);
    Value a = get(t, offset + i);
    if (!(a == e)) {
      if (bad++ == 0) {
        first = i;
        firstExpected = e;
        firstActual = a;
      }
    }
  }
  if (bad == 0) return true;
  test::fail(str(what, ": element ", first, " is ", format(firstActual), ", expected ",
                 format(firstExpected), " (", bad, " of ", count, " elements differ)"),
             where);
  return false;
}

// ---- inputs ----

uint64_t mix(int64_t seed, int64_t i) {  // splitmix64 of (seed, i)
  uint64_t z = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) +
               0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Data for moving ops: bool 0/1, uint8 0..200, other dtypes -100..100 (exact everywhere).
Value pattern(ScalarType dt, int64_t seed, int64_t i) {
  uint64_t h = mix(seed, i);
  if (dt == ScalarType::Bool) return static_cast<Value>(h & 1);
  Value v = static_cast<Value>(h % 201);
  return dt == ScalarType::UInt8 ? v : v - 100;
}

// Data for reductions: bool 0/1, uint8 0..16, other dtypes -8..8. Sums over 4 ranks stay within
// [-32, 64]: exact in bfloat16 and float16 and within int8/uint8.
Value small(ScalarType dt, int64_t seed, int64_t i) {
  uint64_t h = mix(seed, i);
  if (dt == ScalarType::Bool) return static_cast<Value>((h >> 7) & 1);
  Value v = static_cast<Value>(h % 17);
  return dt == ScalarType::UInt8 ? v : v - 8;
}

// The reduction of values (one per rank) under op, as the dtype defines it. Bool: SUM, MAX and
// BOR are OR; PRODUCT, MIN and BAND are AND; BXOR is XOR. AVG on integers truncates toward zero.
Value reduceExpected(ScalarType dt, const ReduceOp& op, const std::vector<Value>& values) {
  const int n = static_cast<int>(values.size());
  if (dt == ScalarType::Bool) {
    int ones = static_cast<int>(
        std::count_if(values.begin(), values.end(), [](Value v) { return v != 0; }));
    switch (op.kind()) {
      case ReduceOp::SUM:
      case ReduceOp::MAX:
      case ReduceOp::BOR:
        return ones > 0;
      case ReduceOp::PRODUCT:
      case ReduceOp::MIN:
      case ReduceOp::BAND:
        return ones == n;
      case ReduceOp::BXOR:
        return ones % 2;
      default:
        return std::numeric_limits<Value>::quiet_NaN();  // not defined on bool
    }
  }
  Value sum = 0;
  for (Value v : values) sum += v;
  switch (op.kind()) {
    case ReduceOp::SUM:
      return sum;
    case ReduceOp::PRODUCT: {
      Value product = 1;
      for (Value v : values) product *= v;
      return product;
    }
    case ReduceOp::MIN:
      return *std::min_element(values.begin(), values.end());
    case ReduceOp::MAX:
      return *std::max_element(values.begin(), values.end());
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR: {
      int64_t acc = static_cast<int64_t>(values[0]);
      for (int k = 1; k < n; ++k) {
        int64_t v = static_cast<int64_t>(values[k]);
        acc = op.kind() == ReduceOp::BAND  ? (acc & v)
              : op.kind() == ReduceOp::BOR ? (acc | v)
                                           : (acc ^ v);
      }
      return static_cast<Value>(acc);
    }
    case ReduceOp::AVG:
      if (isFloatingPoint(dt)) return sum / n;
      return static_cast<Value>(static_cast<int64_t>(sum) / n);  // truncating
    case ReduceOp::PREMUL_SUM:
      return sum * static_cast<Value>(op.factor());
  }
  return std::numeric_limits<Value>::quiet_NaN();
}

// Rank r's allreduce input at element i for op, chosen so the result is exact in dt.
Value allreduceInput(ScalarType dt, const ReduceOp& op, int r, int size, int64_t i) {
  const int64_t seed = r + 1;
  if (dt == ScalarType::Bool) return static_cast<Value>((mix(seed, i) >> 9) & 1);
  const bool isUnsigned = dt == ScalarType::UInt8;
  switch (op.kind()) {
    case ReduceOp::PRODUCT: {  // 1, 2 and -1 (2 again for uint8): |product| <= 16
      uint64_t h = mix(seed, i) % 4;
      return h == 1 ? 2 : h == 3 ? (isUnsigned ? 2 : -1) : 1;
    }
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR: {  // any byte, sign-extended for signed types
      int64_t raw = static_cast<int64_t>(mix(seed, i) & 0xff);
      return static_cast<Value>(isUnsigned || raw < 128 ? raw : raw - 256);
    }
    case ReduceOp::AVG:
      // For a size that is not a power of two the last rank evens the sum out to a multiple of
      // size, so the float mean is exact; integers test truncation (including negative sums).
      if (isFloatingPoint(dt) && (size & (size - 1)) != 0) {
        if (r < size - 1) return small(dt, seed, i);
        Value total = size * (static_cast<Value>(mix(0, i) % 9) - 4);
        for (int q = 0; q < size - 1; ++q) total -= small(dt, q + 1, i);
        return total;  // |total| <= 28
      }
      return small(dt, seed, i);
    case ReduceOp::PREMUL_SUM:  // factor 0.5: integers get even inputs, so every order is exact
      return isFloatingPoint(dt) ? small(dt, seed, i) : 2 * small(dt, seed, i);
    default:
      return small(dt, seed, i);
  }
}

// Values beyond what a float (int32, float64) or double (int64) carries exactly: catches a
// reduction that goes through a narrower type.
Value wideInput(ScalarType dt, const ReduceOp&, int r, int, int64_t i) {
  Value s = small(ScalarType::Int64, r + 1, i);
  Value sign = (i + r) % 2 ? 1 : -1;
  switch (dt) {
    case ScalarType::Int64:
      return sign * static_cast<Value>(int64_t{1} << 58) + s * 1000003 + r;
    case ScalarType::Int32:
      return sign * static_cast<Value>(1 << 28) + s * 1001 + r;
    case ScalarType::Float64:
      return s + (r + 1) * std::ldexp(1.0L, -30);
    default:
      return s;
  }
}

const std::vector<ReduceOp>& allReduceOps() {
  static const std::vector<ReduceOp> ops = {
      ReduceOp::SUM,  ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN,           ReduceOp::MAX,
      ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR,    ReduceOp::premulSum(0.5)};
  return ops;
}

// The dtypes the non-reducing ops are checked with.
const std::vector<ScalarType> kMoveTypes = {ScalarType::Float32, ScalarType::Int32,
                                            ScalarType::BFloat16, ScalarType::UInt8,
                                            ScalarType::Bool};
const std::vector<ScalarType> kReduceTypes = {ScalarType::Float32, ScalarType::Int32,
                                              ScalarType::BFloat16, ScalarType::UInt8,
                                              ScalarType::Bool};
const std::vector<int64_t> kSizes = {0, 1, 1023};
// Just over 4 MiB of float32, and a count no world size divides.
constexpr int64_t kLargeOddCount = (int64_t{1} << 20) + 3;

// kSizes, and for float32 two large odd counts as well: 400 KB (several of the fast path's
// 256 KiB pieces) and just over 4 MiB (Gloo's own algorithms where ranks share cores).
std::vector<int64_t> sizesFor(ScalarType dt) {
  std::vector<int64_t> sizes = kSizes;
  if (dt == ScalarType::Float32) {
    sizes.push_back(100003);
    sizes.push_back(kLargeOddCount);
  }
  return sizes;
}

// ---- running operations ----

// Starts an op and waits for it. An error thrown by the call itself (before anything reached
// the wire, so every rank sees it alike) is recorded and returns false: the caller moves on.
// An error from wait() aborts the rank with context: the group may be out of step after it.
template <typename Fn>
bool runOp(const std::string& what, Fn&& start,
           std::source_location where = std::source_location::current()) {
  std::shared_ptr<Work> work;
  try {
    work = start();
  } catch (const std::exception& e) {
    test::fail(str(what, ": the call threw ", test::detail::errorKind(e), ": ", e.what()), where);
    return false;
  }
  if (!check(work != nullptr, what + ": returned no Work", where)) return false;
  try {
    work->wait();
  } catch (const std::exception& e) {
    throw std::runtime_error(
        str(what, ": wait() threw ", test::detail::errorKind(e), ": ", e.what()));
  }
  check(work->isCompleted() && work->isSuccess(),
        what + ": wait() returned but the Work is not complete and successful", where);
  return true;
}

void waitAll(const std::vector<std::shared_ptr<Work>>& works, const std::string& what) {
  for (size_t k = 0; k < works.size(); ++k) {
    try {
      works[k]->wait();
    } catch (const std::exception& e) {
      throw std::runtime_error(
          str(what, ": wait() of op ", k, " threw ", test::detail::errorKind(e), ": ", e.what()));
    }
  }
}

Tensor make(ScalarType dt, std::vector<int64_t> sizes) {
  return Tensor::empty(std::move(sizes), dt);
}

// ---- the fixture ----

class ProcessGroupConformance : public test::RanksOnBackend {
 protected:
  ProcessGroupConformance() : RanksOnBackend("mpi_conformance_W") {}
};

// ---- allreduce ----

using InputFn = Value (*)(ScalarType, const ReduceOp&, int, int, int64_t);

void allreduceCase(RankEnv& env, ScalarType dt, const ReduceOp& op, int64_t n, InputFn input,
                   const char* label = "") {
  Tensor t = make(dt, {n});
  fill(t, [&](int64_t i) { return input(dt, op, env.rank, env.size, i); });
  std::string what = str("allreduce ", label, dt, " ", op, " numel ", n);
  if (!runOp(what, [&] { return env.pg.allreduce(t, {.reduceOp = op}); })) return;
  std::vector<Value> values(env.size);
  checkTensor(
      t,
      [&](int64_t i) {
        for (int r = 0; r < env.size; ++r) values[r] = input(dt, op, r, env.size, i);
        return reduceExpected(dt, op, values);
      },
      what);
}

TEST_P(ProcessGroupConformance, AllreduceEveryDtypeOpAndSize) {
  runOnRanks([](RankEnv& env) {
    for (ScalarType dt : kAllScalarTypes) {
      for (const ReduceOp& op : allReduceOps()) {
        if (!supports(op, dt)) {
          Tensor t = make(dt, {3});
          fill(t, [](int64_t) { return 1; });
          expectThrows<InvalidArgument>([&] { env.pg.allreduce(t, {.reduceOp = op}); },
                                        str("allreduce ", dt, " ", op, " (unsupported)"),
                                        {name(op.kind()), name(dt)});
          continue;
        }
        for (int64_t n : kSizes) allreduceCase(env, dt, op, n, allreduceInput);
      }
    }
    // Values a narrower accumulator would lose.
    for (ScalarType dt : {ScalarType::Int64, ScalarType::Int32, ScalarType::Float64}) {
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN, ReduceOp::MAX}) {
        allreduceCase(env, dt, op, 1023, wideInput, "(wide values) ");
      }
    }
    // Large (>= 4 MiB), with an element count no world size divides.
    const int64_t large = kLargeOddCount;
    allreduceCase(env, ScalarType::Float32, ReduceOp::SUM, large, allreduceInput);
    allreduceCase(env, ScalarType::Float32, ReduceOp::MAX, large, allreduceInput);
    allreduceCase(env, ScalarType::Int64, ReduceOp::SUM, large, allreduceInput);
    allreduceCase(env, ScalarType::BFloat16, ReduceOp::SUM, 2 * large, allreduceInput);
    allreduceCase(env, ScalarType::Float16, ReduceOp::AVG, 2 * large, allreduceInput);
  });
}

// ---- broadcast, reduce ----

TEST_P(ProcessGroupConformance, BroadcastFromEveryRoot) {
  runOnRanks([](RankEnv& env) {
    for (int root = 0; root < env.size; ++root) {
      for (ScalarType dt : kMoveTypes) {
        for (int64_t n : sizesFor(dt)) {
          Tensor t = make(dt, {n});
          const int64_t seed = 100 + root;
          if (env.rank == root) {
            fill(t, [&](int64_t i) { return pattern(dt, seed, i); });
          } else {
            fillSentinel(t);
          }
          std::string what = str("broadcast ", dt, " numel ", n, " root ", root);
          if (!runOp(what, [&] { return env.pg.broadcast(t, {.rootRank = root}); })) continue;
          checkTensor(
              t, [&](int64_t i) { return pattern(dt, seed, i); }, what);
        }
      }
      // A 2-d tensor.
      Tensor t = make(ScalarType::Float64, {7, 5});
      if (env.rank == root) {
        fill(t, [&](int64_t i) { return pattern(ScalarType::Float64, 7 * root, i); });
      } else {
        fillSentinel(t);
      }
      std::string what = str("broadcast float64[7, 5] root ", root);
      if (runOp(what, [&] { return env.pg.broadcast(t, {.rootRank = root}); })) {
        checkTensor(
            t, [&](int64_t i) { return pattern(ScalarType::Float64, 7 * root, i); }, what);
      }
    }
  });
}

TEST_P(ProcessGroupConformance, ReduceToEveryRoot) {
  runOnRanks([](RankEnv& env) {
    for (int root = 0; root < env.size; ++root) {
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX}) {
        for (ScalarType dt : kReduceTypes) {
          for (int64_t n : sizesFor(dt)) {
            auto seed = [&](int r) { return 1 + r + 10 * root; };
            Tensor t = make(dt, {n});
            fill(t, [&](int64_t i) { return small(dt, seed(env.rank), i); });
            std::string what = str("reduce ", dt, " ", op, " numel ", n, " root ", root);
            if (!runOp(what,
                       [&] { return env.pg.reduce(t, {.reduceOp = op, .rootRank = root}); })) {
              continue;
            }
            if (env.rank != root) continue;  // non-roots' tensors are unspecified afterwards
            std::vector<Value> values(env.size);
            checkTensor(
                t,
                [&](int64_t i) {
                  for (int r = 0; r < env.size; ++r) values[r] = small(dt, seed(r), i);
                  return reduceExpected(dt, op, values);
                },
                what);
          }
        }
      }
    }
  });
}

// ---- allgather, gather, scatter ----

TEST_P(ProcessGroupConformance, AllgatherListAndIntoTensor) {
  runOnRanks([](RankEnv& env) {
    for (ScalarType dt : kMoveTypes) {
      for (int64_t n : sizesFor(dt)) {
        auto seed = [](int r) { return 200 + r; };
        Tensor input = make(dt, {n});
        fill(input, [&](int64_t i) { return pattern(dt, seed(env.rank), i); });

        std::vector<Tensor> outputs;
        for (int r = 0; r < env.size; ++r) {
          outputs.push_back(make(dt, {n}));
          fillSentinel(outputs.back());
        }
        std::string what = str("allgather ", dt, " numel ", n);
        if (runOp(what, [&] { return env.pg.allgather(outputs, input); })) {
          for (int r = 0; r < env.size; ++r) {
            checkTensor(
                outputs[r], [&](int64_t i) { return pattern(dt, seed(r), i); },
                str(what, " output ", r));
          }
          checkTensor(
              input, [&](int64_t i) { return pattern(dt, seed(env.rank), i); },
              what + " input (must be unchanged)");
        }

        Tensor flat = make(dt, {n * env.size});
        fillSentinel(flat);
        what = str("allgather_into_tensor ", dt, " numel ", n);
        if (runOp(what, [&] { return env.pg.allgatherIntoTensor(flat, input); })) {
          for (int r = 0; r < env.size; ++r) {
            checkTensor(
                flat, [&](int64_t i) { return pattern(dt, seed(r), i); }, str(what, " chunk ", r),
                r * n, n);
          }
        }
      }
    }
  });
}

TEST_P(ProcessGroupConformance, GatherAndScatterWithEveryRoot) {
  runOnRanks([](RankEnv& env) {
    for (int root = 0; root < env.size; ++root) {
      for (ScalarType dt : kMoveTypes) {
        for (int64_t n : sizesFor(dt)) {
          auto seed = [&](int r) { return 300 + 10 * root + r; };
          Tensor input = make(dt, {n});
          fill(input, [&](int64_t i) { return pattern(dt, seed(env.rank), i); });
          std::vector<Tensor> outputs;
          if (env.rank == root) {
            for (int r = 0; r < env.size; ++r) {
              outputs.push_back(make(dt, {n}));
              fillSentinel(outputs.back());
            }
          }
          std::string what = str("gather ", dt, " numel ", n, " root ", root);
          if (runOp(what, [&] { return env.pg.gather(outputs, input, {.rootRank = root}); })) {
            for (size_t r = 0; r < outputs.size(); ++r) {
              checkTensor(
                  outputs[r], [&](int64_t i) { return pattern(dt, seed(static_cast<int>(r)), i); },
                  str(what, " output ", r));
            }
          }

          auto scatterSeed = [&](int r) { return 400 + 10 * root + r; };
          std::vector<Tensor> inputs;
          if (env.rank == root) {
            for (int r = 0; r < env.size; ++r) {
              inputs.push_back(make(dt, {n}));
              fill(inputs.back(), [&](int64_t i) { return pattern(dt, scatterSeed(r), i); });
            }
          }
          Tensor output = make(dt, {n});
          fillSentinel(output);
          what = str("scatter ", dt, " numel ", n, " root ", root);
          if (runOp(what, [&] { return env.pg.scatter(output, inputs, {.rootRank = root}); })) {
            checkTensor(
                output, [&](int64_t i) { return pattern(dt, scatterSeed(env.rank), i); }, what);
          }
        }
      }
    }
  });
}

// ---- reduce_scatter ----

TEST_P(ProcessGroupConformance, ReduceScatterListAndTensor) {
  runOnRanks([](RankEnv& env) {
    // Rank r's contribution to rank k's output: small(seed(r, k)).
    auto seed = [&](int r, int k) { return 500 + r * env.size + k; };
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN}) {
      for (ScalarType dt : kReduceTypes) {
        for (int64_t n : sizesFor(dt)) {
          std::vector<Value> values(env.size);
          auto expected = [&](int64_t i) {
            for (int r = 0; r < env.size; ++r) values[r] = small(dt, seed(r, env.rank), i);
            return reduceExpected(dt, op, values);
          };

          std::vector<Tensor> inputs;
          for (int k = 0; k < env.size; ++k) {
            inputs.push_back(make(dt, {n}));
            fill(inputs.back(), [&](int64_t i) { return small(dt, seed(env.rank, k), i); });
          }
          Tensor output = make(dt, {n});
          fillSentinel(output);
          std::string what = str("reduce_scatter ", dt, " ", op, " numel ", n);
          if (runOp(what, [&] { return env.pg.reduceScatter(output, inputs, {.reduceOp = op}); })) {
            checkTensor(output, expected, what);
          }

          Tensor flat = make(dt, {n * env.size});
          for (int k = 0; k < env.size; ++k) {
            for (int64_t i = 0; i < n; ++i) set(flat, k * n + i, small(dt, seed(env.rank, k), i));
          }
          fillSentinel(output);
          what = str("reduce_scatter_tensor ", dt, " ", op, " numel ", n);
          if (runOp(what,
                    [&] { return env.pg.reduceScatterTensor(output, flat, {.reduceOp = op}); })) {
            checkTensor(output, expected, what);
          }
        }
      }
    }
  });
}

// ---- all-to-all ----

TEST_P(ProcessGroupConformance, AlltoallListAndBase) {
  runOnRanks([](RankEnv& env) {
    const int size = env.size;
    const int me = env.rank;
    auto seed = [&](int src, int dst) { return 600 + src * size + dst; };

    // List form, equal and uneven sizes: count(src, dst) elements go from src to dst.
    for (ScalarType dt : kMoveTypes) {
      for (int64_t n : sizesFor(dt)) {
        for (bool uneven : {false, true}) {
          auto count = [&](int src, int dst) -> int64_t {
            return uneven && n > 0 ? n + (src + 2 * dst) % 3 - 1 : n;
          };
          std::vector<Tensor> inputs, outputs;
          for (int peer = 0; peer < size; ++peer) {
            inputs.push_back(make(dt, {count(me, peer)}));
            fill(inputs.back(), [&](int64_t i) { return pattern(dt, seed(me, peer), i); });
            outputs.push_back(make(dt, {count(peer, me)}));
            fillSentinel(outputs.back());
          }
          std::string what = str("alltoall ", dt, uneven ? " uneven" : " equal", " base numel ", n);
          if (!runOp(what, [&] { return env.pg.alltoall(outputs, inputs); })) continue;
          for (int src = 0; src < size; ++src) {
            checkTensor(
                outputs[src], [&](int64_t i) { return pattern(dt, seed(src, me), i); },
                str(what, " from rank ", src));
          }
        }
      }
    }

    // Flat, equal splits: rows per peer m, rows of width 1 (1-d) or 3.
    for (ScalarType dt : kMoveTypes) {
      for (int64_t m : {0, 1, 341}) {
        for (int64_t width : {1, 3}) {
          auto shape = [&](int64_t rows) {
            return width == 1 ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, width};
          };
          const int64_t block = m * width;
          Tensor input = make(dt, shape(m * size));
          Tensor output = make(dt, shape(m * size));
          for (int peer = 0; peer < size; ++peer) {
            for (int64_t e = 0; e < block; ++e) {
              set(input, peer * block + e, pattern(dt, seed(me, peer), e));
            }
          }
          fillSentinel(output);
          std::string what =
              str("alltoall_base (equal splits) ", dt, " ", m, " rows of ", width, " per rank");
          if (!runOp(what, [&] { return env.pg.alltoallBase(output, input); })) continue;
          for (int src = 0; src < size; ++src) {
            checkTensor(
                output, [&](int64_t e) { return pattern(dt, seed(src, me), e); },
                str(what, " block from rank ", src), src * block, block);
          }
        }
      }
    }

    // Flat, uneven splits (AlltoAllV), zero-size splits included.
    for (ScalarType dt :
         {ScalarType::Float32, ScalarType::Int32, ScalarType::BFloat16, ScalarType::Bool}) {
      for (int round = 0; round < 3; ++round) {
        auto rows = [&](int src, int dst) -> int64_t {
          if (round < 2) return (src + 2 * dst + round) % 3;
          return (src + dst) % 2 == 0 ? 0 : 257 + 31 * src + dst;
        };
        const int64_t width = 3;
        std::vector<int64_t> inSplits, outSplits;
        for (int peer = 0; peer < size; ++peer) {
          inSplits.push_back(rows(me, peer));
          outSplits.push_back(rows(peer, me));
        }
        const int64_t inRows = std::accumulate(inSplits.begin(), inSplits.end(), int64_t{0});
        const int64_t outRows = std::accumulate(outSplits.begin(), outSplits.end(), int64_t{0});
        Tensor input = make(dt, {inRows, width});
        Tensor output = make(dt, {outRows, width});
        int64_t offset = 0;
        for (int peer = 0; peer < size; ++peer) {
          for (int64_t e = 0; e < inSplits[peer] * width; ++e) {
            set(input, offset + e, pattern(dt, seed(me, peer), e));
          }
          offset += inSplits[peer] * width;
        }
        fillSentinel(output);
        std::string what =
            str("alltoall_base (uneven splits, round ", round, ") ", dt, " input splits ",
                test::detail::show(inSplits), " output splits ", test::detail::show(outSplits));
        if (!runOp(what, [&] { return env.pg.alltoallBase(output, input, outSplits, inSplits); })) {
          continue;
        }
        offset = 0;
        for (int src = 0; src < size; ++src) {
          checkTensor(
              output, [&](int64_t e) { return pattern(dt, seed(src, me), e); },
              str(what, " block from rank ", src), offset, outSplits[src] * width);
          offset += outSplits[src] * width;
        }
      }
    }
  });
}

// ---- barrier, allreduce_coalesced ----

TEST_P(ProcessGroupConformance, BarrierWaitsForEveryRank) {
  runOnRanks([](RankEnv& env) {
    for (int round = 0; round < 3; ++round) {
      const std::string key = str("test/barrier/", round, "/rank0-entered");
      if (env.rank == 0) {
        std::this_thread::sleep_for(100ms);  // the others reach the barrier first
        env.store.setString(key, "1");
      }
      std::string what = str("barrier round ", round);
      if (!runOp(what, [&] { return env.pg.barrier(); })) return;
      // Rank 0 published the key before it entered the barrier: nobody may leave without it.
      check(env.store.check({key}), what + ": left the barrier before rank 0 entered it");
    }
  });
}

TEST_P(ProcessGroupConformance, AllreduceCoalesced) {
  runOnRanks([](RankEnv& env) {
    const std::vector<int64_t> sizes = {5, 0, 1, 1023, 64};
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX}) {
      for (ScalarType dt : {ScalarType::Float32, ScalarType::Int32, ScalarType::BFloat16}) {
        auto seed = [](int r, size_t k) { return 700 + 10 * r + static_cast<int64_t>(k); };
        std::vector<Tensor> tensors;
        for (size_t k = 0; k < sizes.size(); ++k) {
          tensors.push_back(make(dt, {sizes[k]}));
          fill(tensors.back(), [&](int64_t i) { return small(dt, seed(env.rank, k), i); });
        }
        std::string what = str("allreduce_coalesced ", dt, " ", op);
        if (!runOp(what, [&] { return env.pg.allreduceCoalesced(tensors, {.reduceOp = op}); })) {
          continue;
        }
        std::vector<Value> values(env.size);
        for (size_t k = 0; k < sizes.size(); ++k) {
          checkTensor(
              tensors[k],
              [&](int64_t i) {
                for (int r = 0; r < env.size; ++r) values[r] = small(dt, seed(r, k), i);
                return reduceExpected(dt, op, values);
              },
              str(what, " tensor ", k));
        }
      }
    }
  });
}

// ---- point-to-point ----

TEST_P(ProcessGroupConformance, SendRecvRingWithTags) {
  if (worldSize() < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  runOnRanks([](RankEnv& env) {
    const int right = (env.rank + 1) % env.size;
    const int left = (env.rank + env.size - 1) % env.size;
    int iteration = 0;
    for (ScalarType dt : kMoveTypes) {
      for (int64_t n : sizesFor(dt)) {
        // Two messages to the right with distinct tags, received in the opposite order.
        const int tagA = 10 + 2 * iteration, tagB = tagA + 1;
        ++iteration;
        auto seedA = [&](int src) { return 800 + 2 * src; };
        auto seedB = [&](int src) { return 801 + 2 * src; };
        Tensor sendA = make(dt, {n}), sendB = make(dt, {n});
        fill(sendA, [&](int64_t i) { return pattern(dt, seedA(env.rank), i); });
        fill(sendB, [&](int64_t i) { return pattern(dt, seedB(env.rank), i); });
        Tensor recvA = make(dt, {n}), recvB = make(dt, {n});
        fillSentinel(recvA);
        fillSentinel(recvB);
        std::string what = str("send/recv ring ", dt, " numel ", n, " tags ", tagA, "/", tagB);
        std::vector<std::shared_ptr<Work>> works;
        try {
          works.push_back(env.pg.send(sendA, right, tagA));
          // Tag B through the option structs, tag A through the shorthands.
          works.push_back(env.pg.send(sendB, right, SendOptions{.tag = tagB}));
          works.push_back(env.pg.recv(recvB, left, RecvOptions{.tag = tagB}));
          works.push_back(env.pg.recv(recvA, left, tagA));
        } catch (const std::exception& e) {
          throw std::runtime_error(str(what, ": a call threw ", e.what()));
        }
        waitAll(works, what);
        checkTensor(
            recvA, [&](int64_t i) { return pattern(dt, seedA(left), i); }, what + " (tag A)");
        checkTensor(
            recvB, [&](int64_t i) { return pattern(dt, seedB(left), i); }, what + " (tag B)");
        try {
          checkEq(left, works[2]->sourceRank(), what + ": sourceRank() of the recv");
        } catch (const std::exception& e) {
          test::fail(str(what, ": sourceRank() of a completed recv threw ", e.what()));
        }
        expectThrows<Error>([&] { works[0]->sourceRank(); }, what + ": sourceRank() of a send");
      }
    }
  });
}

TEST_P(ProcessGroupConformance, RecvAnysourceReportsTheSender) {
  if (worldSize() < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  runOnRanks([](RankEnv& env) {
    int round = 0;
    for (ScalarType dt : {ScalarType::Float32, ScalarType::Int32}) {
      for (int64_t n : {int64_t{1}, int64_t{1023}}) {
        const int tag = 20 + round++;
        auto seed = [](int src) { return 900 + src; };
        std::string what = str("recv_anysource ", dt, " numel ", n, " tag ", tag);
        if (env.rank != 0) {
          Tensor t = make(dt, {n});
          fill(t, [&](int64_t i) { return pattern(dt, seed(env.rank), i); });
          runOp(what + " (the send)", [&] { return env.pg.send(t, 0, tag); });
          continue;
        }
        // Rank 0 posts one receive per sender, all at once, and must hear from each exactly once.
        std::vector<Tensor> buffers;
        std::vector<std::shared_ptr<Work>> works;
        for (int k = 1; k < env.size; ++k) {
          buffers.push_back(make(dt, {n}));
          fillSentinel(buffers.back());
          works.push_back(env.pg.recvAnysource(buffers.back(), RecvOptions{.tag = tag}));
        }
        waitAll(works, what);
        std::set<int> sources;
        for (size_t k = 0; k < works.size(); ++k) {
          int src = -1;
          try {
            src = works[k]->sourceRank();
          } catch (const std::exception& e) {
            test::fail(str(what, ": sourceRank() threw ", e.what()));
            continue;
          }
          if (!check(src >= 1 && src < env.size && sources.insert(src).second,
                     str(what, ": receive ", k, " reports source ", src,
                         " (out of range or reported twice)"))) {
            continue;
          }
          checkTensor(
              buffers[k], [&](int64_t i) { return pattern(dt, seed(src), i); },
              str(what, " data from reported source ", src));
        }
      }
    }
  });
}

TEST_P(ProcessGroupConformance, BatchIsendIrecvRingBothWays) {
  if (worldSize() < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  runOnRanks([](RankEnv& env) {
    const int right = (env.rank + 1) % env.size;
    const int left = (env.rank + env.size - 1) % env.size;
    for (ScalarType dt : kMoveTypes) {
      for (int64_t n : sizesFor(dt)) {
        auto toRight = [](int src) { return 1000 + 2 * src; };
        auto toLeft = [](int src) { return 1001 + 2 * src; };
        Tensor sendRight = make(dt, {n}), sendLeft = make(dt, {n});
        fill(sendRight, [&](int64_t i) { return pattern(dt, toRight(env.rank), i); });
        fill(sendLeft, [&](int64_t i) { return pattern(dt, toLeft(env.rank), i); });
        Tensor fromLeft = make(dt, {n}), fromRight = make(dt, {n});
        fillSentinel(fromLeft);
        fillSentinel(fromRight);
        std::string what = str("batch_isend_irecv ", dt, " numel ", n);
        std::vector<P2POp> ops = {
            {P2POp::Recv, fromLeft, left, 1},
            {P2POp::Send, sendRight, right, 1},
            {P2POp::Send, sendLeft, left, 2},
            {P2POp::Recv, fromRight, right, 2},
        };
        std::vector<std::shared_ptr<Work>> works;
        try {
          works = env.pg.batchIsendIrecv(ops);
        } catch (const std::exception& e) {
          test::fail(str(what, ": the call threw ", e.what()));
          continue;
        }
        if (!checkEq(ops.size(), works.size(), what + ": one Work per op")) continue;
        waitAll(works, what);
        checkTensor(
            fromLeft, [&](int64_t i) { return pattern(dt, toRight(left), i); },
            what + " (received from the left)");
        checkTensor(
            fromRight, [&](int64_t i) { return pattern(dt, toLeft(right), i); },
            what + " (received from the right)");
      }
    }
  });
}

// ---- asynchronous operation ----

TEST_P(ProcessGroupConformance, OutstandingOpsCompleteInAnyWaitOrder) {
  runOnRanks([](RankEnv& env) {
    constexpr int kOps = 8;
    auto value = [](int r, int k, int64_t i) { return Value((r + 1) * (k + 1) + i % 5); };
    auto opOf = [](int k) { return k % 2 ? ReduceOp::MAX : ReduceOp::SUM; };
    std::vector<Tensor> tensors;
    std::vector<std::shared_ptr<Work>> works;
    for (int k = 0; k < kOps; ++k) {
      int64_t n = k == 3 ? (int64_t{1} << 18) : 1023 + 1000 * k;
      tensors.push_back(make(ScalarType::Float32, {n}));
      fill(tensors.back(), [&](int64_t i) { return value(env.rank, k, i); });
      works.push_back(env.pg.allreduce(tensors.back(), {.reduceOp = opOf(k)}));
    }
    // A callback chained before completion runs once, when the op completes.
    std::atomic<int> thenCalls{0};
    auto chained = works[0]->getFuture()->then([&](Future& parent) {
      ++thenCalls;
      return parent.value();
    });
    std::vector<Value> values(env.size);
    for (int k = kOps - 1; k >= 0; --k) {
      std::string what = str("outstanding allreduce ", k, " (", opOf(k), ")");
      waitAll({works[k]}, what);
      check(works[k]->isCompleted(), what + ": isCompleted() after wait()");
      check(works[k]->isSuccess(), what + ": isSuccess() after wait()");
      check(works[k]->exception() == nullptr, what + ": exception() after success");
      std::vector<Tensor> result = works[k]->result();
      if (checkEq(size_t{1}, result.size(), what + ": result() size")) {
        check(result[0].data() == tensors[k].data() && result[0].numel() == tensors[k].numel(),
              what + ": result() is not the tensor the op wrote");
      }
      works[k]->wait();  // waiting again returns at once
      checkTensor(
          tensors[k],
          [&](int64_t i) {
            for (int r = 0; r < env.size; ++r) values[r] = value(r, k, i);
            return reduceExpected(ScalarType::Float32, opOf(k), values);
          },
          what);
    }
    try {
      chained->wait(10s, "then() future");
      checkEq(1, thenCalls.load(), "Future::then callback calls");
      checkEq(size_t{1}, chained->value().size(), "then() future value size");
    } catch (const std::exception& e) {
      test::fail(str("Future::then: ", e.what()));
    }
    // On a completed future, then() runs the callback at once.
    int lateCalls = 0;
    works[1]->getFuture()->then([&](Future&) {
      ++lateCalls;
      return std::vector<Tensor>{};
    });
    checkEq(1, lateCalls, "then() on a completed future runs at once");

    // Several threads may wait for one Work.
    Tensor t = make(ScalarType::Int32, {4096});
    fill(t, [&](int64_t i) { return Value(env.rank + i % 3); });
    auto work = env.pg.allreduce(t);
    std::atomic<int> waited{0};
    std::vector<std::thread> waiters;
    for (int w = 0; w < 3; ++w) {
      waiters.emplace_back([&] {
        try {
          work->wait();
          ++waited;
        } catch (const std::exception& e) {
          test::fail(str("concurrent wait(): ", e.what()));
        }
      });
    }
    for (auto& thread : waiters) thread.join();
    checkEq(3, waited.load(), "threads whose wait() returned");
    checkTensor(
        t,
        [&](int64_t i) {
          Value sum = 0;
          for (int r = 0; r < env.size; ++r) sum += r + i % 3;
          return sum;
        },
        "allreduce waited for by 3 threads");
  });
}

// ---- subgroups ----

void checkSubgroupAllreduce(RankEnv& env, ProcessGroup& group, const std::vector<int>& members,
                            const std::string& what) {
  Tensor t = make(ScalarType::Int64, {17});
  fill(t, [&](int64_t i) { return Value(100 * (env.rank + 1) + i); });
  if (!runOp(what + " allreduce", [&] { return group.allreduce(t); })) return;
  checkTensor(
      t,
      [&](int64_t i) {
        Value sum = 0;
        for (int global : members) sum += 100 * (global + 1) + i;
        return sum;
      },
      what + " allreduce");
}

void checkMembership(RankEnv& env, ProcessGroup& group, const std::vector<int>& members,
                     const std::string& what) {
  auto it = std::find(members.begin(), members.end(), env.rank);
  const bool member = it != members.end();
  if (!checkEq(member, group.isMember(), what + ": isMember()")) return;
  if (!member) {
    Tensor t = make(ScalarType::Float32, {4});
    fill(t, [](int64_t) { return 1; });
    expectThrows<InvalidArgument>([&] { group.allreduce(t); }, what + ": allreduce on a non-member",
                                  {"member"});
    expectThrows<InvalidArgument>([&] { group.barrier(); }, what + ": barrier on a non-member",
                                  {"member"});
    try {
      group.barrier();
    } catch (const Error& e) {  // its fields name the group and the op, as a member's would
      checkEq(group.groupName(), e.context().group,
              what + ": a non-member's error names the group");
      checkEq(std::string("barrier"), e.context().op, what + ": a non-member's error names the op");
    }
    return;
  }
  const int groupSize = static_cast<int>(members.size());
  checkEq(groupSize, group.size(), what + ": size()");
  checkEq(static_cast<int>(it - members.begin()), group.rank(), what + ": rank()");
  checkEq(members, group.globalRanks(), what + ": globalRanks()");
  for (int k = 0; k < groupSize; ++k) {
    checkEq(members[k], group.globalRank(k), str(what, ": globalRank(", k, ")"));
  }
  for (int global = 0; global < env.size; ++global) {
    auto at = std::find(members.begin(), members.end(), global);
    std::optional<int> expected;
    if (at != members.end()) expected = static_cast<int>(at - members.begin());
    checkEq(expected, group.groupRank(global), str(what, ": groupRank(", global, ")"));
  }
  expectThrows<InvalidArgument>([&] { group.globalRank(groupSize); },
                                str(what, ": globalRank(", groupSize, ")"));
  checkSubgroupAllreduce(env, group, members, what);
}

TEST_P(ProcessGroupConformance, NewGroupAndSplit) {
  runOnRanks([](RankEnv& env) {
    const int size = env.size;
    // newGroup of the first and last rank.
    std::vector<int> ends = size == 1 ? std::vector<int>{0} : std::vector<int>{0, size - 1};
    auto ends_group = env.pg.newGroup(ends);
    checkMembership(env, *ends_group, ends, str("newGroup(", test::detail::show(ends), ")"));

    // split(color = rank % 2, key = -rank): each parity, in descending rank order.
    auto parity = env.pg.split(env.rank % 2, -env.rank);
    std::vector<int> same;
    for (int r = size - 1; r >= 0; --r) {
      if (r % 2 == env.rank % 2) same.push_back(r);
    }
    checkMembership(env, *parity, same, "split(rank % 2, -rank)");

    // A negative color leaves the rank out: rank 0 here (when there is someone else).
    auto without0 = env.pg.split(size > 1 && env.rank == 0 ? -1 : 0, env.rank);
    std::vector<int> rest;
    for (int r = size > 1 ? 1 : 0; r < size; ++r) rest.push_back(r);
    checkMembership(env, *without0, rest, "split(rank 0 color -1)");

    // A group of a subgroup, and the parent still works alongside its subgroups.
    if (parity->isMember()) {
      auto reversed = parity->newGroup({parity->size() - 1});
      std::vector<int> last = {same.back()};
      checkMembership(env, *reversed, last, "split group's newGroup({size - 1})");
    }
    std::vector<int> everyone(size);
    std::iota(everyone.begin(), everyone.end(), 0);
    checkSubgroupAllreduce(env, env.pg, everyone, "parent group after subgroups");
  });
}

// ---- bad input ----

TEST_P(ProcessGroupConformance, BadInputIsInvalidArgumentAndGroupStaysUsable) {
  runOnRanks([](RankEnv& env) {
    ProcessGroup& pg = env.pg;
    const int size = env.size;
    const auto f32 = ScalarType::Float32;
    Tensor input = make(f32, {8});
    fill(input, [](int64_t i) { return Value(i); });

    // Mismatched sizes and counts.
    {
      std::vector<Tensor> outputs;
      for (int r = 0; r < size; ++r) outputs.push_back(make(f32, {r == size - 1 ? 9 : 8}));
      expectThrows<InvalidArgument>([&] { pg.allgather(outputs, input); },
                                    "allgather with an output of the wrong size", {"allgather"});
      outputs.back() = make(ScalarType::Int32, {8});
      expectThrows<InvalidArgument>([&] { pg.allgather(outputs, input); },
                                    "allgather with an output of the wrong dtype", {"allgather"});
      outputs.back() = make(f32, {8});
      outputs.push_back(make(f32, {8}));
      expectThrows<InvalidArgument>([&] { pg.allgather(outputs, input); },
                                    "allgather with size() + 1 outputs", {"allgather"});
      outputs.pop_back();
      outputs.pop_back();
      expectThrows<InvalidArgument>([&] { pg.allgather(outputs, input); },
                                    "allgather with size() - 1 outputs", {"allgather"});
    }
    expectThrows<InvalidArgument>([&] { pg.allgatherIntoTensor(make(f32, {8 * size - 1}), input); },
                                  "allgather_into_tensor with an output one element short",
                                  {"allgather_into_tensor"});
    expectThrows<InvalidArgument>(
        [&] { pg.reduceScatterTensor(make(f32, {8}), make(f32, {8 * size + 1})); },
        "reduce_scatter_tensor with an input one element long", {"reduce_scatter_tensor"});
    {
      std::vector<Tensor> inputs(size + 1, input);
      expectThrows<InvalidArgument>([&] { pg.reduceScatter(make(f32, {8}), inputs); },
                                    "reduce_scatter with size() + 1 inputs", {"reduce_scatter"});
      std::vector<Tensor> outputs(size, make(f32, {8}));
      std::vector<Tensor> fewer(size - 1, input);
      expectThrows<InvalidArgument>([&] { pg.alltoall(outputs, fewer); },
                                    "alltoall with size() - 1 inputs", {"alltoall"});
      if (size > 1) {
        expectThrows<InvalidArgument>(
            [&] { pg.scatter(make(f32, {8}), fewer, {.rootRank = pg.rank()}); },
            "scatter on the root with size() - 1 inputs", {"scatter"});
      }
      std::vector<Tensor> gatherOutputs(size + 1, make(f32, {8}));
      expectThrows<InvalidArgument>(
          [&] { pg.gather(gatherOutputs, input, {.rootRank = pg.rank()}); },
          "gather on the root with size() + 1 outputs", {"gather"});
      if (size > 1) {
        gatherOutputs.pop_back();
        expectThrows<InvalidArgument>(
            [&] { pg.gather(gatherOutputs, input, {.rootRank = (pg.rank() + 1) % size}); },
            "gather with outputs on a non-root", {"gather"});
      }
    }

    // A reduce op the dtype cannot take.
    expectThrows<InvalidArgument>([&] { pg.allreduce(input, {.reduceOp = ReduceOp::BAND}); },
                                  "allreduce BAND on float32", {"band", "float32"});
    Tensor flags = make(ScalarType::Bool, {4});
    fill(flags, [](int64_t i) { return Value(i % 2); });
    expectThrows<InvalidArgument>([&] { pg.allreduce(flags, {.reduceOp = ReduceOp::AVG}); },
                                  "allreduce AVG on bool", {"avg", "bool"});
    expectThrows<InvalidArgument>(
        [&] { pg.reduce(input, {.reduceOp = ReduceOp::BXOR, .rootRank = 0}); },
        "reduce BXOR on float32", {"bxor", "float32"});

    // Ranks out of range.
    expectThrows<InvalidArgument>([&] { pg.broadcast(input, {.rootRank = size}); },
                                  "broadcast with root = size()", {"broadcast"});
    expectThrows<InvalidArgument>([&] { pg.broadcast(input, {.rootRank = -1}); },
                                  "broadcast with root -1", {"broadcast"});
    expectThrows<InvalidArgument>([&] { pg.reduce(input, {.rootRank = size}); },
                                  "reduce with root = size()", {"reduce"});
    expectThrows<InvalidArgument>([&] { pg.send(input, size); }, "send to rank size()", {"send"});
    expectThrows<InvalidArgument>([&] { pg.recv(input, -1); }, "recv from rank -1", {"recv"});

    // Non-contiguous tensors: a transposed view of a 3x4 matrix.
    std::vector<float> storage(12, 1.0f);
    Tensor transposed = Tensor::fromBlob(storage.data(), f32, {4, 3}, Device::cpu(), {1, 4});
    expectThrows<InvalidArgument>([&] { pg.allreduce(transposed); },
                                  "allreduce of a non-contiguous tensor", {"contiguous"});
    expectThrows<InvalidArgument>([&] { pg.broadcast(transposed); },
                                  "broadcast of a non-contiguous tensor", {"contiguous"});
    {
      std::vector<Tensor> outputs(size, transposed);
      expectThrows<InvalidArgument>(
          [&] {
            pg.allgather(outputs, make(f32, {4, 3}));
          },
          "allgather into non-contiguous outputs", {"contiguous"});
    }
    expectThrows<InvalidArgument>([&] { pg.allreduce(Tensor()); },
                                  "allreduce of an undefined tensor", {"allreduce"});

    // Negative tags.
    expectThrows<InvalidArgument>([&] { pg.send(input, 0, -1); }, "send with tag -1", {"tag"});
    expectThrows<InvalidArgument>([&] { pg.recv(input, 0, -1); }, "recv with tag -1", {"tag"});
    expectThrows<InvalidArgument>([&] { pg.recvAnysource(input, -3); },
                                  "recv_anysource with tag -3", {"tag"});
    expectThrows<InvalidArgument>(
        [&] {
          pg.batchIsendIrecv({{P2POp::Send, input, 0, -1}});
        },
        "batch_isend_irecv with tag -1", {"tag"});
    expectThrows<InvalidArgument>(
        [&] {
          pg.batchIsendIrecv({{P2POp::Recv, input, size, 0}});
        },
        "batch_isend_irecv from rank size()", {"batch_isend_irecv"});

    // alltoall_base splits.
    {
      Tensor rows = make(f32, {4 * size, 2});
      Tensor out = make(f32, {4 * size, 2});
      std::vector<int64_t> good(size, 4), short_(size, 4), wrongCount(size + 1, 1);
      short_[0] = 3;
      expectThrows<InvalidArgument>([&] { pg.alltoallBase(out, rows, good, short_); },
                                    "alltoall_base with input splits that do not sum", {"split"});
      expectThrows<InvalidArgument>([&] { pg.alltoallBase(out, rows, short_, good); },
                                    "alltoall_base with output splits that do not sum", {"split"});
      expectThrows<InvalidArgument>([&] { pg.alltoallBase(out, rows, good, wrongCount); },
                                    "alltoall_base with size() + 1 splits", {"split"});
      std::vector<int64_t> negative(size, 4);
      negative[0] = -1;
      if (size > 1) negative[1] = 9;  // the sum still matches the rows
      expectThrows<InvalidArgument>([&] { pg.alltoallBase(out, rows, good, negative); },
                                    "alltoall_base with a negative split", {"split"});
      Tensor odd = make(f32, {4 * size + 1});
      if (size > 1) {
        expectThrows<InvalidArgument>([&] { pg.alltoallBase(odd, odd); },
                                      "alltoall_base with equal splits of a size not divisible",
                                      {"alltoall_base"});
      }
    }

    // Non-positive per-op timeout.
    expectThrows<InvalidArgument>([&] { pg.allreduce(input, {.timeout = 0ms}); },
                                  "allreduce with a zero timeout", {"allreduce", "timeout"});
    expectThrows<InvalidArgument>([&] { pg.broadcast(input, {.timeout = -5ms}); },
                                  "broadcast with a negative timeout",
                                  {"broadcast", "timeout", "-5 ms"});
    if (size > 1) {
      expectThrows<InvalidArgument>([&] { pg.send(input, (env.rank + 1) % size, 0, -7ms); },
                                    "send with a negative timeout", {"send", "timeout"});
    }

    // The group is still usable: every rank runs good collectives.
    Tensor t = make(ScalarType::Int32, {1023});
    fill(t, [&](int64_t i) { return Value(env.rank + 1 + i % 7); });
    if (runOp("allreduce after bad input", [&] { return pg.allreduce(t); })) {
      checkTensor(
          t,
          [&](int64_t i) {
            Value sum = 0;
            for (int r = 0; r < size; ++r) sum += r + 1 + i % 7;
            return sum;
          },
          "allreduce after bad input");
    }
    runOp("barrier after bad input", [&] { return pg.barrier(); });

    // After shutdown (idempotent), operations are refused.
    test::storeBarrier(env.store, "test/before-shutdown", size);
    pg.shutdown();
    pg.shutdown();
    expectThrows<StateError>([&] { pg.allreduce(t); }, "allreduce after shutdown()", {"shut down"});
  });
}

// ---- timeouts ----

TEST_P(ProcessGroupConformance, ShorterWaitGivesUpButTheOpGoesOn) {
  if (worldSize() < 2) GTEST_SKIP() << "needs a peer that sends late";
  runOnRanks([](RankEnv& env) {
    const std::string go = "test/timeout/rank1-may-send";
    if (env.rank == 1) {
      env.store.wait({go}, 30s);
      Tensor t = make(ScalarType::Float32, {16});
      fill(t, [](int64_t i) { return pattern(ScalarType::Float32, 1100, i); });
      runOp("send tag 5 to rank 0", [&] { return env.pg.send(t, 0, 5); });
    }
    if (env.rank != 0) return;
    // Work::wait(timeout) shorter than the op's own gives up with TimeoutError when it passes;
    // the operation itself goes on and completes once the peer sends. (The op's own timeout is
    // 5 s, so a backend that ignores the shorter one fails this in 5 s, not 30.)
    Tensor t = make(ScalarType::Float32, {16});
    fillSentinel(t);
    auto pending = env.pg.recv(t, 1, 5, 5s);
    auto start = Clock::now();
    expectThrows<TimeoutError>([&] { pending->wait(100ms); },
                               "wait(100 ms) on a recv whose sender has not sent");
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    check(elapsed <= 2s, str("wait(100 ms) returned only after ", elapsed.count(), " ms"));
    check(!pending->isCompleted(),
          "the recv completed (failed?) before anyone sent, while wait(100 ms) was waiting");
    env.store.setString(go, "1");
    waitAll({pending}, "recv tag 5 after the sender was let go");
    checkTensor(
        t, [](int64_t i) { return pattern(ScalarType::Float32, 1100, i); },
        "recv tag 5 after an earlier wait(100 ms) timed out");
  });
}

// A Work's callback that issues another collective on the same group and waits for it: the
// backend must run callbacks outside its own locks and after the op has left its queue.
TEST_P(ProcessGroupConformance, ACallbackCanIssueAndWaitForAnotherCollective) {
  runOnRanks([](RankEnv& env) {
    Tensor first = make(ScalarType::Float32, {16});
    Tensor second = make(ScalarType::Float32, {16});
    fill(first, [](int64_t) { return Value(1); });
    fill(second, [](int64_t) { return Value(2); });
    std::promise<std::string> inCallback;
    auto work = env.pg.allreduce(first);
    work->getFuture()->addCallback([&](Future&) {
      try {
        env.pg.allreduce(second)->wait();
        inCallback.set_value("");
      } catch (const std::exception& e) {
        inCallback.set_value(e.what());
      }
    });
    work->wait();
    std::future<std::string> outcome = inCallback.get_future();
    if (!check(outcome.wait_for(std::chrono::seconds(20)) == std::future_status::ready,
               "the collective issued from a callback finished within 20 s")) {
      std::_Exit(1);  // the callback is stuck: leave without destroying what it uses
    }
    checkEq(std::string(), outcome.get(), "the callback's collective succeeded");
    checkTensor(
        second, [&](int64_t) { return Value(2 * env.size); }, "the callback's allreduce");
  });
}

TEST_P(ProcessGroupConformance, PointToPointCompletesWithoutAnyWait) {
  if (worldSize() < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  runOnRanks([](RankEnv& env) {
    const int right = (env.rank + 1) % env.size;
    const int left = (env.rank + env.size - 1) % env.size;
    // Nobody calls wait(): isCompleted() and the future's callbacks must still get there. The
    // pause between rounds lets a backend's progress machinery go idle before the next round.
    for (int round = 0; round < 2; ++round) {
      if (round > 0) std::this_thread::sleep_for(500ms);
      Tensor out = make(ScalarType::Int32, {1000});
      Tensor in = make(ScalarType::Int32, {1000});
      fill(out, [&](int64_t i) { return pattern(ScalarType::Int32, 1200 + env.rank, i); });
      fillSentinel(in);
      auto recv = env.pg.recv(in, left, 40 + round);
      auto send = env.pg.send(out, right, 40 + round);
      auto callbacks = std::make_shared<std::atomic<int>>(0);  // may outlive a failed round
      recv->getFuture()->addCallback([callbacks](Future&) { ++*callbacks; });
      send->getFuture()->addCallback([callbacks](Future&) { ++*callbacks; });
      auto deadline = Clock::now() + 20s;
      while (!(recv->isCompleted() && send->isCompleted() && *callbacks == 2) &&
             Clock::now() < deadline) {
        std::this_thread::sleep_for(1ms);
      }
      std::string what =
          str("round ", round, ": send to ", right, " and recv from ", left, " with no wait()");
      check(recv->isCompleted() && recv->isSuccess(), what + ": the recv never completed");
      check(send->isCompleted() && send->isSuccess(), what + ": the send never completed");
      checkEq(2, callbacks->load(), what + ": future callbacks run");
      checkTensor(
          in, [&](int64_t i) { return pattern(ScalarType::Int32, 1200 + left, i); }, what);
    }
  });
}

TEST_P(ProcessGroupConformance, RecvAndCollectiveTimeOutWhenPeersDoNotTakePart) {
  if (worldSize() < 2) GTEST_SKIP() << "needs a peer that does not take part";
  runOnRanks([](RankEnv& env) {
    // A timeout may leave a group unusable (Gloo closes its context: later ops fail at once),
    // so the collective's timeout is checked on a second group of the same ranks.
    std::vector<int> everyone(env.size);
    std::iota(everyone.begin(), everyone.end(), 0);
    auto second = env.pg.newGroup(everyone);
    // The other ranks keep their groups open (silent) until rank 0 is done.
    const std::string done = "test/timeouts/rank0-done";
    if (env.rank != 0) {
      env.store.wait({done}, 30s);
      return;
    }
    struct Release {
      Store& store;
      std::string key;
      ~Release() {
        try {
          store.setString(key, "1");
        } catch (const std::exception& e) {
          test::fail(str("releasing the other ranks: ", e.what()));
        }
      }
    } release{env.store, done};

    // A receive nobody answers fails with TimeoutError after its own 300 ms.
    Tensor never = make(ScalarType::Float32, {16});
    auto start = Clock::now();
    auto work = env.pg.recv(never, 1, RecvOptions{.tag = 9, .timeout = 300ms});
    expectThrows<TimeoutError>([&] { work->wait(); }, "recv with a 300 ms timeout", {"recv"});
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    check(elapsed >= 250ms, str("recv timed out after ", elapsed.count(), " ms, before 300 ms"));
    check(elapsed <= 5s, str("recv timed out only after ", elapsed.count(), " ms"));
    check(work->isCompleted() && !work->isSuccess() && work->exception() != nullptr,
          "a timed-out Work is completed, unsuccessful and holds its exception");

    // Whatever a timeout leaves behind, a later op on that group ends (it may fail) instead of
    // hanging past its own timeout.
    Tensor later = make(ScalarType::Float32, {16});
    start = Clock::now();
    try {
      env.pg.recv(later, 1, 10, 300ms)->wait();
      test::fail("recv after a timed-out recv succeeded, but nobody sent");
    } catch (const Error&) {
    }
    elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    check(elapsed <= 5s, str("a recv after a timeout ended only after ", elapsed.count(), " ms"));

    // A collective the other ranks never join times out the same way, except over MPI, which
    // cannot abandon one (CollectiveAloneTimesOutWithTheGroupTimeout says so as a skip).
    if (env.pg.backend(DeviceType::CPU)->name() == "mpi") return;
    Tensor lonely = make(ScalarType::Float32, {16});
    fill(lonely, [](int64_t) { return 1; });
    start = Clock::now();
    auto collective = second->allreduce(lonely, {.timeout = 300ms});
    expectThrows<TimeoutError>([&] { collective->wait(); },
                               "allreduce that the other ranks never join, 300 ms timeout");
    elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    check(elapsed >= 250ms,
          str("allreduce timed out after ", elapsed.count(), " ms, before 300 ms"));
    check(elapsed <= 5s, str("allreduce timed out only after ", elapsed.count(), " ms"));
  });
}

TEST_P(ProcessGroupConformance, CollectiveAloneTimesOutWithTheGroupTimeout) {
  if (worldSize() < 2) GTEST_SKIP() << "needs a peer that does not take part";
  if (GetParam().backend == "mpi") {
    GTEST_SKIP() << "MPI cannot abandon a collective: the mpi backend ends the job at the "
                    "timeout instead (ctest: mpi_collective_timeout_aborts_the_job)";
  }
  runOnRanks([](RankEnv& env) {
    // The group's default timeout (not a per-op one) governs the backend's default path: for
    // Gloo that is the SyncMesh, whose sockets carry the group's timeout.
    std::vector<int> everyone(env.size);
    std::iota(everyone.begin(), everyone.end(), 0);
    ProcessGroupOptions options;
    options.backend = env.pg.backend(DeviceType::CPU)->name();
    options.timeout = 500ms;
    auto shortGroup = env.pg.newGroup(everyone, options);
    const std::string done = "test/group-timeout/rank0-done";
    if (env.rank != 0) {
      env.store.wait({done}, 30s);
      return;
    }
    Tensor alone = make(ScalarType::Float32, {1024});
    auto start = Clock::now();
    expectThrows<TimeoutError>([&] { shortGroup->allreduce(alone)->wait(); },
                               "allreduce nobody else joins", {"allreduce"});
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    env.store.setString(done, "1");
    check(elapsed >= 400ms, str("timed out after ", elapsed.count(), " ms, before 500 ms"));
    check(elapsed <= 5s, str("timed out only after ", elapsed.count(), " ms"));
  });
}

// An op's own timeout is when it fails, whatever the group's: longer than the group's, it waits
// for a rank that comes later than the group's timeout (on Gloo over sockets too, whose own
// timeout is the group's), and the group stays usable after it.
TEST_P(ProcessGroupConformance, AnOpsLongerTimeoutOutlastsTheGroups) {
  if (worldSize() < 2) GTEST_SKIP() << "needs a rank that comes late";
  if (GetParam().backend == "mpi") {
    GTEST_SKIP() << "MPI collectives have no timeout of their own to outlast (the backend only "
                    "watches them)";
  }
  runOnRanks([](RankEnv& env) {
    std::vector<int> everyone(env.size);
    std::iota(everyone.begin(), everyone.end(), 0);
    ProcessGroupOptions options;
    options.backend = env.pg.backend(DeviceType::CPU)->name();
    options.timeout = 400ms;
    auto shortGroup = env.pg.newGroup(everyone, options);
    Tensor values = make(ScalarType::Float32, {256});
    fill(values, [&](int64_t i) { return static_cast<double>(env.rank + i); });
    if (env.rank == env.size - 1) std::this_thread::sleep_for(1200ms);
    shortGroup->allreduce(values, {.timeout = 10s})->wait();
    check(
        values.data<float>()[3] == static_cast<float>(env.size * 3 + env.size * (env.size - 1) / 2),
        "the allreduce that waited past the group's timeout summed every rank");
    // The same group, its own timeout again.
    fill(values, [](int64_t) { return 1; });
    shortGroup->allreduce(values)->wait();
    check(values.data<float>()[0] == static_cast<float>(env.size), "the next allreduce");
  });
}

// One line per backend (e.g. INSTANTIATE_TEST_SUITE_P(Mpi, ..., worldSizes("mpi"), paramName));
// a backend this build lacks is skipped.
INSTANTIATE_TEST_SUITE_P(Gloo, ProcessGroupConformance,
                         ::testing::ValuesIn(test::worldSizes("gloo")), test::worldSizeName);
INSTANTIATE_TEST_SUITE_P(Mpi, ProcessGroupConformance, ::testing::ValuesIn(test::worldSizes("mpi")),
                         test::worldSizeName);

}  // namespace
}  // namespace c10d::inline v1
