#include "store/PyTorchTCPStore.hpp"

#include <cstring>
#include <map>

#include "c10d/core/Config.hpp"
#include "c10d/core/Exception.hpp"
#include "store/tcp/ClientSocket.hpp"
#include "store/tcp/PyTorchWire.hpp"

namespace c10d::inline v1 {
namespace {

using Clock = detail::ClientSocket::Clock;

// A request's kind (PyTorch's QueryType); Request below is one request on the wire.
using Query = pytorch_wire::Request;

pytorch_wire::Version wireVersion(PyTorchTCPStore::Protocol protocol) {
  return protocol == PyTorchTCPStore::Protocol::V2 ? pytorch_wire::Version::V2
                                                   : pytorch_wire::Version::V1;
}

// PyTorch's client prefixes every key with "/" (TCPStore's keyPrefix_); so do we, so that both
// clients of one server see each other's keys.
std::string wireKey(const std::string& key) {
  return "/" + key;
}

PyTorchTCPStore::Protocol protocolFromConfig() {
  std::string text = config::value("C10D_TORCH_STORE_PROTOCOL");
  if (text == "v1") return PyTorchTCPStore::Protocol::V1;
  if (text == "v2") return PyTorchTCPStore::Protocol::V2;
  return PyTorchTCPStore::Protocol::Auto;
}

const char* kConnectHint =
    "Under torchrun this is the agent's store at MASTER_ADDR:MASTER_PORT: check that torchrun "
    "is still running.";

}  // namespace

// One request in PyTorch's framing: a code byte, then strings and values as a little-endian
// u64 length and the bytes, integers as little-endian i64. Sent in one write: a 1.13 server
// reads the rest of a request with blocking reads, so a request sent in pieces stalls it.
class PyTorchTCPStore::Request {
 public:
  explicit Request(uint8_t code) { bytes_.push_back(code); }
  Request& u64(uint64_t value) { return raw(&value, sizeof(value)); }
  Request& i64(int64_t value) { return raw(&value, sizeof(value)); }
  Request& text(const std::string& value) {
    u64(value.size());
    return raw(value.data(), value.size());
  }
  // A key count, then the keys (CHECK, WAIT, MULTI_GET).
  Request& keys(const std::vector<std::string>& keys) {
    u64(keys.size());
    for (const auto& key : keys) text(wireKey(key));
    return *this;
  }
  Request& data(const Bytes& value) {
    u64(value.size());
    return raw(value.data(), value.size());
  }
  void send(detail::ClientSocket& socket, Clock::time_point deadline) {
    socket.sendAll(bytes_.data(), bytes_.size(), deadline);
  }

 private:
  Request& raw(const void* data, size_t size) {  // x86-64 and aarch64 are little-endian
    auto* begin = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), begin, begin + size);
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

namespace {

uint64_t readU64(detail::ClientSocket& socket, Clock::time_point deadline) {
  uint64_t value;
  std::memcpy(&value, socket.receive(sizeof(value), deadline), sizeof(value));
  return value;
}

Store::Bytes readBytes(detail::ClientSocket& socket, Clock::time_point deadline) {
  uint64_t size = readU64(socket, deadline);
  if (size > Store::kMaxValueBytes) {
    socket.fail(detail::concat("the server sent a value of ", size, " bytes"));
  }
  const uint8_t* data = socket.receive(size, deadline);
  return Store::Bytes(data, data + size);
}

}  // namespace

PyTorchTCPStore::Protocol probePyTorchStoreProtocol(const std::string& host, uint16_t port,
                                                    std::chrono::milliseconds timeout) {
  detail::ClientSocket probe(host, port, timeout, "PyTorch TCPStore server", kConnectHint);
  // v1's GETNUMKEYS. A v2 server takes code 6 for WAIT without keys yet: the legacy server
  // closes the connection for a first message that is not VALIDATE, the libuv one stays silent.
  const auto request =
      static_cast<uint8_t>(pytorch_wire::code(pytorch_wire::Version::V1, Query::NumKeys));
  auto deadline =
      Clock::now() + std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(2));
  probe.sendAll(&request, 1, deadline);
  try {
    probe.receive(8, deadline);
    return PyTorchTCPStore::Protocol::V1;
  } catch (const Error&) {  // closed, or silent until the deadline
    return PyTorchTCPStore::Protocol::V2;
  }
}

