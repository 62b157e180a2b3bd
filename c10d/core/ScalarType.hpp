#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace c10d::inline v0 {

// Element types a Tensor can hold. The order is part of the wire format of later layers
// (collective checks, RPC): append, never reorder.
enum class ScalarType : uint8_t {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  Bool,
};

inline constexpr std::array<ScalarType, 10> kAllScalarTypes = {
    ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16,
    ScalarType::Int8,    ScalarType::Int16,   ScalarType::Int32,   ScalarType::Int64,
    ScalarType::UInt8,   ScalarType::Bool,
};

// Size of one element in bytes.
size_t elementSize(ScalarType type);

// Lower-case name as PyTorch prints it without the "torch." prefix: "float32", "bfloat16".
std::string_view name(ScalarType type);

// Inverse of name(); also accepts the common aliases "float", "double", "half", "int", "long".
// Throws InvalidArgument naming the unknown string and the accepted names.
ScalarType scalarTypeFromName(std::string_view name);

bool isFloatingPoint(ScalarType type);  // float32, float64, float16, bfloat16
bool isIntegral(ScalarType type);       // int8..int64, uint8 (not bool)

std::ostream& operator<<(std::ostream& out, ScalarType type);

// Maps C++ element types to ScalarType for typed accessors (Tensor::data<T>()).
template <typename T>
struct ScalarTypeOf;
template <>
struct ScalarTypeOf<float> {
  static constexpr ScalarType value = ScalarType::Float32;
};
template <>
struct ScalarTypeOf<double> {
  static constexpr ScalarType value = ScalarType::Float64;
};
template <>
struct ScalarTypeOf<int8_t> {
  static constexpr ScalarType value = ScalarType::Int8;
};
template <>
struct ScalarTypeOf<int16_t> {
  static constexpr ScalarType value = ScalarType::Int16;
};
template <>
struct ScalarTypeOf<int32_t> {
  static constexpr ScalarType value = ScalarType::Int32;
};
template <>
struct ScalarTypeOf<int64_t> {
  static constexpr ScalarType value = ScalarType::Int64;
};
template <>
struct ScalarTypeOf<uint8_t> {
  static constexpr ScalarType value = ScalarType::UInt8;
};
template <>
struct ScalarTypeOf<bool> {
  static constexpr ScalarType value = ScalarType::Bool;
};

}  // namespace c10d::inline v0
