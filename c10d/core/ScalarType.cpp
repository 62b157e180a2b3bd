#include "c10d/core/ScalarType.hpp"

#include <string>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v0 {

size_t elementSize(ScalarType type) {
  switch (type) {
    case ScalarType::Float64:
    case ScalarType::Int64:
      return 8;
    case ScalarType::Float32:
    case ScalarType::Int32:
      return 4;
    case ScalarType::Float16:
    case ScalarType::BFloat16:
    case ScalarType::Int16:
      return 2;
    case ScalarType::Int8:
    case ScalarType::UInt8:
    case ScalarType::Bool:
      return 1;
  }
  C10D_THROW(InvalidArgument, "elementSize: invalid ScalarType value ", static_cast<int>(type));
}

std::string_view name(ScalarType type) {
  switch (type) {
    case ScalarType::Float32:
      return "float32";
    case ScalarType::Float64:
      return "float64";
    case ScalarType::Float16:
      return "float16";
    case ScalarType::BFloat16:
      return "bfloat16";
    case ScalarType::Int8:
      return "int8";
    case ScalarType::Int16:
      return "int16";
    case ScalarType::Int32:
      return "int32";
    case ScalarType::Int64:
      return "int64";
    case ScalarType::UInt8:
      return "uint8";
    case ScalarType::Bool:
      return "bool";
  }
  return "invalid";
}

ScalarType scalarTypeFromName(std::string_view text) {
  for (ScalarType type : kAllScalarTypes) {
    if (name(type) == text) return type;
  }
  if (text == "float") return ScalarType::Float32;
  if (text == "double") return ScalarType::Float64;
  if (text == "half") return ScalarType::Float16;
  if (text == "int") return ScalarType::Int32;
  if (text == "long") return ScalarType::Int64;
  std::string known;
  for (ScalarType type : kAllScalarTypes) {
    known += known.empty() ? "" : ", ";
    known += name(type);
  }
  C10D_THROW(InvalidArgument, "unknown dtype '", text, "'; expected one of: ", known);
}

bool isFloatingPoint(ScalarType type) {
  return type == ScalarType::Float32 || type == ScalarType::Float64 ||
         type == ScalarType::Float16 || type == ScalarType::BFloat16;
}

bool isIntegral(ScalarType type) {
  return type == ScalarType::Int8 || type == ScalarType::Int16 || type == ScalarType::Int32 ||
         type == ScalarType::Int64 || type == ScalarType::UInt8;
}

std::ostream& operator<<(std::ostream& out, ScalarType type) {
  return out << name(type);
}

}  // namespace c10d::inline v0
