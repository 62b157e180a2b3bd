#pragma once

/// \file
/// The 16-bit float element types Half (IEEE binary16) and BFloat16, stored as bits.

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1 {

/// IEEE 754 binary16, stored as its bits. Arithmetic goes through float. The conversions give
/// F16C's bits for every input, NaNs included (c10d/core/Kernels.hpp relies on it).
struct Half {
  uint16_t bits = 0;  ///< the binary16 bit pattern (0: +0.0)

  Half() = default;  ///< +0.0
  /// \param value Rounded to the nearest binary16 (ties to even; past the range: infinity).
  explicit Half(float value) : bits(fromFloat(value)) {}
  /// \return The value as a float (exact: every binary16 is a float).
  explicit operator float() const { return toFloat(bits); }

  /// \param value A float; rounded to nearest even, overflowing to infinity, a NaN kept quiet
  ///        with its sign and top payload bits.
  /// \return The binary16 bits of value.
  static uint16_t fromFloat(float value) {
    uint32_t f;
    std::memcpy(&f, &value, sizeof(f));
    uint32_t sign = (f >> 16) & 0x8000u;
    uint32_t magnitude = f & 0x7fffffffu;
    if (magnitude >= 0x7f800000u) {  // inf, or a NaN made quiet with its top payload bits
      return static_cast<uint16_t>(
          sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u | ((magnitude >> 13) & 0x3ffu) : 0u));
    }
    if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow
    if (magnitude < 0x38800000u) {  // subnormal or zero in half: round to nearest even
      float abs;
      std::memcpy(&abs, &magnitude, sizeof(abs));
      abs += 0.5f;  // shifts the half subnormal bits into the low mantissa bits of a float
      uint32_t shifted;
      std::memcpy(&shifted, &abs, sizeof(shifted));
      return static_cast<uint16_t>(sign | (shifted - 0x3f000000u));
    }
    uint32_t mantissaOdd = (magnitude >> 13) & 1u;
    magnitude += 0xc8000fffu + mantissaOdd;  // rebias exponent (-112 << 23) and round to even
    return static_cast<uint16_t>(sign | (magnitude >> 13));
  }

  /// \param h binary16 bits.
  /// \return Their value as a float (a NaN made quiet).
  static float toFloat(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    uint32_t f;
    if (exponent == 0x1f) {  // inf, or a NaN made quiet (as F16C's conversion does)
      f = sign | 0x7f800000u | (mantissa != 0 ? 0x400000u : 0u) | (mantissa << 13);
    } else if (exponent != 0) {
      f = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
      f = sign;
    } else {  // subnormal: value = mantissa * 2^-24
      float value = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
      std::memcpy(&f, &value, sizeof(f));
      f |= sign;
    }
    float result;
    std::memcpy(&result, &f, sizeof(result));
    return result;
  }
};

/// bfloat16: the upper half of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;  ///< the upper 16 bits of a float32 (0: +0.0)

  BFloat16() = default;  ///< +0.0
  /// \param value Rounded to the nearest bfloat16 (ties to even).
  explicit BFloat16(float value) : bits(fromFloat(value)) {}
  /// \return The value as a float (exact).
  explicit operator float() const { return toFloat(bits); }

  /// \param value A float; rounded to nearest even, a NaN kept with its sign and made quiet.
  /// \return The bfloat16 bits of value.
  static uint16_t fromFloat(float value) {
    uint32_t f;
    std::memcpy(&f, &value, sizeof(f));
    if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // NaN
    uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
    return static_cast<uint16_t>((f + rounding) >> 16);
  }

  /// \param b bfloat16 bits.
  /// \return Their value as a float: b in the upper half, zeros below.
  static float toFloat(uint16_t b) {
    uint32_t f = static_cast<uint32_t>(b) << 16;
    float result;
    std::memcpy(&result, &f, sizeof(result));
    return result;
  }
};

/// Half and BFloat16 store bits and compute through float.
/// \tparam T An element type; the constant is true for Half and BFloat16 only.
template <typename T>
inline constexpr bool kComputesViaFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

}  // namespace c10d::inline v1
