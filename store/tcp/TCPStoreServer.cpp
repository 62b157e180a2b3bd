// The TCPStore server: every key, every client and every parked waiter live on one libuv loop
// thread, so the data needs no locks and a blocked client costs a timer, not a thread.

#include <netdb.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/net/Auth.hpp"
#include "c10d/net/UvLoop.hpp"
#include "store/KeyValueState.hpp"
#include "store/TCPStore.hpp"
#include "store/tcp/PyTorchWire.hpp"
#include "store/tcp/StoreProtocol.hpp"

namespace c10d::inline v1 {
namespace {

using detail::uvError;
using protocol::FrameReader;
using protocol::FrameWriter;
using protocol::Op;
using protocol::Status;

// A client that keeps sending while its responses pile up unread is dropped past this.
constexpr size_t kMaxPendingWriteBytes = 2 * protocol::kMaxFrameBytes;
constexpr size_t kReadChunk = 64 * 1024;
// Waits longer than a day are a bug in the caller, and would overflow uv timers' arithmetic
// nowhere near, but bound them so one client cannot hold a waiter forever.
constexpr int64_t kMaxWaitMs = 24LL * 3600 * 1000;

int listenBacklog() {
  std::ifstream in("/proc/sys/net/core/somaxconn");
  int value = 0;
  if (in >> value && value > 0) return value;
  return SOMAXCONN;
}

}  // namespace

class TCPStoreServer::Impl {
 public:
  struct Connection;

  // A request parked until its keys exist or its timer fires.
  struct Waiter {
    Connection* connection;
    Op op;
    std::vector<std::string> keys;
    std::vector<std::string> registeredOn;  // keys whose waiter lists hold this waiter
    uv_timer_t timer;
  };

  // The protocol a client speaks, told by its first bytes: ours opens with protocol::kMagic, a
  // PyTorch client with a request (v1) or with VALIDATE and PyTorch's magic (v2). PyTorch's
  // clients are served so that torch.distributed programs rendezvous at a c10drun launcher's
  // store as they do at torchrun's agent's.
  enum class Dialect : uint8_t { Unknown, C10d, PyTorchV1, PyTorchV2 };

  struct Connection {
    uv_tcp_t handle;
    Impl* server;
    std::string peer;
    Dialect dialect = Dialect::Unknown;
    size_t pytorchNeeded = 0;  // a PyTorch request is not parsed again before this many bytes
    std::vector<uint8_t> input;
    size_t begin = 0;  // first unconsumed byte of input
    size_t end = 0;    // one past the last received byte
    bool handshaken = false;
    bool authenticated = false;  // true from the start on a server without a token
    auth::Nonce challenge{};     // the nonce this server sent it
    bool closing = false;
    Waiter* parked = nullptr;  // at most one request in progress per connection
  };

  struct WriteRequest {
    uv_write_t request;
    std::vector<uint8_t> data;
  };

  explicit Impl(const TCPStoreServerOptions& options);
  ~Impl();

  void stop();
  uint16_t port() const { return port_; }

  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> dropped{0};

 private:
  void bindAndListen(const TCPStoreServerOptions& options);
  void onNewConnection();
  void onRead(Connection* connection, ssize_t nread);
  void processInput(Connection* connection);
  // Reads the client's handshake (and, with a token, its proof); false: wait for more bytes.
  bool handshake(Connection* connection, const uint8_t* data, size_t available);
  bool checkProof(Connection* connection, const uint8_t* data, size_t available);
  void handleFrame(Connection* connection, const uint8_t* body, size_t size);
  // Sets connection->dialect from its first bytes; false: wait for more bytes.
  bool detectDialect(Connection* connection, const uint8_t* data, size_t available);
  // Serves one request of a PyTorch client; false: wait for more bytes.
  bool servePyTorch(Connection* connection, const uint8_t* data, size_t available);
  void handlePyTorchRequest(Connection* connection, const pytorch_wire::ParsedRequest& request);
  void drop(Connection* connection, const std::string& why);
  void close(Connection* connection);

  void send(Connection* connection, const std::vector<uint8_t>& data);
  // Serves connections whose parked request just completed. Runs at the end of each loop
  // callback rather than inside it, so completions never recurse into other connections.
  void resumeParked();
  std::vector<uint8_t>& beginResponse(FrameWriter& writer, Status status);

  // Completes the waiters that the keys in created_ were the last missing key for, and empties
  // created_. Called after each operation that may create keys, before its own answer is built
  // (both use scratch_), so a waiter sees the operation whole, never half of a multiSet.
  void wakeWaiters();
  void park(Connection* connection, Op op, std::vector<std::string> keys, int64_t timeoutMs);
  // Answers waiter if all its keys exist (returns true), else (re)registers it on missing keys.
  bool tryComplete(Waiter* waiter);
  // What a waiter waits for on key: a value, a value to pop (QueuePop), or for PyTorch's
  // clients (which wait on a queue's key before popping) either.
  bool ready(const Waiter& waiter, const std::string& key) const;
  bool ready(const Connection* connection, Op op, const std::string& key) const;
  void unregister(Waiter* waiter);
  void finish(Waiter* waiter);  // releases the waiter and resumes its connection
  void answerPresent(Connection* connection, Op op, const std::vector<std::string>& keys);
  // The bytes the values of keys (which all exist) take, to refuse an answer past the limits
  // before building it (many keys may name one large value).
  size_t answerBytes(const std::vector<std::string>& keys) const;
  void answerWaiter(Waiter* waiter);
  void answerTimeout(Waiter* waiter);
  // After a parked request's reply was sent: ends the wait, and serves what the client sent since.
  void finishAnswered(Connection* connection, Waiter* waiter);

