#include "store/TCPStore.hpp"

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/net/Auth.hpp"
#include "store/tcp/StoreConnection.hpp"
#include "store/tcp/StoreProtocol.hpp"

namespace c10d::inline v1 {
namespace {

using protocol::FrameReader;
using protocol::FrameWriter;
using protocol::Op;
using protocol::Status;
using Clock = std::chrono::steady_clock;

// Extra time a client waits beyond a server-side wait timeout before it gives up on the server
// itself: the server answers Timeout at the deadline, this only covers a server that hangs.
constexpr std::chrono::milliseconds kServerGrace{10000};

constexpr const char* kWorkersJoinedKey = "__c10d_tcpstore_workers_joined";
constexpr const char* kWorkersReadyKey = "__c10d_tcpstore_workers_ready";  // "1", or why not
constexpr const char* kWorkersReady = "1";
constexpr const char* kWorkersExpectedKey = "__c10d_tcpstore_workers_expected";

// Per-thread frame buffers: requests are serialised per store, and reusing the buffers keeps
// small ops free of allocation. A buffer grown past kKeptFrameBytes by one large value (up to
// 64 MiB) is given back at the thread's next request instead of living as long as the thread.
thread_local std::vector<uint8_t> tlsRequest;
thread_local std::vector<uint8_t> tlsResponse;
constexpr size_t kKeptFrameBytes = 1 << 20;

// Starts a request frame for op in this thread's request buffer (the previous response has
// been read by then).
FrameWriter startRequest(Op op) {
  if (tlsRequest.capacity() > kKeptFrameBytes) std::vector<uint8_t>().swap(tlsRequest);
  if (tlsResponse.capacity() > kKeptFrameBytes) std::vector<uint8_t>().swap(tlsResponse);
  tlsRequest.clear();
  FrameWriter writer(tlsRequest);
  writer.beginFrame();
  writer.u8(static_cast<uint8_t>(op));
  return writer;
}

// The key or keys a request is about, named in its errors (described only on failure).
struct Subject {
  std::string_view key{};
  const std::vector<std::string>* keys = nullptr;

  std::string describe() const {
    if (keys != nullptr) return " " + describeKeys(*keys);
    return key.empty() ? std::string() : detail::concat(" '", key, "'");
  }

