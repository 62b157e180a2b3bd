// libFuzzer harness for the RPC message decoder: the input is a byte stream fed to the frame
// reader in pieces (sizes drawn from the first byte), as a connection would deliver it. Every
// frame it accepts must lend only tensors it has, survive a round trip (encode, decode again,
// compare; lent tensors streamed), and its payload is unpacked as a call's arguments would be.
// Malformed input may only throw InvalidArgument.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "rpc/Serialization.hpp"
#include "rpc/transport/Wire.hpp"

namespace {

using c10d::rpc::Frame;
using c10d::rpc::FrameReader;

// Small limits keep one input from allocating gigabytes; the checks are the same code.
constexpr uint32_t kMetaLimit = 1 << 20;
constexpr uint64_t kTensorLimit = 1 << 20;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "rpc_frame_fuzzer: %s\n", what);
  std::abort();
}

// Feeds stream to reader, chunk bytes at a time (0: as much as it wants); returns the frames.
std::vector<Frame> decode(const std::string& stream, size_t chunk) {
  FrameReader reader(kMetaLimit, kTensorLimit);
  std::vector<Frame> frames;
  size_t offset = 0;
  while (offset < stream.size()) {
    auto [where, want] = reader.want();
    size_t n = std::min(want, stream.size() - offset);
    if (chunk > 0) n = std::min(n, chunk);
    std::memcpy(where, stream.data() + offset, n);
    offset += n;
    if (auto frame = reader.filled(n)) frames.push_back(std::move(*frame));
  }
  return frames;
}

std::string encode(const Frame& frame) {
  std::string bytes = c10d::rpc::encodeHead(frame);
  for (const c10d::Tensor& t : frame.tensors) {
    bytes.append(static_cast<const char*>(t.data()), t.nbytes());
  }
  return bytes;
}

void checkSame(const Frame& a, const Frame& b) {
  if (a.kind != b.kind || a.id != b.id || a.name != b.name || a.payload != b.payload ||
      a.tensors.size() != b.tensors.size()) {
    die("a decoded frame changed in a round trip");
  }
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const c10d::Tensor& x = a.tensors[i];
    const c10d::Tensor& y = b.tensors[i];
    if (x.dtype() != y.dtype() || x.sizes() != y.sizes() || x.nbytes() != y.nbytes() ||
        std::memcmp(x.data(), y.data(), x.nbytes()) != 0) {
      die("a decoded tensor changed in a round trip");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = data[0] % 8 == 0 ? 0 : data[0] % 8 * 3;
  const std::string stream(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<Frame> frames;
  try {
    frames = decode(stream, chunk);
  } catch (const c10d::InvalidArgument&) {
    // Refused, as a connection would be dropped. Frames before the bad bytes are lost with it.
    return 0;
  }
  for (Frame& frame : frames) {
    // Lent tensors are not on the stream: the transport copies them from the lender. The reader
    // must have checked each index; they are filled here as that copy would fill them.
    std::vector<bool> seen(frame.tensors.size(), false);
    for (const auto& [index, address] : frame.lent) {
      if (index >= frame.tensors.size() || seen[index] || address == 0 || frame.loan == 0) {
        die("the reader accepted a frame that lends a tensor it does not have");
      }
      seen[index] = true;
      std::memset(frame.tensors[index].data(), 0x5a, frame.tensors[index].nbytes());
    }
    std::vector<Frame> again = decode(encode(frame), 0);
    if (again.size() != 1) die("a decoded frame did not re-encode to exactly one frame");
    checkSame(frame, again[0]);
    try {
      using Arguments = std::tuple<int64_t, std::string, std::vector<double>, c10d::Tensor>;
      (void)c10d::rpc::unpackArguments<Arguments>(frame.payload, frame.tensors, frame.name);
    } catch (const c10d::InvalidArgument&) {
      // Arguments of other types or counts: refused with a message, as the agent would.
    }
  }
  return 0;
}