  std::optional<std::string> token_;
  uv_tcp_t listener_;
  uint16_t port_ = 0;
  // After listener_: destroyed before it, it can still close it (a constructor that fails once
  // the port is bound).
  detail::UvLoopThread loopThread_;

  detail::KeyValueState state_;       // every key, and what each operation does to them
  std::vector<std::string> created_;  // keys the operation in progress created; see wakeWaiters
  std::unordered_map<std::string, std::vector<Waiter*>> waiting_;
  std::unordered_set<Connection*> open_;
  std::vector<uint8_t> scratch_;  // response being built; reused to avoid allocation per reply
  std::vector<Connection*> resume_;
};

TCPStoreServer::Impl::Impl(const TCPStoreServerOptions& options)
    : token_(auth::resolveToken(options.authToken)),
      loopThread_("c10d-store", "TCPStore server", std::type_identity<StoreError>{}) {
  uv_tcp_init(loopThread_.loop(), &listener_);
  listener_.data = this;
  try {
    // Here, before the loop thread starts: a port that cannot be had fails the constructor.
    bindAndListen(options);
  } catch (...) {
    // Never started, the loop closes on this thread.
    loopThread_.stop([this] { uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr); });
    throw;
  }
  loopThread_.start();
}

TCPStoreServer::Impl::~Impl() {
  stop();
}

void TCPStoreServer::Impl::stop() {
  // Two threads may stop the server at once (stop() and the destructor): loopThread_ lets one
  // through and joins once; the other returns when it has.
  loopThread_.stop([this] {
    // Closing a connection answers nothing more: its parked waiter and queued writes go with it.
    std::vector<Connection*> open(open_.begin(), open_.end());
    for (Connection* connection : open) close(connection);
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
  });
}

void TCPStoreServer::Impl::bindAndListen(const TCPStoreServerOptions& options) {
  // Empty address: all interfaces. "::" is dual-stack on Linux unless bindv6only is set; fall
  // back to IPv4 where the host has no IPv6.
  std::vector<std::string> candidates;
  if (options.listenAddress.empty()) {
    candidates = {"::", "0.0.0.0"};
  } else {
    candidates = {options.listenAddress};
  }
  std::string errors;
  for (const std::string& address : candidates) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* results = nullptr;
    std::string service = std::to_string(options.port);
    int gai = getaddrinfo(address.c_str(), service.c_str(), &hints, &results);
    if (gai != 0) {
      errors += " " + address + ": " + gai_strerror(gai) + ";";
      continue;
    }
    for (addrinfo* ai = results; ai != nullptr; ai = ai->ai_next) {
      int rc = uv_tcp_bind(&listener_, ai->ai_addr, 0);
      if (rc == 0)
        rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), listenBacklog(),
                       [](uv_stream_t* server, int status) {
                         auto* self = static_cast<Impl*>(server->data);
                         if (status < 0) {
                           C10D_LOG(Warning, "TCPStore server: accept failed: ", uvError(status));
                           return;
                         }
                         self->onNewConnection();
                       });
      if (rc == 0) {
        sockaddr_storage bound{};
        int length = sizeof(bound);
        uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &length);
        port_ =
            ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
        freeaddrinfo(results);
        C10D_LOG(Info, "TCPStore server listening on ", address, " port ", port_);
        return;
      }
      errors += " " + address + ": " + uvError(rc) + ";";
      // A failed bind leaves the handle's socket in an undefined state: start over with a new one.
      uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
      uv_run(loopThread_.loop(), UV_RUN_NOWAIT);
      uv_tcp_init(loopThread_.loop(), &listener_);
      listener_.data = this;
    }
    freeaddrinfo(results);
  }
  C10D_THROW(StoreError, "TCPStore server cannot listen on port ", options.port, ":", errors,
             " (is another job using this MASTER_PORT?)");
}