  // The key for Error::context: the one key, or the first of several.
  ErrorContext context(Op op) const {
    std::string first = keys != nullptr && !keys->empty() ? keys->front() : std::string(key);
    return ErrorContext{.op = detail::concat("store ", protocol::opName(op)), .key = first};
  }
};

// Finishes and sends the request that writer built, and returns a reader positioned after the
// response's Ok status. Timeout, Error and InvalidArgument statuses, and a connection that fails,
// become TimeoutError, StoreError and InvalidArgument naming op and its keys.
FrameReader exchange(detail::StoreConnection& connection, FrameWriter& writer, Op op,
                     Subject subject, Clock::time_point deadline,
                     std::chrono::milliseconds waitTimeout = {}) {
  writer.endFrame();
  if (tlsRequest.size() - protocol::kFrameHeaderBytes > protocol::kMaxFrameBytes) {
    C10D_THROW(InvalidArgument, "TCPStore ", protocol::opName(op), ": request of ",
               tlsRequest.size(), " bytes exceeds the protocol's frame limit of ",
               protocol::kMaxFrameBytes, "; split it into smaller requests");
  }
  try {
    connection.roundTrip(tlsRequest, tlsResponse, deadline);
  } catch (const TimeoutError& e) {
    throw TimeoutError(
        detail::concat("TCPStore ", protocol::opName(op), subject.describe(), ": ", e.what()),
        subject.context(op));
  } catch (const StoreError& e) {
    throw StoreError(
        detail::concat("TCPStore ", protocol::opName(op), subject.describe(), ": ", e.what()),
        subject.context(op));
  }
  FrameReader in(tlsResponse.data(), tlsResponse.size());
  auto status = static_cast<Status>(in.u8());
  switch (status) {
    case Status::Ok:
      return in;
    case Status::Timeout: {
      std::vector<std::string> missing = in.keys();
      if (op == Op::QueuePop && !missing.empty()) {
        throw TimeoutError(
            detail::concat("TCPStore queuePop: queue '", missing.front(), "' stayed empty for ",
                           waitTimeout.count(), " ms (", connection.peer(), ")"),
            Subject{.keys = &missing}.context(op));
      }
      throw TimeoutError(
          detail::concat("TCPStore ", protocol::opName(op), ": key(s) ", describeKeys(missing),
                         " not set after ", waitTimeout.count(), " ms (", connection.peer(), ")"),
          Subject{.keys = &missing}.context(op));
    }
    case Status::Error: {
      std::string_view message = in.bytes(protocol::kMaxFrameBytes);
      throw StoreError(detail::concat("TCPStore ", protocol::opName(op), subject.describe(), " (",
                                      connection.peer(), "): ", message),
                       subject.context(op));
    }
    case Status::InvalidArgument: {
      std::string_view message = in.bytes(protocol::kMaxFrameBytes);
      throw InvalidArgument(detail::concat("TCPStore ", protocol::opName(op), subject.describe(),
                                           " (", connection.peer(), "): ", message),
                            subject.context(op));
    }
  }
  C10D_THROW(StoreError, "TCPStore ", protocol::opName(op), ": unknown response status ",
             int(status), " from ", connection.peer());
}

}  // namespace

TCPStore::TCPStore(std::string host, uint16_t port, TCPStoreOptions options)
    : Store(options.timeout), host_(std::move(host)), port_(port) {
  // Resolved once (it may read a file) for the server this object hosts and for its client.
  std::optional<std::string> token = auth::resolveToken(options.authToken);
  if (options.isServer) {
    server_ =
        std::make_unique<TCPStoreServer>(TCPStoreServerOptions{options.listenAddress, port, token});
    port_ = server_->port();
  }
  connection_ =
      std::make_unique<detail::StoreConnection>(host_, port_, options.timeout, std::move(token));
  if (options.numWorkers.has_value()) waitForWorkers(*options.numWorkers);
}

TCPStore::~TCPStore() = default;

void TCPStore::waitForWorkers(int numWorkers) {
  C10D_CHECK(numWorkers >= 1, InvalidArgument, "TCPStore: numWorkers must be >= 1, got ",
             numWorkers);
  // Every worker states the count it expects and the first statement stands. One that expects
  // another count fails at once and wakes every waiter with why; otherwise all would wait out
  // the timeout and then report "only N of M connected", which hides the real mistake.
  const std::string mine = std::to_string(numWorkers);
  const std::string first = toString(compareSet(kWorkersExpectedKey, {}, toBytes(mine)));
  if (first != mine) {
    std::string why = detail::concat(
        "workers disagree about the world size (WORLD_SIZE): one expects ", numWorkers,
        " workers, the first to connect expects ", first, "; start every rank with the same value");
    setString(kWorkersReadyKey, why);
    C10D_THROW(InvalidArgument, "TCPStore ", host_, ":", port_, ": ", why);
  }
  int64_t joined = add(kWorkersJoinedKey, 1);
  if (joined == numWorkers) setString(kWorkersReadyKey, kWorkersReady);
  try {
    wait({kWorkersReadyKey});
  } catch (const TimeoutError&) {
    int64_t arrived = add(kWorkersJoinedKey, 0);
    C10D_THROW(TimeoutError, "TCPStore ", host_, ":", port_, ": only ", arrived, " of ", numWorkers,
               " workers connected within ", timeout().count(),
               " ms; check WORLD_SIZE and that every rank was started");
  }
  std::string ready = getString(kWorkersReadyKey);
  C10D_CHECK(ready == kWorkersReady, InvalidArgument, "TCPStore ", host_, ":", port_, ": ", ready);
}

void TCPStore::set(const std::string& key, const Bytes& value) {
  checkKey("set", key);
  checkValue("set", key, value.size());
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::Set);
  out.bytes(key);
  out.bytes(value);
  exchange(*connection_, out, Op::Set, {key}, Clock::now() + timeout()).expectEnd();
}

TCPStore::Bytes TCPStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("get", key);
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "TCPStore get: timeout must be positive");
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::Get);
  out.bytes(key);
  out.i64(timeout.count());
  FrameReader in =
      exchange(*connection_, out, Op::Get, {key}, Clock::now() + timeout + kServerGrace, timeout);
  return in.value();
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  checkKey("add", key);
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::Add);
  out.bytes(key);
  out.i64(delta);
  return exchange(*connection_, out, Op::Add, {key}, Clock::now() + timeout()).i64();
}

TCPStore::Bytes TCPStore::compareSet(const std::string& key, const Bytes& expected,
                                     const Bytes& desired) {
  checkKey("compareSet", key);
  checkValue("compareSet", key, expected.size());
  checkValue("compareSet", key, desired.size());
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::CompareSet);
  out.bytes(key);
  out.bytes(expected);
  out.bytes(desired);
  return exchange(*connection_, out, Op::CompareSet, {key}, Clock::now() + timeout()).value();
}

