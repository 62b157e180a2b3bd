#pragma once

#include <cstdint>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Half.hpp"
#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v0 {

// Calls fn.template operator()<T>() with T the C++ type that holds dtype's elements (Half and
// BFloat16 for the 16-bit floats), and returns its result.
template <typename Fn>
decltype(auto) dispatchByDtype(ScalarType dtype, Fn&& fn) {
  switch (dtype) {
    case ScalarType::Float32:
      return fn.template operator()<float>();
    case ScalarType::Float64:
      return fn.template operator()<double>();
    case ScalarType::Float16:
      return fn.template operator()<Half>();
    case ScalarType::BFloat16:
      return fn.template operator()<BFloat16>();
    case ScalarType::Int8:
      return fn.template operator()<int8_t>();
    case ScalarType::Int16:
      return fn.template operator()<int16_t>();
    case ScalarType::Int32:
      return fn.template operator()<int32_t>();
    case ScalarType::Int64:
      return fn.template operator()<int64_t>();
    case ScalarType::UInt8:
      return fn.template operator()<uint8_t>();
    case ScalarType::Bool:
      return fn.template operator()<bool>();
  }
  C10D_THROW(InvalidArgument, "invalid dtype value ", static_cast<int>(dtype));
}

// Half and BFloat16 store bits and compute through float.
template <typename T>
inline constexpr bool kComputesViaFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

}  // namespace c10d::inline v0