void TCPStoreServer::Impl::onNewConnection() {
  auto* connection = new Connection{};
  connection->server = this;
  uv_tcp_init(loopThread_.loop(), &connection->handle);
  connection->handle.data = connection;
  int rc = uv_accept(reinterpret_cast<uv_stream_t*>(&listener_),
                     reinterpret_cast<uv_stream_t*>(&connection->handle));
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&connection->handle),
             [](uv_handle_t* h) { delete static_cast<Connection*>(h->data); });
    return;
  }
  open_.insert(connection);
  connections.fetch_add(1, std::memory_order_relaxed);
  uv_tcp_nodelay(&connection->handle, 1);

  sockaddr_storage address{};
  int length = sizeof(address);
  if (uv_tcp_getpeername(&connection->handle, reinterpret_cast<sockaddr*>(&address), &length) ==
      0) {
    char host[INET6_ADDRSTRLEN] = {0};
    int port = 0;
    if (address.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
      uv_ip6_name(in6, host, sizeof(host));
      port = ntohs(in6->sin6_port);
    } else {
      auto* in4 = reinterpret_cast<sockaddr_in*>(&address);
      uv_ip4_name(in4, host, sizeof(host));
      port = ntohs(in4->sin_port);
    }
    connection->peer = std::string(host) + ":" + std::to_string(port);
  }

  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&connection->handle),
      [](uv_handle_t* handle, size_t, uv_buf_t* buf) {
        auto* c = static_cast<Connection*>(handle->data);
        // Keep unconsumed bytes at the front so the buffer only grows to one frame's size.
        if (c->begin > 0 && c->begin == c->end) {
          c->begin = c->end = 0;
        } else if (c->begin > 0 && c->input.size() - c->end < kReadChunk) {
          std::memmove(c->input.data(), c->input.data() + c->begin, c->end - c->begin);
          c->end -= c->begin;
          c->begin = 0;
        }
        if (c->input.size() - c->end < kReadChunk) c->input.resize(c->end + kReadChunk);
        buf->base = reinterpret_cast<char*>(c->input.data() + c->end);
        buf->len = c->input.size() - c->end;
      },
      [](uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
        auto* c = static_cast<Connection*>(stream->data);
        c->server->onRead(c, nread);
      });
}

void TCPStoreServer::Impl::onRead(Connection* connection, ssize_t nread) {
  if (nread == 0) return;  // EAGAIN
  if (nread < 0) {
    // EOF or reset: a client leaving, possibly in the middle of a request or a wait.
    if (nread != UV_EOF) {
      C10D_LOG(Debug, "TCPStore server: client ", connection->peer, " read error ",
               uvError(static_cast<int>(nread)));
    }
    if (connection->handshaken && !connection->authenticated) {
      C10D_LOG(Warning, "TCPStore server: refused client ", connection->peer,
               ": it left without authenticating (does it have C10D_AUTH_TOKEN set?)");
    }
    close(connection);
    return;
  }
  connection->end += static_cast<size_t>(nread);
  processInput(connection);
  resumeParked();
}

void TCPStoreServer::Impl::resumeParked() {
  while (!resume_.empty()) {
    Connection* connection = resume_.back();
    resume_.pop_back();
    // Closed connections are freed only by a later loop phase, so the pointer is still valid.
    if (!connection->closing) processInput(connection);
  }
}

void TCPStoreServer::Impl::processInput(Connection* connection) {
  try {
    while (!connection->closing) {
      size_t available = connection->end - connection->begin;
      const uint8_t* data = connection->input.data() + connection->begin;
      if (connection->dialect == Dialect::Unknown) {
        if (!detectDialect(connection, data, available)) return;
        continue;
      }
      if (connection->dialect != Dialect::C10d) {
        if (!servePyTorch(connection, data, available)) return;
        continue;
      }
      if (!connection->handshaken) {
        if (!handshake(connection, data, available)) return;
        continue;
      }
      if (!connection->authenticated) {
        if (!checkProof(connection, data, available)) return;
        continue;
      }
      if (available < protocol::kFrameHeaderBytes) return;
      uint32_t length;
      std::memcpy(&length, data, sizeof(length));
      if (length > protocol::kMaxFrameBytes) {
        C10D_THROW(protocol::ProtocolError, "frame of ", length, " bytes exceeds the limit of ",
                   protocol::kMaxFrameBytes);
      }
      if (length == 0) C10D_THROW(protocol::ProtocolError, "empty frame");
      if (connection->parked != nullptr) {
        // A well-behaved client waits for its answer; a pipelining one may queue one frame.
        if (available > protocol::kFrameHeaderBytes + protocol::kMaxFrameBytes) {
          C10D_THROW(protocol::ProtocolError, "sent ", available,
                     " bytes while waiting for a reply");
        }
        return;
      }
      if (available < protocol::kFrameHeaderBytes + length) return;
      connection->begin += protocol::kFrameHeaderBytes + length;
      handleFrame(connection, data + protocol::kFrameHeaderBytes, length);
    }
  } catch (const protocol::ProtocolError& e) {
    drop(connection, e.what());
  } catch (const std::exception& e) {  // out of memory: that client goes, the server stays
    drop(connection, std::string("its request failed: ") + e.what());
  }
}

