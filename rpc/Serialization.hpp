#pragma once

/// \file
/// How RPC arguments and results travel: msgpack for every value (scalars, strings, vectors,
/// maps, tuples, and user structs that opt in with msgpack's MSGPACK_DEFINE), and tensors beside
/// it: a tensor inside a value is packed as a msgpack extension holding its index in the
/// message's tensor list, and its bytes travel after the value, straight from and into tensor
/// memory.
///
/// Threading: pack() and unpack() may run on any thread; the tensor list they use is the calling
/// thread's (thread-local while they run).

#ifndef MSGPACK_NO_BOOST
/// Makes msgpack's headers use no Boost (set before they are included, unless already set).
#define MSGPACK_NO_BOOST
#endif
#include <msgpack.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"
#include "rpc/transport/Msgpack.hpp"

namespace c10d::inline v1::rpc {

/// msgpack extension type of a tensor reference.
inline constexpr int8_t kTensorExtType = 1;

namespace detail {

/// The tensors of the message being packed or unpacked on this thread.
inline thread_local std::vector<Tensor>* tlsTensors = nullptr;

class TensorListScope {
 public:
  explicit TensorListScope(std::vector<Tensor>& tensors) : previous_(tlsTensors) {
    tlsTensors = &tensors;
  }
  ~TensorListScope() { tlsTensors = previous_; }
  TensorListScope(const TensorListScope&) = delete;
  TensorListScope& operator=(const TensorListScope&) = delete;

 private:
  std::vector<Tensor>* previous_;
};

}  // namespace detail

/// A value packed for the wire: msgpack bytes plus the tensors it refers to.
struct Packed {
  std::string bytes;            ///< the msgpack value; tensors in it are indices into tensors
  std::vector<Tensor> tensors;  ///< the tensors the value refers to, in index order
};

/// Packs value (any msgpack-able type, tensors included).
/// \tparam T The value's type.
/// \param value The value; its tensors are shared, not copied.
/// \return The packed value. Throws InvalidArgument for an undefined tensor in value, or an
///   RRef packed outside an RPC call.
template <typename T>
Packed pack(const T& value) {
  Packed packed;
  detail::TensorListScope scope(packed.tensors);
  StringSink sink{packed.bytes};
  msgpack::pack(sink, value);
  return packed;
}

namespace detail {

/// Unpacks bytes (their tensors from tensors), lets check refuse the value, converts it to a T.
/// Errors name what(), which is formatted only then.
template <typename T, typename Check, typename What>
T unpackChecked(const std::string& bytes, std::vector<Tensor>& tensors, const Check& check,
                const What& what) {
  TensorListScope scope(tensors);
  try {
    msgpack::object_handle handle = unpackBounded(bytes.data(), bytes.size());
    check(handle.get());
    return handle.get().as<T>();
  } catch (const msgpack::type_error&) {
    C10D_THROW(InvalidArgument, what(), ": the values sent do not have the expected types");
  } catch (const msgpack::unpack_error& e) {
    C10D_THROW(InvalidArgument, what(), ": malformed msgpack (", e.what(), ")");
  }
}

}  // namespace detail

/// Unpacks a T from bytes, taking tensors from tensors. Throws InvalidArgument naming what()
/// (e.g. "result of 'add' from worker 'w1'"; formatted only then) when the bytes do not hold a T.
/// \tparam T The type to unpack.
/// \tparam What A callable returning a std::string.
/// \param bytes Msgpack bytes, as Packed::bytes.
/// \param tensors The tensors the bytes refer to, as Packed::tensors.
/// \param what Names the value in error messages.
/// \return The value.
template <typename T, typename What>
T unpack(const std::string& bytes, std::vector<Tensor>& tensors, const What& what) {
  return detail::unpackChecked<T>(
      bytes, tensors, [](const msgpack::object&) {}, what);
}

/// Unpacks the arguments of function: a tuple of exactly as many values as it has parameters.
/// \tparam Tuple A std::tuple of the parameters' types.
/// \param bytes Msgpack bytes, as Packed::bytes: a list of the arguments.
/// \param tensors The tensors the bytes refer to, as Packed::tensors.
/// \param function The function's name, for error messages.
/// \return The arguments. Throws InvalidArgument, naming function, for anything but a list of as
///   many values as Tuple has, of its types.
template <typename Tuple>
Tuple unpackArguments(const std::string& bytes, std::vector<Tensor>& tensors,
                      const std::string& function) {
  auto what = [&] { return "arguments of '" + function + "'"; };
  return detail::unpackChecked<Tuple>(
      bytes, tensors,
      [&](const msgpack::object& object) {
        constexpr size_t expected = std::tuple_size_v<Tuple>;
        C10D_CHECK(object.type == msgpack::type::ARRAY, InvalidArgument, what(),
                   ": expected a list of arguments");
        C10D_CHECK(object.via.array.size == expected, InvalidArgument, "'", function, "' takes ",
                   expected, " argument(s), got ", object.via.array.size);
      },
      what);
}

}  // namespace c10d::inline v1::rpc

// Tensors inside msgpack values: an extension holding the tensor's index (uint32, big-endian).
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <>
  struct pack<c10d::Tensor> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& out, const c10d::Tensor& tensor) const {
      auto* tensors = c10d::rpc::detail::tlsTensors;
      C10D_CHECK(tensors != nullptr, c10d::InvalidArgument,
                 "a Tensor can only be packed through c10d::rpc::pack");
      C10D_CHECK(tensor.defined(), c10d::InvalidArgument, "rpc: cannot send an undefined tensor");
      auto index = static_cast<uint32_t>(tensors->size());
      tensors->push_back(tensor);
      char bytes[4] = {static_cast<char>(index >> 24), static_cast<char>(index >> 16),
                       static_cast<char>(index >> 8), static_cast<char>(index)};
      out.pack_ext(sizeof(bytes), c10d::rpc::kTensorExtType);
      out.pack_ext_body(bytes, sizeof(bytes));
      return out;
    }
  };

  template <>
  struct convert<c10d::Tensor> {
    const msgpack::object& operator()(const msgpack::object& object, c10d::Tensor& tensor) const {
      if (object.type != msgpack::type::EXT || object.via.ext.type() != c10d::rpc::kTensorExtType ||
          object.via.ext.size != 4) {
        throw msgpack::type_error();
      }
      auto* tensors = c10d::rpc::detail::tlsTensors;
      if (tensors == nullptr) throw msgpack::type_error();
      const auto* b = reinterpret_cast<const unsigned char*>(object.via.ext.data());
      uint32_t index =
          (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
      C10D_CHECK(index < tensors->size(), c10d::InvalidArgument, "rpc: tensor reference ", index,
                 " but the message carries ", tensors->size(), " tensor(s)");
      tensor = (*tensors)[index];
      return object;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE
}  // namespace msgpack