PyTorchTCPStore::PyTorchTCPStore(std::string host, uint16_t port, std::chrono::milliseconds timeout,
                                 Protocol protocol)
    : Store(timeout), host_(std::move(host)), port_(port), protocol_(protocol) {
  if (protocol_ == Protocol::Auto) protocol_ = protocolFromConfig();
  if (protocol_ == Protocol::Auto) {
    // One probe per server and process: against a silent (libuv) v2 server it lasts its whole
    // deadline, and a process connects to one server several times (each init, RPC).
    static std::mutex mutex;
    static std::map<std::string, Protocol> found;
    const std::string server = host_ + ":" + std::to_string(port_);
    std::lock_guard<std::mutex> guard(mutex);
    auto it = found.find(server);
    protocol_ = it != found.end()
                    ? it->second
                    : found[server] = probePyTorchStoreProtocol(host_, port_, timeout);
  }
  std::lock_guard<std::mutex> guard(mutex_);
  connection();
}

PyTorchTCPStore::~PyTorchTCPStore() = default;

detail::ClientSocket& PyTorchTCPStore::connection() {
  if (socket_ && !socket_->broken()) return *socket_;
  socket_.reset();
  auto socket = std::make_unique<detail::ClientSocket>(host_, port_, timeout(),
                                                       "PyTorch TCPStore server", kConnectHint);
  // PyTorch's protocol has no error answer: a server refuses a request by closing.
  socket->setClosedMessage(
      "the server closed the connection: it exited, or refused the request (a PyTorch TCPStore "
      "server answers a request it cannot serve so, and its log says why)");
  if (protocol_ == Protocol::V2) {
    // VALIDATE: a code byte and the magic as a little-endian u32; no answer.
    uint8_t message[5] = {
        static_cast<uint8_t>(pytorch_wire::code(pytorch_wire::Version::V2, Query::Validate))};
    std::memcpy(message + 1, &pytorch_wire::kV2Magic, sizeof(pytorch_wire::kV2Magic));
    socket->sendAll(message, sizeof(message), Clock::now() + timeout());
  }
  socket_ = std::move(socket);
  return *socket_;
}

namespace {

uint8_t codeOf(PyTorchTCPStore::Protocol protocol, Query request) {
  int code = pytorch_wire::code(wireVersion(protocol), request);
  C10D_CHECK(code >= 0, Error, "PyTorch TCPStore: this protocol has no ",
             pytorch_wire::name(request), " request");
  return static_cast<uint8_t>(code);
}

// Runs body; an error of the connection gets the op and key in front and in its context.
template <typename Body>
auto withContext(Query op, const std::string& key, Body&& body) -> decltype(body()) {
  auto context = [&] {
    return ErrorContext{.op = std::string("store ") + pytorch_wire::name(op), .key = key};
  };
  auto prefix = [&] {
    return detail::concat("PyTorch TCPStore ", pytorch_wire::name(op), key.empty() ? "" : " '", key,
                          key.empty() ? "" : "'", ": ");
  };
  try {
    return body();
  } catch (const TimeoutError& e) {
    throw TimeoutError(prefix() + e.what(), context());
  } catch (const StoreError& e) {
    throw StoreError(prefix() + e.what(), context());
  }
}

}  // namespace