bool TCPStoreServer::Impl::handshake(Connection* connection, const uint8_t* data,
                                     size_t available) {
  if (std::memcmp(data, protocol::kMagic, std::min<size_t>(available, 4)) != 0) {
    C10D_THROW(protocol::ProtocolError, "bad handshake magic");
  }
  if (available < protocol::kHandshakeBytes) return false;
  uint16_t version;
  std::memcpy(&version, data + 4, sizeof(version));
  connection->begin += protocol::kHandshakeBytes;
  auto status = protocol::HandshakeStatus::Ok;
  if (version != protocol::kVersion) {
    status = protocol::HandshakeStatus::VersionMismatch;
  } else if (token_) {
    status = protocol::HandshakeStatus::AuthChallenge;
  }
  std::vector<uint8_t> reply(protocol::kMagic, protocol::kMagic + 4);
  reply.resize(protocol::kHandshakeBytes);
  uint16_t ours = protocol::kVersion;
  auto rawStatus = static_cast<uint16_t>(status);
  std::memcpy(reply.data() + 4, &ours, 2);
  std::memcpy(reply.data() + 6, &rawStatus, 2);
  if (status == protocol::HandshakeStatus::AuthChallenge) {
    connection->challenge = auth::randomNonce();
    reply.insert(reply.end(), connection->challenge.begin(), connection->challenge.end());
  }
  send(connection, reply);
  if (status == protocol::HandshakeStatus::VersionMismatch) {
    C10D_LOG(Warning, "TCPStore server: client ", connection->peer, " speaks protocol version ",
             version, ", this server ", ours, "; closing its connection");
    close(connection);
    return false;
  }
  connection->handshaken = true;
  connection->authenticated = !token_;
  return true;
}

bool TCPStoreServer::Impl::checkProof(Connection* connection, const uint8_t* data,
                                      size_t available) {
  // The client's nonce, then its proof over our challenge and its nonce.
  if (available < auth::kNonceBytes + auth::kProofBytes) return false;
  auth::Nonce clientNonce;
  std::memcpy(clientNonce.data(), data, clientNonce.size());
  auth::Proof expected =
      auth::prove(*token_, protocol::kClientProofRole, connection->challenge, clientNonce);
  connection->begin += auth::kNonceBytes + auth::kProofBytes;
  if (!auth::matches(expected, data + auth::kNonceBytes)) {
    drop(connection, "wrong authentication token; no key was read or written");
    return false;
  }
  auth::Proof ours =
      auth::prove(*token_, protocol::kServerProofRole, clientNonce, connection->challenge);
  send(connection, std::vector<uint8_t>(ours.begin(), ours.end()));
  connection->authenticated = true;
  return true;
}

std::vector<uint8_t>& TCPStoreServer::Impl::beginResponse(FrameWriter& writer, Status status) {
  scratch_.clear();
  writer.beginFrame();
  writer.u8(static_cast<uint8_t>(status));
  return scratch_;
}

