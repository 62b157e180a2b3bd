#pragma once

// Private to rpc/: the frames agents exchange and their byte layout.
//
//   header (24 bytes, little-endian): magic "C10R", version, kind, 2 reserved bytes,
//                                     id (u64), meta length (u32), tensor count (u32)
//   meta   (msgpack array): [name (str), payload (bin), [[dtype (int), [sizes...]], ...]]
//   tensor bytes, one tensor after the other, each exactly as its dtype and sizes say
//
// The header and meta are one small buffer; tensor bytes are written straight from tensor
// memory and read straight into tensors allocated for them.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "c10d/core/Tensor.hpp"

namespace c10d::inline v0::rpc {

enum class FrameKind : uint8_t {
  Hello = 1,     // first frame on a connection: id = the sender's worker id
  Request = 2,   // name = function, payload = arguments
  Response = 3,  // payload = result
  Error = 4,     // name = message
  // 5 was reserved for agent-internal messages and never sent (RRef messages are Requests to
  // "c10d."-named functions); a reader refuses it like any unknown kind.
};

struct Frame {
  FrameKind kind = FrameKind::Request;
  uint64_t id = 0;
  std::string name;
  std::string payload;
  std::vector<Tensor> tensors;
};

inline constexpr size_t kHeaderBytes = 24;
inline constexpr uint32_t kMaxMetaBytes = 64u << 20;
inline constexpr uint32_t kMaxTensors = 1u << 16;
// A frame's tensors together; more is refused before anything is allocated.
inline constexpr uint64_t kMaxTensorBytes = uint64_t{64} << 30;

// Header and meta of frame; its tensors' bytes follow on the wire. Throws InvalidArgument for a
// tensor that is not a contiguous CPU tensor.
std::string encodeHead(const Frame& frame);

// Reassembles frames from a byte stream, telling the reader where the next bytes belong so that
// tensor bytes land in their tensors without a copy. Throws InvalidArgument on malformed input
// (bad magic or version, lengths over the limits, unknown dtype, negative sizes).
class FrameReader {
 public:
  // Frames whose metadata or tensors exceed these are refused before anything is allocated.
  explicit FrameReader(uint32_t maxMetaBytes = kMaxMetaBytes,
                       uint64_t maxTensorBytes = kMaxTensorBytes)
      : maxMetaBytes_(maxMetaBytes), maxTensorBytes_(maxTensorBytes) {}

  // Where the next bytes go and at most how many belong there.
  std::pair<char*, size_t> want();
  // n bytes were written at want().first; returns the frame they completed, if any.
  std::optional<Frame> filled(size_t n);

 private:
  enum class Stage { Header, Meta, Tensors };
  void startTensors();

  uint32_t maxMetaBytes_;
  uint64_t maxTensorBytes_;
  Stage stage_ = Stage::Header;
  std::string buffer_ = std::string(kHeaderBytes, '\0');
  size_t have_ = 0;
  Frame frame_;
  uint32_t tensorCount_ = 0;
  size_t tensorIndex_ = 0;
};

}  // namespace c10d::inline v0::rpc
