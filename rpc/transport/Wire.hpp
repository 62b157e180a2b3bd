#pragma once

// Private to rpc/: the frames agents exchange and their byte layout.
//
//   header (24 bytes, little-endian): magic "C10R", version, kind, 2 reserved bytes,
//                                     id (u64), meta length (u32), tensor count (u32)
//   meta   (msgpack array): [name (str), payload (bin), [[dtype (int), [sizes...]], ...],
//                            loan (u64), seal address (u64), [[tensor index, address (u64)], ...]]
//   tensor bytes, one tensor after the other, each exactly as its dtype and sizes say, except
//   the lent ones
//
// The header and meta are one small buffer; tensor bytes are written straight from tensor
// memory and read straight into tensors allocated for them.
//
// Lent tensors: between workers on one host that have proved they can read each other's memory
// (rpc/transport/Lending.cpp), a tensor of kLendBytes or more does not travel on the stream. The
// meta gives its address in the sender, which holds it under the frame's loan id until the
// receiver has copied it (process_vm_readv) and answered Returned(loan). The seal is a word in the
// sender that holds the loan id while the loan stands; the receiver reads it after its copy.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1::rpc {

enum class FrameKind : uint8_t {
  Hello = 1,     // first frame on a connection: id = the sender's worker id
  Request = 2,   // name = function, payload = arguments
  Response = 3,  // payload = result
  Error = 4,     // name = message
  // The transport's own, never delivered to the agent (rpc/transport/Lending.cpp):
  Probe = 5,     // name = the sender's host identity, payload = a challenge to write in memory
  Proof = 6,     // id = the prover's pid, payload = the address where it wrote the challenge
  Lend = 7,      // the sender read the challenge there: lend it tensors from now on
  Returned = 8,  // id = a loan whose tensors the sender has copied
};
inline constexpr uint8_t kLastFrameKind = 8;

struct Frame {
  FrameKind kind = FrameKind::Request;
  uint64_t id = 0;
  std::string name;
  std::string payload;
  std::vector<Tensor> tensors;
  // Read side: tensors still in the sender's memory (index into tensors, address there), which
  // the sender holds under loan until told Returned(loan). Empty when loan is 0.
  std::vector<std::pair<uint32_t, uint64_t>> lent;
  uint64_t loan = 0;
  uint64_t seal = 0;  // the seal's address in the sender
};

// Tensors from this size up are lent to a peer that can read this process's memory. A loan costs
// each side a Returned frame to read, which smaller tensors do not earn back (measured:
// docs/performance-history.md, "Figures that lived in code comments").
inline constexpr size_t kLendBytes = 256 * 1024;
inline bool lendable(const Tensor& t) {
  return t.nbytes() >= kLendBytes;
}

inline constexpr size_t kHeaderBytes = 24;
inline constexpr uint32_t kMaxMetaBytes = 64u << 20;
inline constexpr uint32_t kMaxTensors = 1u << 16;
// A frame's tensors together; more is refused before anything is allocated.
inline constexpr uint64_t kMaxTensorBytes = uint64_t{64} << 30;

// Header and meta of frame; its tensors' bytes follow on the wire, but with loan not 0 those of
// lendable tensors stay behind, their addresses (and the seal's) in the meta. Throws
// InvalidArgument for a tensor that is not a contiguous CPU tensor.
std::string encodeHead(const Frame& frame, uint64_t loan = 0, uint64_t seal = 0);

// 8 bytes, little-endian: a Proof's address.
std::string u64Bytes(uint64_t value);
uint64_t fromU64Bytes(std::string_view bytes);

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
  std::vector<bool> lentMask_;  // by tensor index: lent, so not on the stream
};

}  // namespace c10d::inline v1::rpc