void TCPStoreServer::Impl::handleFrame(Connection* connection, const uint8_t* body, size_t size) {
  FrameReader in(body, size);
  uint8_t rawOp = in.u8();
  if (rawOp == 0 || rawOp > protocol::kMaxOp) {
    C10D_THROW(protocol::ProtocolError, "unknown op ", int(rawOp));
  }
  Op op = static_cast<Op>(rawOp);
  FrameWriter out(scratch_);
  switch (op) {
    case Op::Set: {
      std::string key = in.key();
      Store::Bytes value = in.value();
      in.expectEnd();
      state_.set(key, std::move(value), &created_);
      wakeWaiters();
      beginResponse(out, Status::Ok);
      break;
    }
    case Op::Get:
    case Op::Wait:
    case Op::MultiGet: {
      std::vector<std::string> keys;
      if (op == Op::Get) {
        keys.push_back(in.key());
      } else {
        keys = in.keys();
      }
      int64_t timeoutMs = in.i64();
      in.expectEnd();
      if (timeoutMs <= 0 || timeoutMs > kMaxWaitMs) {
        C10D_THROW(protocol::ProtocolError, "timeout ", timeoutMs, " ms out of range");
      }
      park(connection, op, std::move(keys), timeoutMs);
      return;  // answered by park, now or later
    }
    case Op::Add: {
      std::string key = in.key();
      int64_t delta = in.i64();
      in.expectEnd();
      int64_t result;
      try {
        result = state_.add(key, delta, &created_);
      } catch (const InvalidArgument& e) {  // overflow
        beginResponse(out, Status::InvalidArgument);
        out.bytes(std::string_view(e.what()));
        break;
      } catch (const Error& e) {  // not an integer
        beginResponse(out, Status::Error);
        out.bytes(std::string_view(e.what()));
        break;
      }
      wakeWaiters();
      beginResponse(out, Status::Ok);
      out.i64(result);
      break;
    }
    case Op::CompareSet: {
      std::string key = in.key();
      Store::Bytes expected = in.value();
      Store::Bytes desired = in.value();
      in.expectEnd();
      Store::Bytes result = state_.compareSet(key, expected, std::move(desired), &created_);
      wakeWaiters();
      beginResponse(out, Status::Ok);
      out.bytes(result);
      break;
    }
    case Op::Delete: {
      std::string key = in.key();
      in.expectEnd();
      bool existed = state_.deleteKey(key);
      beginResponse(out, Status::Ok);
      out.u8(existed ? 1 : 0);
      break;
    }
    case Op::Check: {
      std::vector<std::string> keys = in.keys();
      in.expectEnd();
      bool all = state_.hasAll(keys);
      beginResponse(out, Status::Ok);
      out.u8(all ? 1 : 0);
      break;
    }
    case Op::NumKeys: {
      in.expectEnd();
      beginResponse(out, Status::Ok);
      out.i64(state_.numKeys());
      break;
    }
    case Op::MultiSet: {
      std::vector<std::string> keys = in.keys();
      std::vector<Store::Bytes> values;
      values.reserve(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) values.push_back(in.value());
      in.expectEnd();
      state_.multiSet(keys, std::move(values), &created_);
      wakeWaiters();
      beginResponse(out, Status::Ok);
      break;
    }
    case Op::Append: {
      std::string key = in.key();
      std::string_view suffix = in.bytes(Store::kMaxValueBytes);
      in.expectEnd();
      // Appended straight from the frame, which outlives the call: no copy of its own.
      const auto* bytes = reinterpret_cast<const uint8_t*>(suffix.data());
      try {
        state_.append(key, std::span<const uint8_t>(bytes, suffix.size()), &created_);
      } catch (const InvalidArgument& e) {  // the value would grow past Store::kMaxValueBytes
        beginResponse(out, Status::InvalidArgument);
        out.bytes(std::string_view(e.what()));
        break;
      }
      wakeWaiters();
      beginResponse(out, Status::Ok);
      break;
    }
    case Op::QueuePush: {
      std::string key = in.key();
      Store::Bytes value = in.value();
      in.expectEnd();
      state_.queuePush(key, std::move(value), &created_);
      wakeWaiters();
      beginResponse(out, Status::Ok);
      break;
    }
    case Op::QueuePop: {
      std::string key = in.key();
      int64_t timeoutMs = in.i64();
      in.expectEnd();
      if (timeoutMs < 0 || timeoutMs > kMaxWaitMs) {
        C10D_THROW(protocol::ProtocolError, "timeout ", timeoutMs, " ms out of range");
      }
      if (timeoutMs == 0 && state_.queueLen(key) == 0) {
        beginResponse(out, Status::Ok);
        out.u8(0);
        break;
      }
      park(connection, op, {std::move(key)}, std::max<int64_t>(timeoutMs, 1));
      return;  // answered by park, now or later
    }
    case Op::QueueLen: {
      std::string key = in.key();
      in.expectEnd();
      beginResponse(out, Status::Ok);
      out.i64(state_.queueLen(key));
      break;
    }
    case Op::Ping: {
      in.expectEnd();
      beginResponse(out, Status::Ok);
      break;
    }
  }
  out.endFrame();
  send(connection, scratch_);
}

bool TCPStoreServer::Impl::detectDialect(Connection* connection, const uint8_t* data,
                                         size_t available) {
  using pytorch_wire::Request;
  using pytorch_wire::Version;
  if (available == 0) return false;
  if (data[0] == protocol::kMagic[0]) {
    connection->dialect = Dialect::C10d;
    return true;
  }
  if (data[0] == pytorch_wire::code(Version::V2, Request::Validate)) {
    // Also v1's SET; its key length never has PyTorch's magic in its low bytes (it would pass
    // the key limit).
    if (available < 1 + sizeof(pytorch_wire::kV2Magic)) return false;
    uint32_t magic;
    std::memcpy(&magic, data + 1, sizeof(magic));
    connection->dialect = magic == pytorch_wire::kV2Magic ? Dialect::PyTorchV2 : Dialect::PyTorchV1;
  } else if (pytorch_wire::request(Version::V1, data[0])) {
    connection->dialect = Dialect::PyTorchV1;
  } else {
    C10D_THROW(protocol::ProtocolError, "bad handshake magic: first byte ", int(data[0]),
               " opens neither c10d's store protocol nor PyTorch's TCPStore protocol");
  }
  if (token_) {
    drop(connection,
         "it speaks PyTorch's TCPStore protocol, which cannot authenticate, and this server "
         "requires a token (C10D_AUTH_TOKEN)");
    return false;
  }
  return true;
}

bool TCPStoreServer::Impl::servePyTorch(Connection* connection, const uint8_t* data,
                                        size_t available) {
  const auto version = connection->dialect == Dialect::PyTorchV2 ? pytorch_wire::Version::V2
                                                                 : pytorch_wire::Version::V1;
  if (connection->parked != nullptr && available > 0 &&
      pytorch_wire::request(version, data[0]) != pytorch_wire::Request::CancelWait) {
    // A waiting PyTorch client sends nothing but CANCEL_WAIT (2.1 on) until it is answered; a
    // pipelining one may queue one request of any size.
    if (available > protocol::kMaxFrameBytes) {
      C10D_THROW(protocol::ProtocolError, "sent ", available, " bytes while waiting for a reply");
    }
    return false;
  }
  if (available < connection->pytorchNeeded) return false;
  std::optional<pytorch_wire::ParsedRequest> request =
      pytorch_wire::parseRequest(version, data, available, &connection->pytorchNeeded);
  if (!request) {
    // Each field is bounded, a MULTI_SET's sum is not: bound the whole as our frames are.
    if (available > protocol::kMaxFrameBytes) {
      C10D_THROW(protocol::ProtocolError, "a request of more than ", protocol::kMaxFrameBytes,
                 " bytes");
    }
    return false;
  }
  connection->pytorchNeeded = 0;
  connection->begin += request->bytes;  // the views stay valid: input changes only on reads
  handlePyTorchRequest(connection, *request);
  return true;
}