void PyTorchTCPStore::set(const std::string& key, const Bytes& value) {
  checkKey("set", key);
  checkValue("set", key, value.size());
  std::lock_guard<std::mutex> guard(mutex_);
  withContext(Query::Set, key, [&] {
    const auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::Set))
        .text(wireKey(key))
        .data(value)
        .send(connection(), deadline);
    confirmLocked(key, deadline);
  });
}

void PyTorchTCPStore::confirmLocked(const std::string& key, Clock::time_point deadline) {
  auto& socket = connection();
  Request(codeOf(protocol_, Query::Check)).keys({key}).send(socket, deadline);
  socket.receive(1, deadline);
}

Store::Bytes PyTorchTCPStore::getLocked(const std::string& key) {
  return withContext(Query::Get, key, [&] {
    auto& socket = connection();
    auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::Get)).text(wireKey(key)).send(socket, deadline);
    return readBytes(socket, deadline);
  });
}

Store::Bytes PyTorchTCPStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("get", key);
  std::lock_guard<std::mutex> guard(mutex_);
  // As PyTorch's client: wait, then get, so the server is never asked for a missing key (which
  // a v1 server answers by closing the connection).
  waitLocked({key}, timeout, "get");
  return getLocked(key);
}

int64_t PyTorchTCPStore::add(const std::string& key, int64_t delta) {
  checkKey("add", key);
  std::lock_guard<std::mutex> guard(mutex_);
  return withContext(Query::Add, key, [&] {
    auto& socket = connection();
    auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::Add)).text(wireKey(key)).i64(delta).send(socket, deadline);
    return static_cast<int64_t>(readU64(socket, deadline));
  });
}

Store::Bytes PyTorchTCPStore::compareSet(const std::string& key, const Bytes& expected,
                                         const Bytes& desired) {
  checkKey("compare_set", key);
  checkValue("compare_set", key, expected.size());
  checkValue("compare_set", key, desired.size());
  std::lock_guard<std::mutex> guard(mutex_);
  return withContext(Query::CompareSet, key, [&] {
    auto& socket = connection();
    auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::CompareSet))
        .text(wireKey(key))
        .data(expected)
        .data(desired)
        .send(socket, deadline);
    return readBytes(socket, deadline);
  });
}

bool PyTorchTCPStore::deleteKey(const std::string& key) {
  checkKey("delete_key", key);
  std::lock_guard<std::mutex> guard(mutex_);
  return withContext(Query::DeleteKey, key, [&] {
    auto& socket = connection();
    auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::DeleteKey)).text(wireKey(key)).send(socket, deadline);
    return readU64(socket, deadline) != 0;
  });
}

bool PyTorchTCPStore::check(const std::vector<std::string>& keys) {
  checkKeys("check", keys);
  std::lock_guard<std::mutex> guard(mutex_);
  return withContext(Query::Check, keys.empty() ? "" : keys[0], [&] {
    auto& socket = connection();
    auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::Check)).keys(keys).send(socket, deadline);
    return *socket.receive(1, deadline) == pytorch_wire::kReady;
  });
}

void PyTorchTCPStore::waitLocked(const std::vector<std::string>& keys,
                                 std::chrono::milliseconds timeout, const char* op) {
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "PyTorch TCPStore ", op,
             ": timeout must be positive, got ", timeout.count(), " ms");
  const std::string first = keys.empty() ? "" : keys[0];
  try {
    withContext(Query::Wait, first, [&] {
      auto& socket = connection();
      auto deadline = Clock::now() + timeout;
      Request(codeOf(protocol_, Query::Wait)).keys(keys).send(socket, deadline);
      if (*socket.receive(1, deadline) != pytorch_wire::kStopWaiting)
        socket.fail("unexpected answer to wait");
    });
  } catch (const TimeoutError&) {
    // The server still holds the wait and would answer it later, out of turn: the socket marked
    // itself broken, so the next call makes another connection, and asks which keys are missing.
    std::vector<std::string> missing = missingLocked(keys);
    throw TimeoutError(
        detail::concat("PyTorch TCPStore ", op, ": key(s) ", describeKeys(missing),
                       " not set after ", timeout.count(), " ms (server ", host_, ":", port_, ")"),
        ErrorContext{.op = std::string("store ") + op,
                     .key = missing.empty() ? first : missing[0]});
  }
}

