#include "backends/common/Reduce.hpp"

#include <algorithm>

#include "backends/common/Dispatch.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v0 {
namespace {

template <typename T, typename Combine>
void apply(void* out, const void* a, const void* b, size_t n, Combine combine) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (kComputesViaFloat<T>) {
      o[i] = T(combine(static_cast<float>(x[i]), static_cast<float>(y[i])));
    } else {
      o[i] = static_cast<T>(combine(x[i], y[i]));
    }
  }
}

template <typename T>
void sum(void* o, const void* a, const void* b, size_t n) {
  if constexpr (std::is_same_v<T, bool>) {
    apply<T>(o, a, b, n, [](bool x, bool y) { return x || y; });
  } else {
    apply<T>(o, a, b, n, [](auto x, auto y) { return x + y; });
  }
}
template <typename T>
void product(void* o, const void* a, const void* b, size_t n) {
  if constexpr (std::is_same_v<T, bool>) {
    apply<T>(o, a, b, n, [](bool x, bool y) { return x && y; });
  } else {
    apply<T>(o, a, b, n, [](auto x, auto y) { return x * y; });
  }
}
template <typename T>
void minimum(void* o, const void* a, const void* b, size_t n) {
  apply<T>(o, a, b, n, [](auto x, auto y) { return y < x ? y : x; });
}
template <typename T>
void maximum(void* o, const void* a, const void* b, size_t n) {
  apply<T>(o, a, b, n, [](auto x, auto y) { return x < y ? y : x; });
}
template <typename T>
void bitAnd(void* o, const void* a, const void* b, size_t n) {
  apply<T>(o, a, b, n, [](auto x, auto y) { return x & y; });
}
template <typename T>
void bitOr(void* o, const void* a, const void* b, size_t n) {
  apply<T>(o, a, b, n, [](auto x, auto y) { return x | y; });
}
template <typename T>
void bitXor(void* o, const void* a, const void* b, size_t n) {
  apply<T>(o, a, b, n, [](auto x, auto y) { return x ^ y; });
}

template <typename T>
ReduceFunction arithmetic(ReduceOp::Kind kind) {
  switch (kind) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
    case ReduceOp::PREMUL_SUM:
      return &sum<T>;
    case ReduceOp::PRODUCT:
      return &product<T>;
    case ReduceOp::MIN:
      return &minimum<T>;
    case ReduceOp::MAX:
      return &maximum<T>;
    default:
      return nullptr;
  }
}

template <typename T>
ReduceFunction integral(ReduceOp::Kind kind) {
  switch (kind) {
    case ReduceOp::BAND:
      return &bitAnd<T>;
    case ReduceOp::BOR:
      return &bitOr<T>;
    case ReduceOp::BXOR:
      return &bitXor<T>;
    default:
      return arithmetic<T>(kind);
  }
}

}  // namespace

ReduceFunction reduceFunction(const ReduceOp& op, ScalarType dtype) {
  checkReduceOp(op, dtype, "reduce");
  ReduceFunction fn = dispatchByDtype(dtype, [&]<typename T>() -> ReduceFunction {
    if constexpr (std::is_integral_v<T>) {
      return integral<T>(op.kind());
    } else {
      return arithmetic<T>(op.kind());
    }
  });
  C10D_CHECK(fn != nullptr, InvalidArgument, "reduce op ", op, " is not defined on ", dtype);
  return fn;
}

void prepareReduce(const ReduceOp& op, ScalarType dtype, void* data, size_t n) {
  if (op.kind() != ReduceOp::PREMUL_SUM) return;
  const double factor = op.factor();
  dispatchByDtype(dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      auto* values = static_cast<T*>(data);
      for (size_t i = 0; i < n; ++i) {
        if constexpr (kComputesViaFloat<T>) {
          values[i] =
              T(static_cast<float>(static_cast<double>(static_cast<float>(values[i])) * factor));
        } else {
          values[i] = static_cast<T>(static_cast<double>(values[i]) * factor);
        }
      }
    }
  });
}

void finishReduce(const ReduceOp& op, ScalarType dtype, void* data, size_t n, int groupSize) {
  if (op.kind() != ReduceOp::AVG) return;
  dispatchByDtype(dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      auto* values = static_cast<T*>(data);
      for (size_t i = 0; i < n; ++i) {
        if constexpr (kComputesViaFloat<T>) {
          values[i] = T(static_cast<float>(values[i]) / static_cast<float>(groupSize));
        } else if constexpr (std::is_integral_v<T>) {
          values[i] = static_cast<T>(static_cast<int64_t>(values[i]) / groupSize);
        } else {
          values[i] = values[i] / static_cast<T>(groupSize);
        }
      }
    }
  });
}

}  // namespace c10d::inline v0