void TCPStoreServer::Impl::handlePyTorchRequest(Connection* connection,
                                                const pytorch_wire::ParsedRequest& request) {
  using pytorch_wire::Request;
  auto bytes = [](std::string_view view) { return Store::Bytes(view.begin(), view.end()); };
  const std::string key = request.keys.empty() ? std::string() : std::string(request.keys[0]);
  auto refuse = [&](auto&&... why) {
    C10D_THROW(protocol::ProtocolError, "PyTorch ", pytorch_wire::name(request.request), " '", key,
               "': ", why...);
  };
  // wakeWaiters answers with scratch_: every answer below is built after it ran.
  std::vector<uint8_t>& answer = scratch_;
  switch (request.request) {
    case Request::Validate:
      if (static_cast<uint32_t>(request.integer) != pytorch_wire::kV2Magic) {
        refuse("wrong magic ", request.integer);
      }
      return;  // no answer
    case Request::Set:
      state_.set(key, bytes(request.values[0]), &created_);
      wakeWaiters();
      return;  // no answer
    case Request::CompareSet: {
      Store::Bytes result =
          state_.compareSet(key, bytes(request.values[0]), bytes(request.values[1]), &created_);
      wakeWaiters();
      answer.clear();
      pytorch_wire::appendValue(answer, result);
      break;
    }
    case Request::Get:
    case Request::MultiGet: {
      // PyTorch's clients wait first; its server closes the connection of one that did not.
      std::vector<std::string> keys(request.keys.begin(), request.keys.end());
      std::vector<std::string> missing = state_.missing(keys);
      if (!missing.empty()) refuse("key '", missing.front(), "' does not exist (wait first)");
      const size_t bytes = answerBytes(keys);
      if (bytes > protocol::kMaxFrameBytes) {
        refuse("the values come to ", bytes, " bytes, over the limit of ", protocol::kMaxFrameBytes,
               " for one answer");
      }
      answer.clear();
      for (const std::string& each : keys) pytorch_wire::appendValue(answer, state_.get(each));
      break;
    }
    case Request::Add: {
      int64_t result = 0;
      try {
        result = state_.add(key, request.integer, &created_);
      } catch (const Error& e) {  // not an integer, or overflow: PyTorch's server closes too
        refuse(e.what());
      }
      wakeWaiters();
      answer.clear();
      pytorch_wire::appendI64(answer, result);
      break;
    }
    case Request::Check: {
      const bool all = std::all_of(request.keys.begin(), request.keys.end(), [&](auto each) {
        return state_.hasOrQueued(std::string(each));
      });
      answer.assign(1, all ? pytorch_wire::kReady : pytorch_wire::kNotReady);
      break;
    }
    case Request::Wait:
      // Answered kStopWaiting by answerPresent, now or once the keys exist; PyTorch's client
      // keeps its own timeout.
      park(connection, Op::Wait, std::vector<std::string>(request.keys.begin(), request.keys.end()),
           kMaxWaitMs);
      return;
    case Request::NumKeys:
      answer.clear();
      pytorch_wire::appendI64(answer, state_.numKeys());
      break;
    case Request::WatchKey:
      refuse("not served here (watch_key callbacks need PyTorch's own server)");
      break;
    case Request::DeleteKey:
      answer.clear();
      pytorch_wire::appendI64(answer, state_.deleteKey(key) ? 1 : 0);
      break;
    case Request::Append: {
      const auto* suffix = reinterpret_cast<const uint8_t*>(request.values[0].data());
      try {
        state_.append(key, std::span<const uint8_t>(suffix, request.values[0].size()), &created_);
      } catch (const InvalidArgument& e) {
        refuse(e.what());
      }
      wakeWaiters();
      return;  // no answer
    }
    case Request::MultiSet: {
      std::vector<std::string> keys(request.keys.begin(), request.keys.end());
      std::vector<Store::Bytes> values;
      values.reserve(request.values.size());
      for (std::string_view value : request.values) values.push_back(bytes(value));
      state_.multiSet(keys, std::move(values), &created_);
      wakeWaiters();
      return;  // no answer
    }
    case Request::QueuePush:
      state_.queuePush(key, bytes(request.values[0]), &created_);
      wakeWaiters();
      return;  // no answer
    case Request::QueuePop: {
      // The length before the pop, then the value when there was one; an empty queue's pop is
      // answered 0 (PyTorch's client raises DistQueueEmptyError).
      const int64_t length = state_.queueLen(key);
      answer.clear();
      pytorch_wire::appendI64(answer, length);
      if (length > 0) pytorch_wire::appendValue(answer, *state_.queuePop(key));
      break;
    }
    case Request::QueueLen:
      answer.clear();
      pytorch_wire::appendI64(answer, state_.queueLen(key));
      break;
    case Request::CancelWait:
      if (connection->parked != nullptr) finish(connection->parked);
      answer.assign(1, pytorch_wire::kWaitCanceled);
      break;
    case Request::Ping: {  // the nonce back, as PyTorch >= 2.4's client checks after VALIDATE
      const auto nonce = static_cast<uint32_t>(request.integer);
      const auto* bytes = reinterpret_cast<const uint8_t*>(&nonce);
      answer.assign(bytes, bytes + sizeof(nonce));
      break;
    }
    case Request::Count:
      return;
  }
  send(connection, answer);
}