bool TCPStore::deleteKey(const std::string& key) {
  checkKey("deleteKey", key);
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::Delete);
  out.bytes(key);
  return exchange(*connection_, out, Op::Delete, {key}, Clock::now() + timeout()).u8() != 0;
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  checkKeys("check", keys);
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::Check);
  out.keys(keys);
  return exchange(*connection_, out, Op::Check, {.keys = &keys}, Clock::now() + timeout()).u8() !=
         0;
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  checkKeys("wait", keys);
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "TCPStore wait: timeout must be positive");
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::Wait);
  out.keys(keys);
  out.i64(timeout.count());
  exchange(*connection_, out, Op::Wait, {.keys = &keys}, Clock::now() + timeout + kServerGrace,
           timeout)
      .expectEnd();
}

int64_t TCPStore::numKeys() {
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::NumKeys);
  return exchange(*connection_, out, Op::NumKeys, {}, Clock::now() + timeout()).i64();
}

std::vector<TCPStore::Bytes> TCPStore::multiGet(const std::vector<std::string>& keys,
                                                std::chrono::milliseconds timeout) {
  checkKeys("multiGet", keys);
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "TCPStore multiGet: timeout must be positive");
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::MultiGet);
  out.keys(keys);
  out.i64(timeout.count());
  FrameReader in = exchange(*connection_, out, Op::MultiGet, {.keys = &keys},
                            Clock::now() + timeout + kServerGrace, timeout);
  uint32_t count = in.count(4);
  std::vector<Bytes> values;
  values.reserve(count);
  for (uint32_t i = 0; i < count; ++i) values.push_back(in.value());
  return values;
}

void TCPStore::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  C10D_CHECK(keys.size() == values.size(), InvalidArgument, "TCPStore multiSet: ", keys.size(),
             " keys but ", values.size(), " values");
  for (size_t i = 0; i < keys.size(); ++i) {
    checkKey("multiSet", keys[i]);
    checkValue("multiSet", keys[i], values[i].size());
  }
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::MultiSet);
  out.keys(keys);
  for (const Bytes& value : values) out.bytes(value);
  exchange(*connection_, out, Op::MultiSet, {.keys = &keys}, Clock::now() + timeout()).expectEnd();
}

void TCPStore::append(const std::string& key, const Bytes& value) {
  checkKey("append", key);
  checkValue("append", key, value.size());
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::Append);
  out.bytes(key);
  out.bytes(value);
  exchange(*connection_, out, Op::Append, {key}, Clock::now() + timeout()).expectEnd();
}

void TCPStore::queuePush(const std::string& key, const Bytes& value) {
  checkKey("queuePush", key);
  checkValue("queuePush", key, value.size());
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::QueuePush);
  out.bytes(key);
  out.bytes(value);
  exchange(*connection_, out, Op::QueuePush, {key}, Clock::now() + timeout()).expectEnd();
}

std::optional<TCPStore::Bytes> TCPStore::popRequest(const std::string& key,
                                                    std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::QueuePop);
  out.bytes(key);
  out.i64(wait.count());
  const auto deadline = Clock::now() + (wait.count() > 0 ? wait + kServerGrace : timeout());
  FrameReader in = exchange(*connection_, out, Op::QueuePop, {key}, deadline, wait);
  if (in.u8() == 0) return std::nullopt;
  return in.value();
}

TCPStore::Bytes TCPStore::queuePop(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("queuePop", key);
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "TCPStore queuePop: timeout must be positive");
  std::optional<Bytes> value = popRequest(key, timeout);
  C10D_CHECK(value.has_value(), StoreError, "TCPStore queuePop '", key,
             "': the server answered a waiting pop with no value");
  return std::move(*value);
}

std::optional<TCPStore::Bytes> TCPStore::tryQueuePop(const std::string& key) {
  checkKey("tryQueuePop", key);
  return popRequest(key, std::chrono::milliseconds(0));
}

int64_t TCPStore::queueLen(const std::string& key) {
  checkKey("queueLen", key);
  std::lock_guard<std::mutex> guard(mutex_);
  FrameWriter out = startRequest(Op::QueueLen);
  out.bytes(key);
  return exchange(*connection_, out, Op::QueueLen, {key}, Clock::now() + timeout()).i64();
}

std::optional<std::string> tcpStoreHost(const Store& store) {
  for (const Store* at = &store; at != nullptr; at = at->forwardsTo()) {
    if (auto* tcp = dynamic_cast<const TCPStore*>(at)) return tcp->host();
  }
  return std::nullopt;
}

}  // namespace c10d::inline v1
