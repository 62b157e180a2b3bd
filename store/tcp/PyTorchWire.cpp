#include "store/tcp/PyTorchWire.hpp"

#include <array>
#include <cstring>

#include "store/tcp/StoreProtocol.hpp"

namespace c10d::inline v1::pytorch_wire {
namespace {

constexpr size_t kRequests = static_cast<size_t>(Request::Count);
// Indexed by Request. From DELETE_KEY on both tables agree: v2 added VALIDATE in front and
// dropped WATCH_KEY.
constexpr std::array<int, kRequests> kV1Codes = {-1, 0, 1,  2,  3,  4,  5,  6,  7,
                                                 8,  9, 10, 11, 12, -1, -1, -1, -1};
constexpr std::array<int, kRequests> kV2Codes = {0, 1, 2,  3,  4,  5,  6,  7,  -1,
                                                 8, 9, 10, 11, 12, 13, 14, 15, 16};
constexpr std::array<const char*, kRequests> kNames = {
    "validate",  "set",         "compare_set", "get",        "add",       "check",
    "wait",      "num_keys",    "watch_key",   "delete_key", "append",    "multi_get",
    "multi_set", "cancel_wait", "ping",        "queue_push", "queue_pop", "queue_len"};

// Reads one request's fields from a buffer that may end mid-request: each read returns false
// when the bytes are not all there yet.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : p_(data), end_(data + size), begin_(data) {}

  template <typename T>
  bool fixed(T& value) {
    if (left() < sizeof(T)) return short_(sizeof(T));
    std::memcpy(&value, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  // A u64 length and that many bytes, seen in place (a request that has not all arrived is
  // read again from its start later, so nothing is copied until it has).
  bool bytes(std::string_view& view, size_t limit, const char* what) {
    uint64_t size;
    if (!fixed(size)) return false;
    if (size > limit) {
      C10D_THROW(protocol::ProtocolError, "PyTorch client sent a ", what, " of ", size,
                 " bytes; the limit is ", limit);
    }
    if (left() < size) return short_(size);
    view = std::string_view(reinterpret_cast<const char*>(p_), size);
    p_ += size;
    return true;
  }
  bool key(std::vector<std::string_view>& keys) {
    return bytes(keys.emplace_back(), Store::kMaxKeyBytes, "key");
  }
  bool value(std::vector<std::string_view>& values) {
    return bytes(values.emplace_back(), Store::kMaxValueBytes, "value");
  }
  // A u64 count, then that many keys (with a value after each for MULTI_SET). A count that the
  // limits could never back is refused before anything is reserved for it.
  bool keys(ParsedRequest& out, bool withValues) {
    uint64_t n;
    if (!fixed(n)) return false;
    if (n > kMaxKeysPerRequest) {
      C10D_THROW(protocol::ProtocolError, "PyTorch client sent a count of ", n,
                 " keys; the limit is ", kMaxKeysPerRequest);
    }
    for (uint64_t i = 0; i < n; ++i) {
      if (!key(out.keys)) return false;
      if (withValues && !value(out.values)) return false;
    }
    return true;
  }
  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }
  // After a read came up short: the bytes the field it wanted ends at, from the start.
  size_t needed() const { return needed_; }

 private:
  bool short_(size_t size) {
    needed_ = consumed() + size;
    return false;
  }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* begin_;
  size_t needed_ = 0;
};

// The request's arguments after its code; false: not all arrived.
bool parseArguments(Cursor& in, ParsedRequest& out) {
  switch (out.request) {
    case Request::Validate:
    case Request::Ping: {
      uint32_t word;
      if (!in.fixed(word)) return false;
      out.integer = word;
      return true;
    }
    case Request::Set:
    case Request::Append:
    case Request::QueuePush:
      return in.key(out.keys) && in.value(out.values);
    case Request::CompareSet:
      return in.key(out.keys) && in.value(out.values) && in.value(out.values);
    case Request::Get:
    case Request::WatchKey:
    case Request::DeleteKey:
    case Request::QueuePop:
    case Request::QueueLen:
      return in.key(out.keys);
    case Request::Add:
      return in.key(out.keys) && in.fixed(out.integer);
    case Request::Check:
    case Request::Wait:
    case Request::MultiGet:
      return in.keys(out, false);
    case Request::MultiSet:
      return in.keys(out, true);
    case Request::NumKeys:
    case Request::CancelWait:
      return true;
    case Request::Count:
      break;
  }
  return false;
}

}  // namespace

int code(Version version, Request request) {
  return (version == Version::V1 ? kV1Codes : kV2Codes)[static_cast<size_t>(request)];
}

std::optional<Request> request(Version version, uint8_t code) {
  const auto& codes = version == Version::V1 ? kV1Codes : kV2Codes;
  for (size_t i = 0; i < kRequests; ++i) {
    if (codes[i] == code) return static_cast<Request>(i);
  }
  return std::nullopt;
}

const char* name(Request request) {
  return request == Request::Count ? "unknown" : kNames[static_cast<size_t>(request)];
}

std::optional<ParsedRequest> parseRequest(Version version, const uint8_t* data, size_t available,
                                          size_t* needed) {
  if (available == 0) return std::nullopt;
  ParsedRequest out;
  std::optional<Request> which = request(version, data[0]);
  if (!which) {
    C10D_THROW(protocol::ProtocolError, "PyTorch client (protocol ",
               version == Version::V1 ? "v1" : "v2", ") sent unknown request code ", int(data[0]));
  }
  out.request = *which;
  Cursor in(data + 1, available - 1);
  if (!parseArguments(in, out)) {
    if (needed != nullptr) *needed = 1 + in.needed();
    return std::nullopt;
  }
  out.bytes = 1 + in.consumed();
  return out;
}

void appendValue(std::vector<uint8_t>& out, const Store::Bytes& value) {
  const uint64_t size = value.size();
  const auto* p = reinterpret_cast<const uint8_t*>(&size);
  out.insert(out.end(), p, p + sizeof(size));
  out.insert(out.end(), value.begin(), value.end());
}

void appendI64(std::vector<uint8_t>& out, int64_t value) {
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), p, p + sizeof(value));
}

}  // namespace c10d::inline v1::pytorch_wire