void TCPStoreServer::Impl::wakeWaiters() {
  // Waiters are registered only on missing keys, so only created ones can complete them.
  // Answering one sends, finishes waiters and queues connections to resume, but never runs an
  // operation, so created_ stays as it is while it is walked.
  for (const std::string& key : created_) {
    auto waiting = waiting_.find(key);
    if (waiting == waiting_.end()) continue;
    std::vector<Waiter*> waiters = std::move(waiting->second);
    waiting_.erase(waiting);
    for (Waiter* waiter : waiters) {
      auto& on = waiter->registeredOn;
      on.erase(std::remove(on.begin(), on.end(), key), on.end());
      if (on.empty()) tryComplete(waiter);
    }
  }
  created_.clear();
}

bool TCPStoreServer::Impl::ready(const Connection* connection, Op op,
                                 const std::string& key) const {
  if (op == Op::QueuePop) return state_.queueLen(key) > 0;
  if (connection->dialect != Dialect::C10d) return state_.hasOrQueued(key);
  return state_.has(key);
}

bool TCPStoreServer::Impl::ready(const Waiter& waiter, const std::string& key) const {
  return ready(waiter.connection, waiter.op, key);
}

void TCPStoreServer::Impl::park(Connection* connection, Op op, std::vector<std::string> keys,
                                int64_t timeoutMs) {
  // The common case, keys already there, is answered without allocating a waiter or a timer.
  if (std::all_of(keys.begin(), keys.end(),
                  [&](const std::string& key) { return ready(connection, op, key); })) {
    answerPresent(connection, op, keys);
    return;
  }
  auto* waiter = new Waiter{connection, op, std::move(keys), {}, {}};
  connection->parked = waiter;
  uv_timer_init(loopThread_.loop(), &waiter->timer);
  waiter->timer.data = waiter;
  tryComplete(waiter);
  // libuv times from the loop's cached clock, in whole milliseconds: refresh it and round up,
  // or a wait can end before its timeout has passed (seen in CI; measured:
  // docs/performance-history.md, "Figures that lived in code comments").
  uv_update_time(loopThread_.loop());
  uv_timer_start(
      &waiter->timer,
      [](uv_timer_t* timer) {
        auto* w = static_cast<Waiter*>(timer->data);
        Impl* self = w->connection->server;
        self->answerTimeout(w);
        self->resumeParked();
      },
      static_cast<uint64_t>(timeoutMs) + 1, 0);
}

bool TCPStoreServer::Impl::tryComplete(Waiter* waiter) {
  unregister(waiter);
  for (const std::string& key : waiter->keys) {
    if (!ready(*waiter, key) && std::find(waiter->registeredOn.begin(), waiter->registeredOn.end(),
                                          key) == waiter->registeredOn.end()) {
      waiting_[key].push_back(waiter);
      waiter->registeredOn.push_back(key);
    }
  }
  if (!waiter->registeredOn.empty()) return false;
  answerWaiter(waiter);
  return true;
}

void TCPStoreServer::Impl::unregister(Waiter* waiter) {
  for (const std::string& key : waiter->registeredOn) {
    auto it = waiting_.find(key);
    if (it == waiting_.end()) continue;
    auto& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), waiter), list.end());
    if (list.empty()) waiting_.erase(it);
  }
  waiter->registeredOn.clear();
}

void TCPStoreServer::Impl::answerPresent(Connection* connection, Op op,
                                         const std::vector<std::string>& keys) {
  if (connection->dialect != Dialect::C10d) {  // only PyTorch's WAIT parks
    scratch_.assign(1, pytorch_wire::kStopWaiting);
    send(connection, scratch_);
    return;
  }
  FrameWriter out(scratch_);
  const size_t bytes = op == Op::MultiGet ? answerBytes(keys) : 0;
  if (bytes > protocol::kMaxFrameBytes) {
    beginResponse(out, Status::Error);
    out.bytes(detail::concat("the values of ", keys.size(), " keys come to ", bytes,
                             " bytes, over the limit of ", protocol::kMaxFrameBytes,
                             " for one answer; ask for fewer keys at a time"));
    out.endFrame();
    send(connection, scratch_);
    return;
  }
  beginResponse(out, Status::Ok);
  if (op == Op::QueuePop) {
    out.u8(1);
    out.bytes(*state_.queuePop(keys.front()));
  } else if (op == Op::Get) {
    out.bytes(state_.get(keys.front()));
  } else if (op == Op::MultiGet) {
    out.u32(static_cast<uint32_t>(keys.size()));
    for (const auto& key : keys) out.bytes(state_.get(key));
  }
  out.endFrame();
  send(connection, scratch_);
}

