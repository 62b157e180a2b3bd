#include "benchmarks/comm_bench/Check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/common/Dispatch.hpp"
#include "c10d/core/Half.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"

namespace commbench {
namespace {

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

// Output memory gets all-ones bytes, which no correct result here holds (NaN for floats, -1 for
// signed integers, 255 for uint8, an invalid bool), so an output never written counts as wrong.
void poison(void* data, int64_t count, ScalarType dtype) {
  std::memset(data, 0xff, static_cast<size_t>(count) * c10d::elementSize(dtype));
}

}  // namespace

Pattern::Pattern(const OpInfo& op, const ReduceOp& redop, ScalarType dtype, int ranks)
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

double Pattern::value(int r, int64_t i) const {
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

double Pattern::reduced(int64_t i) const {
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

void Pattern::fill(void* data, int r, int64_t count) const {
  c10d::dispatchByDtype(dtype_, [&]<typename T>() {
    for (int64_t i = 0; i < count; ++i) store<T>(data, i, value(r, i));
  });
}

template <typename Expected>
int64_t Pattern::countWrong(const void* data, int64_t count, Expected&& expected) const {
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
    case Op::Barrier:
      break;
  }
}

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
    case Op::Barrier:
      return 0;  // nothing to check
  }
  return 0;
}

}  // namespace commbench
