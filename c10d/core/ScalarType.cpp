#include "c10d/core/ScalarType.hpp"

#include <string>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

void detail::invalidScalarType(const char* where, ScalarType type) {
  C10D_THROW(InvalidArgument, where, ": invalid ScalarType value ", static_cast<int>(type));
}

std::string_view name(ScalarType type) {
  switch (type) {
#define C10D_NAME(name, type, bytes, text, ...) \
  case ScalarType::name:                        \
    return text;
    C10D_FORALL_SCALAR_TYPES(C10D_NAME)
#undef C10D_NAME
  }
  return "invalid";
}

namespace {

enum class Kind { Float, Integral, Bool };

Kind kindOf(ScalarType type) {
  switch (type) {
#define C10D_KIND(name, type, bytes, text, kind, ...) \
  case ScalarType::name:                              \
    return Kind::kind;
    C10D_FORALL_SCALAR_TYPES(C10D_KIND)
#undef C10D_KIND
  }
  return Kind::Bool;
}

}  // namespace

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
  return kindOf(type) == Kind::Float;
}

bool isIntegral(ScalarType type) {
  return kindOf(type) == Kind::Integral;
}

std::ostream& operator<<(std::ostream& out, ScalarType type) {
  return out << name(type);
}

}  // namespace c10d::inline v1