size_t TCPStoreServer::Impl::answerBytes(const std::vector<std::string>& keys) const {
  size_t bytes = 0;
  for (const auto& key : keys) bytes += state_.get(key).size() + sizeof(uint64_t);
  return bytes;
}

void TCPStoreServer::Impl::answerWaiter(Waiter* waiter) {
  Connection* connection = waiter->connection;
  answerPresent(connection, waiter->op, waiter->keys);
  finishAnswered(connection, waiter);
}

void TCPStoreServer::Impl::finishAnswered(Connection* connection, Waiter* waiter) {
  // A reply that could not be written closed the connection, and that finished its waiter
  // already: a second finish would close the waiter's timer twice (libuv aborts on that).
  if (connection->parked == waiter) finish(waiter);
  if (!connection->closing) resume_.push_back(connection);  // frames that arrived while parked
}

void TCPStoreServer::Impl::answerTimeout(Waiter* waiter) {
  if (waiter->connection->dialect != Dialect::C10d) {
    // PyTorch's protocol has no timeout answer: its client gives up on its own.
    drop(waiter->connection, "its wait passed the server's limit of a day");
    return;
  }
  unregister(waiter);
  std::vector<std::string> missing =
      waiter->op == Op::QueuePop ? waiter->keys : state_.missing(waiter->keys);
  FrameWriter out(scratch_);
  beginResponse(out, Status::Timeout);
  out.keys(missing);
  out.endFrame();
  Connection* connection = waiter->connection;
  send(connection, scratch_);
  finishAnswered(connection, waiter);
}

void TCPStoreServer::Impl::finish(Waiter* waiter) {
  unregister(waiter);
  waiter->connection->parked = nullptr;
  uv_timer_stop(&waiter->timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&waiter->timer),
           [](uv_handle_t* h) { delete static_cast<Waiter*>(h->data); });
}

void TCPStoreServer::Impl::send(Connection* connection, const std::vector<uint8_t>& data) {
  if (connection->closing) return;
  auto* stream = reinterpret_cast<uv_stream_t*>(&connection->handle);
  size_t offset = 0;
  uv_buf_t buf =
      uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(data.data())), data.size());
  int written = uv_try_write(stream, &buf, 1);
  if (written > 0) offset = static_cast<size_t>(written);
  if (offset == data.size()) return;
  if (written < 0 && written != UV_EAGAIN) {
    close(connection);
    return;
  }
  if (uv_stream_get_write_queue_size(stream) + data.size() > kMaxPendingWriteBytes) {
    drop(connection, "does not read its replies");
    return;
  }
  auto* request = new WriteRequest{};
  request->data.assign(data.begin() + static_cast<std::ptrdiff_t>(offset), data.end());
  uv_buf_t rest = uv_buf_init(reinterpret_cast<char*>(request->data.data()), request->data.size());
  request->request.data = request;
  int rc = uv_write(&request->request, stream, &rest, 1,
                    [](uv_write_t* req, int) { delete static_cast<WriteRequest*>(req->data); });
  if (rc != 0) {
    delete request;
    close(connection);
  }
}

void TCPStoreServer::Impl::drop(Connection* connection, const std::string& why) {
  dropped.fetch_add(1, std::memory_order_relaxed);
  C10D_LOG(Warning, "TCPStore server: dropping client ", connection->peer, ": ", why);
  close(connection);
}

void TCPStoreServer::Impl::close(Connection* connection) {
  if (connection->closing) return;
  connection->closing = true;
  if (connection->parked != nullptr) finish(connection->parked);
  open_.erase(connection);
  connections.fetch_sub(1, std::memory_order_relaxed);
  uv_close(reinterpret_cast<uv_handle_t*>(&connection->handle),
           [](uv_handle_t* h) { delete static_cast<Connection*>(h->data); });
}

TCPStoreServer::TCPStoreServer(TCPStoreServerOptions options)
    : impl_(std::make_unique<Impl>(options)) {}

TCPStoreServer::~TCPStoreServer() = default;

uint16_t TCPStoreServer::port() const {
  return impl_->port();
}

void TCPStoreServer::stop() {
  impl_->stop();
}

int64_t TCPStoreServer::connectionCount() const {
  return impl_->connections.load();
}

int64_t TCPStoreServer::droppedConnectionCount() const {
  return impl_->dropped.load();
}

}  // namespace c10d::inline v1
