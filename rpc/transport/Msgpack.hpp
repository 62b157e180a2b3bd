#pragma once

/// \file
/// msgpack as the wire uses it, for the frame reader (Wire.cpp) and the value format above it
/// (rpc/Serialization.hpp): where packed bytes go, and how much a message may make us allocate.

#include <msgpack.hpp>

#include <cstddef>
#include <string>

namespace c10d::inline v1::rpc {

/// msgpack's packer writes into anything with write(data, size): this appends to a string, so
/// packed bytes land where they are kept, without an intermediate buffer.
struct StringSink {
  std::string& out;  ///< where packed bytes are appended; must outlive the sink
  /// Appends bytes to out.
  /// \param data The bytes.
  /// \param size How many bytes.
  void write(const char* data, size_t size) { out.append(data, size); }
};

/// Values nest at most this deep on the wire.
inline constexpr size_t kMaxNesting = 64;

/// msgpack::unpack, with every announced count bounded by the bytes there are: msgpack allocates
/// an array or map for the count its header announces, so a forged count in a few bytes would
/// otherwise allocate gigabytes. Throws msgpack::unpack_error (size_overflow) past a bound.
/// \param data The msgpack bytes of one value.
/// \param size How many bytes data holds.
/// \return The unpacked value; it copies what it needs, so data may go once this returns.
inline msgpack::object_handle unpackBounded(const char* data, size_t size) {
  return msgpack::unpack(data, size, nullptr, nullptr,
                         msgpack::unpack_limit(size, size / 2, size, size, size, kMaxNesting));
}

}  // namespace c10d::inline v1::rpc