std::vector<std::string> PyTorchTCPStore::missingLocked(const std::vector<std::string>& keys) {
  std::vector<std::string> missing;
  try {
    for (const auto& key : keys) {
      auto& socket = connection();
      auto deadline = Clock::now() + timeout();
      Request(codeOf(protocol_, Query::Check)).keys({key}).send(socket, deadline);
      if (*socket.receive(1, deadline) != pytorch_wire::kReady) missing.push_back(key);
    }
  } catch (const Error&) {
    return keys;  // the server is gone too: name every key
  }
  // Set between the timeout and the checks: every key was missing when the wait ended.
  return missing.empty() ? keys : missing;
}

void PyTorchTCPStore::wait(const std::vector<std::string>& keys,
                           std::chrono::milliseconds timeout) {
  checkKeys("wait", keys);
  std::lock_guard<std::mutex> guard(mutex_);
  waitLocked(keys, timeout, "wait");
}

int64_t PyTorchTCPStore::numKeys() {
  std::lock_guard<std::mutex> guard(mutex_);
  return withContext(Query::NumKeys, "", [&] {
    auto& socket = connection();
    auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::NumKeys)).send(socket, deadline);
    return static_cast<int64_t>(readU64(socket, deadline));
  });
}

std::vector<Store::Bytes> PyTorchTCPStore::multiGet(const std::vector<std::string>& keys,
                                                    std::chrono::milliseconds timeout) {
  checkKeys("multi_get", keys);
  std::lock_guard<std::mutex> guard(mutex_);
  waitLocked(keys, timeout, "multi_get");
  std::vector<Bytes> values;
  values.reserve(keys.size());
  if (protocol_ == Protocol::V1) {
    for (const auto& key : keys) values.push_back(getLocked(key));
    return values;
  }
  return withContext(Query::MultiGet, keys.empty() ? "" : keys[0], [&] {
    auto& socket = connection();
    auto deadline = Clock::now() + this->timeout();
    Request(codeOf(protocol_, Query::MultiGet)).keys(keys).send(socket, deadline);
    for (size_t i = 0; i < keys.size(); ++i) values.push_back(readBytes(socket, deadline));
    return values;
  });
}

