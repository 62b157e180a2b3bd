#pragma once

#include <cstdint>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Half.hpp"
#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1 {

// Calls fn.template operator()<T>() with T the C++ type that holds dtype's elements (Half and
// BFloat16 for the 16-bit floats), and returns its result.
template <typename Fn>
decltype(auto) dispatchByDtype(ScalarType dtype, Fn&& fn) {
  switch (dtype) {
#define C10D_DISPATCH(name, type, ...) \
  case ScalarType::name:               \
    return fn.template operator()<type>();
    C10D_FORALL_SCALAR_TYPES(C10D_DISPATCH)
#undef C10D_DISPATCH
  }
  C10D_THROW(InvalidArgument, "invalid dtype value ", static_cast<int>(dtype));
}

}  // namespace c10d::inline v1
