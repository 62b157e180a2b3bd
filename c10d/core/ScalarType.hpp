#pragma once

/// \file
/// ScalarType, the element types a Tensor can hold, declared once by the X-macro
/// C10D_FORALL_SCALAR_TYPES, with their sizes, names and C++ types.

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ostream>
#include <string_view>

namespace c10d::inline v1 {

struct Half;
struct BFloat16;

/// Every dtype, once. C10D_FORALL_SCALAR_TYPES(X) calls
///
///     X(Enumerator, C++ type of an element, bytes, "name", Kind, DLPack code, MPI type, NCCL type)
///
/// for each, in ScalarType's order. The order is part of the wire format of later layers
/// (collective checks, RPC): append, never reorder. Columns that name other libraries' constants
/// are only expanded where those libraries are included (backends/mpi, backends/nccl, DLPack in
/// Tensor.cpp); C10D_NO_NCCL_TYPE marks a dtype NCCL has no type for. Half and BFloat16
/// (c10d/core/Half.hpp) hold the 16-bit floats' bits.
///
/// This header expands it into ScalarType's enumerators, kAllScalarTypes, elementSize()'s sizes
/// and the ScalarTypeOf specializations; Kind is Float, Integral or Bool (isFloatingPoint(),
/// isIntegral()).
/// \param X A function-like macro taking the eight columns above (it may take the first few and
///        `...` for the rest).
#define C10D_FORALL_SCALAR_TYPES(X)                                                    \
  X(Float32, float, 4, "float32", Float, kDLFloat, MPI_FLOAT, ncclFloat32)             \
  X(Float64, double, 8, "float64", Float, kDLFloat, MPI_DOUBLE, ncclFloat64)           \
  X(Float16, Half, 2, "float16", Float, kDLFloat, MPI_UINT16_T, ncclFloat16)           \
  X(BFloat16, BFloat16, 2, "bfloat16", Float, kDLBfloat, MPI_UINT16_T, ncclBfloat16)   \
  X(Int8, int8_t, 1, "int8", Integral, kDLInt, MPI_INT8_T, ncclInt8)                   \
  X(Int16, int16_t, 2, "int16", Integral, kDLInt, MPI_INT16_T, C10D_NO_NCCL_TYPE)      \
  X(Int32, int32_t, 4, "int32", Integral, kDLInt, MPI_INT32_T, ncclInt32)              \
  X(Int64, int64_t, 8, "int64", Integral, kDLInt, MPI_INT64_T, ncclInt64)              \
  X(UInt8, uint8_t, 1, "uint8", Integral, kDLUInt, MPI_UINT8_T, ncclUint8)             \
  /* Bool: one byte, 0 or 1; MPI and NCCL move it as a byte and combine it as logic */ \
  X(Bool, bool, 1, "bool", Bool, kDLBoolCode, MPI_UINT8_T, ncclUint8)

/// Element types a Tensor can hold.
///
/// The enumerators, generated from C10D_FORALL_SCALAR_TYPES in this order (values 0 to 9):
/// Float32, Float64, Float16, BFloat16, Int8, Int16, Int32, Int64, UInt8, Bool. Each one's
/// name() is its lower-case name ("float32", "bfloat16", "uint8", "bool").
enum class ScalarType : uint8_t {
/// One C10D_FORALL_SCALAR_TYPES row as its enumerator (undefined after use).
/// \param name The row's enumerator.
/// \param ... The row's other columns, unused.
#define C10D_ENUMERATOR(name, ...) name,
  C10D_FORALL_SCALAR_TYPES(C10D_ENUMERATOR)
#undef C10D_ENUMERATOR
};

/// \def C10D_LIST(name, ...)
/// One C10D_FORALL_SCALAR_TYPES row as its kAllScalarTypes element (undefined after use).
/// \param name The row's enumerator.
/// \param ... The row's other columns, unused.

/// \def C10D_BYTES(name, type, bytes, ...)
/// One C10D_FORALL_SCALAR_TYPES row as its size in elementSize() (undefined after use).
/// \param name The row's enumerator, unused.
/// \param type The row's C++ type, unused.
/// \param bytes The row's element size in bytes.
/// \param ... The row's other columns, unused.

/// Every ScalarType, in the enumeration's order (for iterating over the dtypes).
inline constexpr std::array kAllScalarTypes = {
#define C10D_LIST(name, ...) ScalarType::name,
    C10D_FORALL_SCALAR_TYPES(C10D_LIST)
#undef C10D_LIST
};

namespace detail {
[[noreturn]] void invalidScalarType(const char* where, ScalarType type);
}

/// Size of one element in bytes. Throws InvalidArgument for a value that is no ScalarType.
/// \param type The dtype.
/// \return Bytes per element: 8, 4, 2 or 1 (1 for Bool).
/// \throws InvalidArgument when type is not one of ScalarType's enumerators.
inline size_t elementSize(ScalarType type) {
  constexpr size_t kBytes[] = {
#define C10D_BYTES(name, type, bytes, ...) bytes,
      C10D_FORALL_SCALAR_TYPES(C10D_BYTES)
#undef C10D_BYTES
  };
  const auto index = static_cast<size_t>(type);
  if (index < std::size(kBytes)) return kBytes[index];
  detail::invalidScalarType("elementSize", type);
}

/// Lower-case name as PyTorch prints it without the "torch." prefix: "float32", "bfloat16".
/// \param type The dtype.
/// \return Its name; "invalid" for a value that is no ScalarType.
std::string_view name(ScalarType type);

/// Inverse of name(); also accepts the common aliases "float", "double", "half", "int", "long".
/// Throws InvalidArgument naming the unknown string and the accepted names.
/// \param name A dtype's name (case-sensitive).
/// \return The dtype it names.
/// \throws InvalidArgument when name is neither a dtype's name nor an alias.
ScalarType scalarTypeFromName(std::string_view name);

/// \param type The dtype.
/// \return Whether type is a floating-point type.
bool isFloatingPoint(ScalarType type);  ///< float32, float64, float16, bfloat16
/// \param type The dtype.
/// \return Whether type is an integer type.
bool isIntegral(ScalarType type);       ///< int8..int64, uint8 (not bool)

/// Writes name(type) to out.
/// \param out The stream to write to.
/// \param type The dtype to write.
/// \return out.
std::ostream& operator<<(std::ostream& out, ScalarType type);

/// Maps C++ element types to ScalarType for typed accessors (Tensor::data<T>()).
///
/// Specialized (by C10D_FORALL_SCALAR_TYPES) for each dtype's C++ type: float, double, Half,
/// BFloat16, int8_t, int16_t, int32_t, int64_t, uint8_t and bool, each with
/// `static constexpr ScalarType value`. Other types have no definition, so a use fails to compile.
/// \tparam T A C++ element type.
template <typename T>
struct ScalarTypeOf;
/// One C10D_FORALL_SCALAR_TYPES row as its ScalarTypeOf specialization (undefined after use).
/// \param name The row's enumerator, ScalarTypeOf<type>::value.
/// \param type The row's C++ element type.
/// \param ... The row's other columns, unused.
#define C10D_SCALAR_TYPE_OF(name, type, ...)              \
  template <>                                             \
  struct ScalarTypeOf<type> {                             \
    static constexpr ScalarType value = ScalarType::name; \
  };
C10D_FORALL_SCALAR_TYPES(C10D_SCALAR_TYPE_OF)
#undef C10D_SCALAR_TYPE_OF

}  // namespace c10d::inline v1