void PyTorchTCPStore::multiSet(const std::vector<std::string>& keys,
                               const std::vector<Bytes>& values) {
  C10D_CHECK(keys.size() == values.size(), InvalidArgument,
             "PyTorch TCPStore multi_set: ", keys.size(), " keys but ", values.size(), " values");
  checkKeys("multi_set", keys);
  for (size_t i = 0; i < keys.size(); ++i) checkValue("multi_set", keys[i], values[i].size());
  if (protocol_ == Protocol::V1) {
    for (size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
    return;
  }
  std::lock_guard<std::mutex> guard(mutex_);
  withContext(Query::MultiSet, keys.empty() ? "" : keys[0], [&] {
    Request request(codeOf(protocol_, Query::MultiSet));
    request.u64(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) request.text(wireKey(keys[i])).data(values[i]);
    const auto deadline = Clock::now() + timeout();
    request.send(connection(), deadline);
    if (!keys.empty()) confirmLocked(keys[0], deadline);
  });
}

void PyTorchTCPStore::append(const std::string& key, const Bytes& value) {
  checkKey("append", key);
  if (protocol_ == Protocol::V2) {
    checkValue("append", key, value.size());  // the server holds the sum; the suffix is ours
    std::lock_guard<std::mutex> guard(mutex_);
    withContext(Query::Append, key, [&] {
      const auto deadline = Clock::now() + timeout();
      Request(codeOf(protocol_, Query::Append))
          .text(wireKey(key))
          .data(value)
          .send(connection(), deadline);
      confirmLocked(key, deadline);
    });
    return;
  }
  // v1 has no append: compare-and-set from the value read until ours is the one extended. (Two
  // appends of the same bytes racing on the same old value can be taken for each other: then
  // one lands.)
  Bytes current;
  if (check({key})) current = get(key);
  while (true) {
    Bytes desired = current;
    desired.insert(desired.end(), value.begin(), value.end());
    checkValue("append", key, desired.size());
    Bytes now = compareSet(key, current, desired);
    if (now == desired) return;
    // The key is gone when compare-set hands our (non-empty) expectation back unchanged.
    current = now == current ? Bytes{} : std::move(now);
  }
}

void PyTorchTCPStore::requireQueues(const char* op, const std::string& key) const {
  C10D_CHECK(protocol_ == Protocol::V2, StoreError, "PyTorch TCPStore ", op, " '", key,
             "': the server speaks protocol v1 (PyTorch 1.13 to 2.1), which has no queues; they "
             "need PyTorch 2.6's server or c10d's");
}

void PyTorchTCPStore::queuePush(const std::string& key, const Bytes& value) {
  checkKey("queue_push", key);
  checkValue("queue_push", key, value.size());
  requireQueues("queue_push", key);
  std::lock_guard<std::mutex> guard(mutex_);
  withContext(Query::QueuePush, key, [&] {
    const auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::QueuePush))
        .text(wireKey(key))
        .data(value)
        .send(connection(), deadline);
    confirmLocked(key, deadline);
  });
}

std::optional<Store::Bytes> PyTorchTCPStore::popLocked(const std::string& key) {
  return withContext(Query::QueuePop, key, [&]() -> std::optional<Bytes> {
    auto& socket = connection();
    auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::QueuePop)).text(wireKey(key)).send(socket, deadline);
    if (static_cast<int64_t>(readU64(socket, deadline)) <= 0) return std::nullopt;
    return readBytes(socket, deadline);
  });
}

Store::Bytes PyTorchTCPStore::queuePop(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("queue_pop", key);
  requireQueues("queue_pop", key);
  C10D_CHECK(timeout.count() > 0, InvalidArgument,
             "PyTorch TCPStore queue_pop: timeout must be positive, got ", timeout.count(), " ms");
  const auto deadline = Clock::now() + timeout;
  std::lock_guard<std::mutex> guard(mutex_);
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      C10D_CHECK(left.count() > 0, TimeoutError, "deadline passed");
      waitLocked({key}, left, "queue_pop");
    } catch (const TimeoutError&) {
      throw TimeoutError(
          detail::concat("PyTorch TCPStore queue_pop: queue '", key, "' stayed empty for ",
                         timeout.count(), " ms (server ", host_, ":", port_, ")"),
          ErrorContext{.op = "store queue_pop", .key = key});
    }
    if (auto value = popLocked(key)) return std::move(*value);
  }
}

std::optional<Store::Bytes> PyTorchTCPStore::tryQueuePop(const std::string& key) {
  checkKey("queue_pop", key);
  requireQueues("queue_pop", key);
  std::lock_guard<std::mutex> guard(mutex_);
  return popLocked(key);
}

int64_t PyTorchTCPStore::queueLen(const std::string& key) {
  checkKey("queue_len", key);
  requireQueues("queue_len", key);
  std::lock_guard<std::mutex> guard(mutex_);
  return withContext(Query::QueueLen, key, [&] {
    auto& socket = connection();
    auto deadline = Clock::now() + timeout();
    Request(codeOf(protocol_, Query::QueueLen)).text(wireKey(key)).send(socket, deadline);
    return static_cast<int64_t>(readU64(socket, deadline));
  });
}

}  // namespace c10d::inline v1
