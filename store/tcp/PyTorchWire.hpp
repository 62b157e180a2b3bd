#pragma once

// PyTorch's TCPStore wire protocol, shared by our client of PyTorch's server
// (store/PyTorchTCPStore.cpp) and our server's PyTorch dialect (TCPStoreServer.cpp), so that
// the codes exist once. docs/store-protocol.md#pytorchs-tcpstore is the prose version.
//
// No frames and no request ids: a request is a code byte and its arguments; a string or value
// is a little-endian u64 length and the bytes, an integer a little-endian i64, a key list a u64
// count and the keys. Two code tables exist and neither is announced: v1 (PyTorch 1.13 to 2.1;
// 1.13 stops at DELETE_KEY) and v2 (2.2 and later: VALIDATE first, WATCH_KEY gone; 2.6 added
// the queue requests after PING).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/Store.hpp"

namespace c10d::inline v1::pytorch_wire {

enum class Version { V1, V2 };

enum class Request : uint8_t {
  Validate,  // v2 only, first message: u32 kV2Magic; no answer
  Set,       // key, value; no answer
  CompareSet,
  Get,
  Add,
  Check,
  Wait,
  NumKeys,
  WatchKey,  // v1 only
  DeleteKey,
  Append,      // 2.1 and v2; no answer
  MultiGet,    // 2.1 and v2: n values, no count
  MultiSet,    // 2.1 and v2; no answer
  CancelWait,  // 2.1 and v2: answered kWaitCanceled
  Ping,        // v2 (2.4 on, after VALIDATE): u32 nonce, answered with the same u32
  QueuePush,   // v2, 2.6 on: key, value; no answer
  QueuePop,    // v2, 2.6 on: key; i64 length before the pop, then the value if it was > 0
  QueueLen,    // v2, 2.6 on: key; i64
  Count
};

inline constexpr uint32_t kV2Magic = 0x3C85F7CE;
inline constexpr uint8_t kReady = 0;         // CHECK: every key exists
inline constexpr uint8_t kNotReady = 1;      // CHECK: one does not
inline constexpr uint8_t kStopWaiting = 0;   // WAIT: every key exists
inline constexpr uint8_t kWaitCanceled = 1;  // CANCEL_WAIT's answer

// The request's code in version; -1 where that version has no such request.
int code(Version version, Request request);
// The request a code stands for in version; nullopt for a code it does not use.
std::optional<Request> request(Version version, uint8_t code);
// PyTorch's lowercase name of the request ("compare_set").
const char* name(Request request);

// One whole request read from a client. Keys and values are views of the input it was parsed
// from, valid while that is unchanged.
struct ParsedRequest {
  Request request = Request::Count;
  std::vector<std::string_view> keys;    // one for the single-key requests
  std::vector<std::string_view> values;  // SET, APPEND: one; COMPARE_SET: expected, desired
  int64_t integer = 0;                   // ADD's delta; VALIDATE's magic; PING's nonce
  size_t bytes = 0;                      // how many input bytes the request took
};

// The most keys one request may name: PyTorch's clients name one per rank at most.
inline constexpr uint64_t kMaxKeysPerRequest = uint64_t{1} << 20;

// Parses the request at the front of data (available bytes). nullopt: it has not all arrived
// yet; nothing is consumed, and *needed (when given) is how many bytes must be there before
// parsing again can get further, so a large request arriving in pieces is not parsed again
// for every piece. Throws protocol::ProtocolError (the client must be dropped) for a code
// version does not use, or a key, value or key count past the limits.
std::optional<ParsedRequest> parseRequest(Version version, const uint8_t* data, size_t available,
                                          size_t* needed = nullptr);

// Answers, appended to out: a value (u64 length, bytes), an i64, one byte.
void appendValue(std::vector<uint8_t>& out, const Store::Bytes& value);
void appendI64(std::vector<uint8_t>& out, int64_t value);

}  // namespace c10d::inline v1::pytorch_wire
