#pragma once

// The TCPStore wire protocol, shared by client (TCPStore.cpp) and server (TCPStoreServer.cpp).
// docs/store-protocol.md is the prose version of this file; change both together.

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1::protocol {

// Handshake, 8 bytes each way. Client: magic, version, 0. Server: magic, its version, status.
// A server with an authentication token answers AuthChallenge followed by its nonce; the client
// sends its nonce and its proof, and the server, once the proof matches, its own proof. Only
// then are requests read. A wrong proof closes the connection. See c10d/net/Auth.hpp.
inline constexpr uint8_t kMagic[4] = {'C', '1', '0', 'D'};
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHandshakeBytes = 8;
enum class HandshakeStatus : uint16_t { Ok = 0, VersionMismatch = 1, AuthChallenge = 2 };
inline constexpr char kClientProofRole[] = "c10d store client";
inline constexpr char kServerProofRole[] = "c10d store server";

// The client's 8 handshake bytes: magic, version (little-endian), 0.
inline std::array<uint8_t, kHandshakeBytes> clientHello(uint16_t version = kVersion) {
  return {kMagic[0],
          kMagic[1],
          kMagic[2],
          kMagic[3],
          static_cast<uint8_t>(version & 0xff),
          static_cast<uint8_t>(version >> 8),
          0,
          0};
}

// Every later message is a frame: u32 little-endian body length, then the body. A request body
// starts with an Op byte, a response body with a Status byte.
inline constexpr size_t kFrameHeaderBytes = 4;
// Large enough for a maximal value plus a maximal key; multiSet/multiGet must fit too.
inline constexpr size_t kMaxFrameBytes = 2 * Store::kMaxValueBytes;

enum class Op : uint8_t {
  Set = 1,         // key, value                  -> Ok
  Get = 2,         // key, timeout_ms             -> Ok value | Timeout keys
  Add = 3,         // key, i64 delta              -> Ok i64
  CompareSet = 4,  // key, expected, desired      -> Ok value
  Delete = 5,      // key                         -> Ok u8 existed
  Check = 6,       // u32 n, n keys               -> Ok u8 all present
  Wait = 7,        // u32 n, n keys, timeout_ms   -> Ok | Timeout keys
  NumKeys = 8,     //                             -> Ok i64
  MultiGet = 9,    // u32 n, n keys, timeout_ms   -> Ok u32 n, n values | Timeout keys
  MultiSet = 10,   // u32 n, n keys, n values     -> Ok
  Append = 11,     // key, value                  -> Ok
  Ping = 12,       //                             -> Ok
  QueuePush = 13,  // key, value                  -> Ok
  QueuePop = 14,   // key, timeout_ms (0: none)   -> Ok u8 popped [value] | Timeout key
  QueueLen = 15,   // key                         -> Ok i64
};
inline constexpr uint8_t kMaxOp = 15;

enum class Status : uint8_t {
  Ok = 0,
  Timeout = 1,  // u32 n, n missing keys
  Error = 2,    // message: the request was understood but failed (e.g. add on a non-integer)
  // message: a misuse that HashStore and FileStore reject with InvalidArgument (add overflowing
  // int64, append past Store::kMaxValueBytes); the client throws the same type.
  InvalidArgument = 3,
};

const char* opName(Op op);

// Appends little-endian fields to a growing frame. beginFrame() reserves the length that
// endFrame() fills in, so a frame is built in one buffer and sent with one write.
class FrameWriter {
 public:
  explicit FrameWriter(std::vector<uint8_t>& out) : out_(out) {}

  void beginFrame() {
    start_ = out_.size();
    out_.resize(start_ + kFrameHeaderBytes);
  }
  void endFrame() {
    uint32_t length = static_cast<uint32_t>(out_.size() - start_ - kFrameHeaderBytes);
    std::memcpy(out_.data() + start_, &length, sizeof(length));
  }
  void u8(uint8_t value) { out_.push_back(value); }
  void u32(uint32_t value) { raw(&value, sizeof(value)); }
  void i64(int64_t value) { raw(&value, sizeof(value)); }
  void bytes(const void* data, size_t size) {
    u32(static_cast<uint32_t>(size));
    raw(data, size);
  }
  void bytes(std::string_view text) { bytes(text.data(), text.size()); }
  void bytes(const Store::Bytes& value) { bytes(value.data(), value.size()); }
  void keys(const std::vector<std::string>& keys) {
    u32(static_cast<uint32_t>(keys.size()));
    for (const auto& key : keys) bytes(key);
  }

 private:
  void raw(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + size);
  }

  std::vector<uint8_t>& out_;
  size_t start_ = 0;
};

// Reads fields from one frame body. Any read past the end, or a field over its limit, throws
// ProtocolError: the peer is not speaking this protocol and its connection must be dropped.
class ProtocolError : public StoreError {
 public:
  using StoreError::StoreError;
};

class FrameReader {
 public:
  FrameReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

  uint8_t u8() {
    need(1);
    return *p_++;
  }
  uint32_t u32() { return fixed<uint32_t>(); }
  int64_t i64() { return fixed<int64_t>(); }
  std::string_view bytes(size_t limit) {
    uint32_t size = u32();
    if (size > limit) {
      C10D_THROW(ProtocolError, "field of ", size, " bytes exceeds the limit of ", limit);
    }
    need(size);
    std::string_view view(reinterpret_cast<const char*>(p_), size);
    p_ += size;
    return view;
  }
  std::string key() {
    std::string_view view = bytes(Store::kMaxKeyBytes);
    if (view.empty()) C10D_THROW(ProtocolError, "empty key");
    return std::string(view);
  }
  Store::Bytes value() {
    std::string_view view = bytes(Store::kMaxValueBytes);
    return Store::Bytes(view.begin(), view.end());
  }
  // A count of items that each take at least minItemBytes: bounded by what is left, so a
  // forged count cannot make the reader reserve memory the frame does not back.
  uint32_t count(size_t minItemBytes) {
    uint32_t n = u32();
    if (static_cast<size_t>(n) * minItemBytes > remaining()) {
      C10D_THROW(ProtocolError, "count ", n, " exceeds what the frame holds");
    }
    return n;
  }
  std::vector<std::string> keys() {
    uint32_t n = count(4);
    std::vector<std::string> result;
    result.reserve(n);
    for (uint32_t i = 0; i < n; ++i) result.push_back(key());
    return result;
  }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  void expectEnd() const {
    if (p_ != end_) C10D_THROW(ProtocolError, remaining(), " unexpected trailing bytes");
  }

 private:
  void need(size_t size) const {
    if (remaining() < size) {
      C10D_THROW(ProtocolError, "truncated frame: need ", size, " bytes, have ", remaining());
    }
  }
  template <typename T>
  T fixed() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, p_, sizeof(T));
    p_ += sizeof(T);
    return value;
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace c10d::inline v1::protocol
