#include "rpc/transport/Transport.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <uv.h>

#include <cerrno>
#include <climits>

#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/net/Auth.hpp"
#include "c10d/net/UvLoop.hpp"

namespace c10d::inline v0::rpc {

namespace {

// Frames up to this size are written by the sending thread when nothing is queued; larger
// ones go to the loop thread (written from the sender, 16 MiB echoes ran at 1.7-2.0 instead of
// 2.4-3.0 GB/s).
constexpr size_t kDirectWriteBytes = 256 * 1024;

// Reads of at least this much go straight into their destination (a tensor); smaller wants are
// served from one staging buffer, so a small frame costs one read, not one per part.
constexpr size_t kDirectReadBytes = 64 * 1024;

using c10d::detail::uvError;

std::pair<std::string, std::string> splitAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  C10D_CHECK(colon != std::string::npos && colon > 0, InvalidArgument, "rpc: bad address '",
             address, "'");
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, address.substr(colon + 1)};
}

constexpr char kConnectorRole[] = "c10d rpc connector";
constexpr char kAcceptorRole[] = "c10d rpc acceptor";

// The other side broke the introduction (wrong token, none, or one where none was expected):
// the connection is dropped and connect() fails at once instead of retrying.
class Refused : public RemoteError {
 public:
  using RemoteError::RemoteError;
};

struct ConnectResult {
  int rc = 0;           // a libuv error: retried until the deadline
  std::string refused;  // not empty: authentication failed, not retried
};

// A nonce or a proof as frame payload bytes.
static_assert(std::is_same_v<auth::Nonce, auth::Proof>);
std::string_view bytesOf(const auth::Nonce& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

struct Transport::Impl {
  // A frame on its way out: its encoded head and tensors, of which skip bytes went out already.
  struct Outgoing {
    std::string head;
    std::vector<Tensor> tensors;
    size_t skip = 0;
  };
  struct Connection {
    // The introduction, in Hello frames. Connector: Hello(its nonce) ->; acceptor: <- Hello(its
    // nonce, its proof); connector: Hello(its proof) ->. Without a token both nonces are empty
    // and the acceptor's reply only confirms. Requests flow once a side reaches Open.
    enum class Stage { AwaitHello, AwaitProof, AwaitReply, Open };

    uv_tcp_t handle;  // first: libuv hands the handle back
    Impl* impl = nullptr;
    int peer = -1;
    Stage stage = Stage::AwaitHello;
    int claimed = -1;  // acceptor: the worker id the Hello named, before it is trusted
    auth::Nonce ourNonce{};
    auth::Nonce theirNonce{};
    std::shared_ptr<std::promise<ConnectResult>> pendingConnect;  // connector until Open
    FrameReader reader;
    std::vector<char> staging = std::vector<char>(kDirectReadBytes);
    bool stagingInUse = false;
    // The loop's reference, released when libuv has closed the handle; senders on other
    // threads hold their own while they write.
    std::shared_ptr<Connection> self;
    // Guards the fd against the loop closing it while a sender on another thread writes, and
    // orders those writes against the loop's.
    std::mutex writeMutex;
    bool closing = false;    // under writeMutex, set before uv_close
    std::string closingWhy;  // under writeMutex: drop()'s reason
    int fd = -1;
    // Under writeMutex: frames for the loop thread to write, in order, and how many loop writes
    // are scheduled or in libuv's hands (the outbox's flush counts as one). A sender writes on
    // its own thread only when both are empty, so frames never overtake each other.
    std::vector<Outgoing> outbox;
    int queuedWrites = 0;
    bool isClosing() {
      std::lock_guard<std::mutex> guard(writeMutex);
      return closing;
    }
  };
  struct Write {
    uv_write_t request;  // first
    std::vector<Outgoing> frames;
    Connection* connection;
  };

  Impl(int selfId, std::optional<std::string> authToken, OnFrame frameHandler,
       OnPeerLost lostHandler)
      : self(selfId),
        token(std::move(authToken)),
        onFrame(std::move(frameHandler)),
        onPeerLost(std::move(lostHandler)),
        loopThread("c10d-rpc-io", c10d::detail::concat("rpc transport of worker ", selfId),
                   std::type_identity<BackendError>{}) {}

  int self;
  std::optional<std::string> token;
  OnFrame onFrame;
  OnPeerLost onPeerLost;

  uv_check_t afterCallbacks;  // runs once the loop's callbacks are done, before it sleeps
  uv_tcp_t listener;
  bool listening = false;
  // The loop, its thread and the commands posted to it; post() refuses with StateError ("rpc
  // transport of worker <self> is closed") from the moment close() begins. After the handles
  // above: destroyed before them, it can still close them (a constructor that fails to start it).
  c10d::detail::UvLoopThread loopThread;

  std::mutex mutex;
  std::condition_variable changed;
  std::map<int, std::shared_ptr<Connection>> peers;  // guarded by mutex
  std::map<int, std::string> lost;                   // peer -> why
  std::set<Connection*> connections;                 // loop thread only
  // Under mutex: set by close() on the loop thread, before it drops the connections. send()
  // refuses from then on, and a connection lost then is not reported to onPeerLost.
  bool closed = false;
  // Under mutex: whether the loop thread is running callbacks. Until it is done with them it
  // will pass afterCallbacks, which flushes the outboxes of `dirty`: a sender that queues a
  // frame meanwhile adds its connection there and needs no wake-up (a pipelined caller, woken
  // by the replies this thread is delivering, sends its next calls in that window).
  bool loopBusy = false;
  // Loop thread only: loopBusy as this thread last set it, so that each read in a burst does
  // not take the mutex again.
  bool loopMarkedBusy = false;
  std::vector<std::shared_ptr<Connection>> dirty;

  // A command marks the loop busy as it starts, as a read does: senders meanwhile leave their
  // flush to afterCallbacks instead of posting one more wake-up.
  void post(std::function<void()> command) {
    loopThread.post([this, command = std::move(command)] {
      markBusy();
      command();
    });
  }

  // Runs fn on the loop thread and returns its result (or rethrows its error).
  template <typename Fn>
  auto onLoop(Fn fn) -> decltype(fn()) {
    using R = decltype(fn());
    auto promise = std::make_shared<std::promise<R>>();
    std::future<R> result = promise->get_future();
    post([promise, fn = std::move(fn)]() mutable {
      try {
        if constexpr (std::is_void_v<R>) {
          fn();
          promise->set_value();
        } else {
          promise->set_value(fn());
        }
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
    return result.get();
  }

  Connection* newConnection() {
    auto owned = std::make_shared<Connection>();
    Connection* c = owned.get();
    c->self = std::move(owned);
    c->impl = this;
    uv_tcp_init(loopThread.loop(), &c->handle);
    uv_tcp_nodelay(&c->handle, 1);
    c->handle.data = c;
    connections.insert(c);
    return c;
  }

  void registerPeer(Connection* c, int peer) {
    c->peer = peer;
    uv_os_fd_t fd = -1;
    uv_fileno(reinterpret_cast<uv_handle_t*>(&c->handle), &fd);
    {
      std::lock_guard<std::mutex> guard(c->writeMutex);
      c->fd = fd;
    }
    std::lock_guard<std::mutex> guard(mutex);
    peers[peer] = c->self;
    lost.erase(peer);
    changed.notify_all();
  }

  void drop(Connection* c, const std::string& why) {
    {
      std::lock_guard<std::mutex> guard(c->writeMutex);
      if (c->closing) return;
      c->closing = true;
      c->closingWhy = why;
    }
    if (auto pending = std::exchange(c->pendingConnect, nullptr)) {
      pending->set_value(ConnectResult{UV_ECONNRESET, {}});
    }
    if (c->stage == Connection::Stage::AwaitProof) {
      C10D_LOG(Warning, "rpc worker ", self, ": refused a connection claiming to be worker ",
               c->claimed, ": it left without authenticating (", why,
               "); does it have C10D_AUTH_TOKEN set?");
    }
    int peer = c->peer;
    bool report = false;
    if (peer >= 0) {
      std::lock_guard<std::mutex> guard(mutex);
      auto it = peers.find(peer);
      if (it != peers.end() && it->second.get() == c) {
        peers.erase(it);
        lost[peer] = why;
        report = !closed;
      }
      changed.notify_all();
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&c->handle), [](uv_handle_t* handle) {
      auto* c = static_cast<Connection*>(handle->data);
      c->impl->connections.erase(c);
      c->self.reset();  // deletes c unless a sender still holds it
    });
    if (report) onPeerLost(peer, why);
  }

  void startReading(Connection* c) {
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&c->handle),
        [](uv_handle_t* handle, size_t, uv_buf_t* buf) {
          auto* c = static_cast<Connection*>(handle->data);
          auto [where, want] = c->reader.want();
          if (want >= kDirectReadBytes) {
            c->stagingInUse = false;
            *buf = uv_buf_init(where, static_cast<unsigned>(std::min<size_t>(want, 1u << 30)));
          } else {
            c->stagingInUse = true;
            *buf = uv_buf_init(c->staging.data(), static_cast<unsigned>(c->staging.size()));
          }
        },
        [](uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
          auto* c = static_cast<Connection*>(stream->data);
          c->impl->markBusy();
          if (nread == 0) return;
          if (nread < 0) {
            c->impl->drop(c, nread == UV_EOF ? "the peer closed the connection"
                                             : "read failed: " + uvError(static_cast<int>(nread)));
            return;
          }
          try {
            if (!c->stagingInUse) {
              if (auto frame = c->reader.filled(static_cast<size_t>(nread))) {
                c->impl->deliver(c, std::move(*frame));
              }
              return;
            }
            size_t offset = 0;
            auto left = static_cast<size_t>(nread);
            while (left > 0 && !c->isClosing()) {
              auto [where, want] = c->reader.want();
              size_t n = std::min(want, left);
              std::memcpy(where, c->staging.data() + offset, n);
              offset += n;
              left -= n;
              if (auto frame = c->reader.filled(n)) c->impl->deliver(c, std::move(*frame));
            }
          } catch (const Refused& e) {
            C10D_LOG(Warning, "rpc worker ", c->impl->self, ": ", e.what());
            c->impl->refuse(c, e.what());
          } catch (const std::exception& e) {
            C10D_LOG(Warning, "rpc worker ", c->impl->self, ": dropping the connection from ",
                     c->peer >= 0 ? "worker " + std::to_string(c->peer) : std::string("a peer"),
                     ": ", e.what());
            c->impl->drop(c, std::string("malformed frame: ") + e.what());
          }
        });
  }

  void deliver(Connection* c, Frame frame) {
    if (c->stage == Connection::Stage::Open) {
      onFrame(c->peer, std::move(frame));
      return;
    }
    C10D_CHECK(frame.kind == FrameKind::Hello, InvalidArgument, "rpc: a frame of kind ",
               int(frame.kind), " arrived before the connection's Hello");
    switch (c->stage) {
      case Connection::Stage::AwaitHello:
        acceptHello(c, frame);
        break;
      case Connection::Stage::AwaitProof:
        acceptProof(c, frame);
        break;
      case Connection::Stage::AwaitReply:
        acceptReply(c, frame);
        break;
      case Connection::Stage::Open:
        break;
    }
  }

  // Acceptor: a connector introduces itself, with its nonce when it has a token.
  void acceptHello(Connection* c, const Frame& hello) {
    C10D_CHECK(hello.id < (uint64_t{1} << 31) && hello.id != static_cast<uint64_t>(self),
               InvalidArgument, "rpc: a Hello names worker ", hello.id);
    c->claimed = static_cast<int>(hello.id);
    {
      std::lock_guard<std::mutex> guard(mutex);
      C10D_CHECK(peers.count(c->claimed) == 0, InvalidArgument,
                 "rpc: a second connection claims to be worker ", c->claimed);
    }
    Frame reply;
    reply.kind = FrameKind::Hello;
    reply.id = static_cast<uint64_t>(self);
    if (token) {
      // Answered even without the connector's nonce, so that it learns a token is needed.
      if (hello.payload.size() == auth::kNonceBytes) {
        std::memcpy(c->theirNonce.data(), hello.payload.data(), auth::kNonceBytes);
      }
      c->ourNonce = auth::randomNonce();
      auth::Proof proof = auth::prove(*token, kAcceptorRole, c->theirNonce, c->ourNonce);
      reply.payload.append(bytesOf(c->ourNonce));
      reply.payload.append(bytesOf(proof));
      c->stage = Connection::Stage::AwaitProof;
    }
    sendOnLoop(c, reply);
    if (!token) open(c, c->claimed);
  }

  // Acceptor: the connector's proof that it holds the token.
  void acceptProof(Connection* c, const Frame& hello) {
    auth::Proof expected = auth::prove(*token, kConnectorRole, c->ourNonce, c->theirNonce);
    if (hello.payload.size() != auth::kProofBytes ||
        !auth::matches(expected, reinterpret_cast<const uint8_t*>(hello.payload.data()))) {
      c->stage = Connection::Stage::AwaitHello;  // refused: no second log line when it closes
      C10D_THROW(Refused, "refused a connection claiming to be worker ", c->claimed,
                 ": wrong authentication token; none of its frames were read");
    }
    open(c, c->claimed);
  }

  // Connector: the acceptor's reply, with its nonce and proof when it has a token.
  void acceptReply(Connection* c, const Frame& hello) {
    C10D_CHECK(hello.id == static_cast<uint64_t>(c->peer), Refused, "worker ", c->peer,
               "'s address answered as worker ", hello.id);
    const bool challenged = !hello.payload.empty();
    if (challenged && !token) {
      C10D_THROW(Refused, "worker ", c->peer, " requires authentication: set C10D_AUTH_TOKEN (or ",
                 "C10D_AUTH_TOKEN_FILE) to the job's token");
    }
    if (!challenged && token) {
      C10D_THROW(Refused, "worker ", c->peer, " does not authenticate but this worker has ",
                 "C10D_AUTH_TOKEN set; refusing to talk to it. Give every worker the same token");
    }
    if (token) {
      C10D_CHECK(hello.payload.size() == auth::kNonceBytes + auth::kProofBytes, Refused, "worker ",
                 c->peer, " sent a malformed authentication challenge");
      std::memcpy(c->theirNonce.data(), hello.payload.data(), auth::kNonceBytes);
      // Ours goes first, so that a wrong token is refused and logged on both sides.
      Frame proof;
      proof.kind = FrameKind::Hello;
      proof.id = static_cast<uint64_t>(self);
      proof.payload = bytesOf(auth::prove(*token, kConnectorRole, c->theirNonce, c->ourNonce));
      sendOnLoop(c, proof);
      auth::Proof expected = auth::prove(*token, kAcceptorRole, c->ourNonce, c->theirNonce);
      C10D_CHECK(auth::matches(expected, reinterpret_cast<const uint8_t*>(hello.payload.data() +
                                                                          auth::kNonceBytes)),
                 Refused, "worker ", c->peer,
                 " proved a different authentication token (C10D_AUTH_TOKEN differs)");
    }
    open(c, c->peer);
    if (auto pending = std::exchange(c->pendingConnect, nullptr)) {
      pending->set_value(ConnectResult{});
    }
  }

  void open(Connection* c, int peer) {
    c->stage = Connection::Stage::Open;
    registerPeer(c, peer);
  }

  // Drops a connection whose introduction failed; a connector waiting on it fails at once.
  void refuse(Connection* c, const std::string& why) {
    if (auto pending = std::exchange(c->pendingConnect, nullptr)) {
      pending->set_value(ConnectResult{0, why});
    }
    drop(c, why);
  }

  // On the loop thread: a frame of the introduction, queued before anything a sender writes.
  void sendOnLoop(Connection* c, const Frame& frame) {
    {
      std::lock_guard<std::mutex> guard(c->writeMutex);
      ++c->queuedWrites;
    }
    std::vector<Outgoing> frames;
    frames.push_back(Outgoing{encodeHead(frame), {}, 0});
    write(c, std::move(frames));
  }

  // On the loop thread.
  void markBusy() {
    if (loopMarkedBusy) return;
    std::lock_guard<std::mutex> guard(mutex);
    loopBusy = true;
    loopMarkedBusy = true;
  }

  // A sender's connection got its first queued frame: the loop flushes it after its current
  // callbacks when it is running them, else a posted command wakes it to.
  void scheduleFlush(const std::shared_ptr<Connection>& c) {
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (loopBusy) {
        dirty.push_back(c);
        return;
      }
    }
    post([this, c] { flush(c.get()); });
  }

  // On the loop thread, after its callbacks: writes what senders queued meanwhile.
  void flushDirty() {
    std::vector<std::shared_ptr<Connection>> ready;
    {
      std::lock_guard<std::mutex> guard(mutex);
      loopBusy = false;
      loopMarkedBusy = false;
      ready.swap(dirty);
    }
    for (const auto& c : ready) flush(c.get());
  }

  // On the loop thread: writes the connection's outbox, every frame in it with one write.
  void flush(Connection* c) {
    std::vector<Outgoing> frames;
    {
      std::lock_guard<std::mutex> guard(c->writeMutex);
      frames.swap(c->outbox);
    }
    write(c, std::move(frames));
  }

  // A write counted in queuedWrites is done (written, failed or dropped).
  static void writeDone(Connection* c) {
    std::lock_guard<std::mutex> guard(c->writeMutex);
    --c->queuedWrites;
  }

  // On the loop thread: writes what is left of frames, in order, with one libuv write. Whoever
  // queued them counted the write in queuedWrites; completing it uncounts it.
  void write(Connection* c, std::vector<Outgoing> frames) {
    if (c->isClosing()) {
      writeDone(c);
      return;
    }
    auto* w = new Write();
    w->frames = std::move(frames);
    w->connection = c;
    std::vector<uv_buf_t> bufs;
    for (Outgoing& frame : w->frames) {
      size_t skip = frame.skip;
      auto add = [&](char* data, size_t size) {
        if (skip >= size) {
          skip -= size;
          return;
        }
        bufs.push_back(uv_buf_init(data + skip, static_cast<unsigned>(size - skip)));
        skip = 0;
      };
      add(frame.head.data(), frame.head.size());
      for (const Tensor& t : frame.tensors) add(static_cast<char*>(t.data()), t.nbytes());
    }
    if (bufs.empty()) {
      delete w;
      writeDone(c);
      return;
    }
    int rc = uv_write(&w->request, reinterpret_cast<uv_stream_t*>(&c->handle), bufs.data(),
                      static_cast<unsigned>(bufs.size()), [](uv_write_t* request, int status) {
                        auto* w = reinterpret_cast<Write*>(request);
                        Connection* c = w->connection;
                        delete w;
                        writeDone(c);
                        if (status < 0 && status != UV_ECANCELED) {
                          c->impl->drop(c, "write failed: " + uvError(status));
                        }
                      });
    if (rc < 0) {
      delete w;
      writeDone(c);
      drop(c, "write failed: " + uvError(rc));
    }
  }
};

Transport::Transport(int self, std::optional<std::string> token, OnFrame onFrame,
                     OnPeerLost onPeerLost)
    : impl_(std::make_shared<Impl>(self, std::move(token), std::move(onFrame),
                                   std::move(onPeerLost))) {
  Impl& impl = *impl_;
  uv_check_init(impl.loopThread.loop(), &impl.afterCallbacks);
  impl.afterCallbacks.data = &impl;
  uv_check_start(&impl.afterCallbacks,
                 [](uv_check_t* check) { static_cast<Impl*>(check->data)->flushDirty(); });
  impl.loopThread.start();
}

Transport::~Transport() {
  close();
}

std::string Transport::listen(const std::string& host) {
  return impl_->onLoop([this, host]() -> std::string {
    Impl& impl = *impl_;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(host.c_str(), "0", &hints, &found);
    C10D_CHECK(rc == 0 && found != nullptr, InvalidArgument, "rpc: cannot resolve '", host,
               "': ", gai_strerror(rc));
    uv_tcp_init(impl.loopThread.loop(), &impl.listener);
    impl.listener.data = &impl;
    rc = uv_tcp_bind(&impl.listener, found->ai_addr, 0);
    freeaddrinfo(found);
    if (rc == 0) {
      rc = uv_listen(reinterpret_cast<uv_stream_t*>(&impl.listener), 128,
                     [](uv_stream_t* server, int status) {
                       auto* impl = static_cast<Impl*>(server->data);
                       if (status < 0) return;
                       Impl::Connection* c = impl->newConnection();
                       if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&c->handle)) != 0) {
                         impl->drop(c, "accept failed");
                         return;
                       }
                       impl->startReading(c);
                     });
    }
    impl.listening = true;
    C10D_CHECK(rc == 0, BackendError, "rpc: cannot listen on ", host, ": ", uvError(rc));
    sockaddr_storage bound{};
    int length = sizeof(bound);
    uv_tcp_getsockname(&impl.listener, reinterpret_cast<sockaddr*>(&bound), &length);
    char text[INET6_ADDRSTRLEN] = {};
    int port = 0;
    if (bound.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&bound);
      uv_ip6_name(a, text, sizeof(text));
      port = ntohs(a->sin6_port);
      return "[" + std::string(text) + "]:" + std::to_string(port);
    }
    auto* a = reinterpret_cast<sockaddr_in*>(&bound);
    uv_ip4_name(a, text, sizeof(text));
    port = ntohs(a->sin_port);
    return std::string(text) + ":" + std::to_string(port);
  });
}

void Transport::connect(int peer, const std::string& address,
                        std::chrono::steady_clock::time_point deadline) {
  auto [host, port] = splitAddress(address);
  std::string lastError;
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
    if (rc == 0 && found != nullptr) {
      sockaddr_storage target{};
      std::memcpy(&target, found->ai_addr, found->ai_addrlen);
      freeaddrinfo(found);
      auto result = std::make_shared<std::promise<ConnectResult>>();
      std::future<ConnectResult> done = result->get_future();
      impl_->post([impl = impl_.get(), target, result, peer] {
        Impl::Connection* c = impl->newConnection();
        struct Connect {
          uv_connect_t request;
          Impl::Connection* connection;
          std::shared_ptr<std::promise<ConnectResult>> result;
          int peer;
        };
        auto* request = new Connect{{}, c, result, peer};
        int rc = uv_tcp_connect(&request->request, &c->handle,
                                reinterpret_cast<const sockaddr*>(&target),
                                [](uv_connect_t* r, int status) {
                                  auto* request = reinterpret_cast<Connect*>(r);
                                  Impl::Connection* c = request->connection;
                                  if (status == 0) {
                                    // Answered by the acceptor's Hello (acceptReply), or failed by
                                    // drop().
                                    c->peer = request->peer;
                                    c->stage = Impl::Connection::Stage::AwaitReply;
                                    c->pendingConnect = request->result;
                                    Frame hello;
                                    hello.kind = FrameKind::Hello;
                                    hello.id = static_cast<uint64_t>(c->impl->self);
                                    if (c->impl->token) {
                                      c->ourNonce = auth::randomNonce();
                                      hello.payload.assign(bytesOf(c->ourNonce));
                                    }
                                    c->impl->sendOnLoop(c, hello);
                                    c->impl->startReading(c);
                                  } else {
                                    c->impl->drop(c, "connect failed");
                                    request->result->set_value(ConnectResult{status, {}});
                                  }
                                  delete request;
                                });
        if (rc != 0) {
          impl->drop(c, "connect failed");
          result->set_value(ConnectResult{rc, {}});
          delete request;
        }
      });
      ConnectResult outcome = done.get();
      C10D_CHECK(outcome.refused.empty(), RemoteError, "rpc worker ", impl_->self,
                 ": connecting to worker ", peer, " at ", address, ": ", outcome.refused);
      rc = outcome.rc;
      if (rc == 0) return;
      lastError = uvError(rc);
    } else {
      lastError = gai_strerror(rc);
    }
    C10D_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError, "rpc worker ",
               impl_->self, ": could not connect to worker ", peer, " at ", address, ": ",
               lastError);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Transport::waitForPeers(int worldSize, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  auto allUp = [&] { return static_cast<int>(impl_->peers.size()) >= worldSize - 1; };
  if (!impl_->changed.wait_until(lock, deadline, allUp)) {
    std::string missing;
    for (int p = 0; p < worldSize; ++p) {
      if (p != impl_->self && impl_->peers.count(p) == 0) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      }
    }
    C10D_THROW(TimeoutError, "rpc worker ", impl_->self, ": no connection from worker(s) ", missing,
               " before the timeout");
  }
}

std::optional<std::string> Transport::lostReason(int peer) const {
  std::lock_guard<std::mutex> guard(impl_->mutex);
  auto it = impl_->lost.find(peer);
  if (it == impl_->lost.end()) return std::nullopt;
  return it->second;
}

std::map<int, std::string> Transport::lostPeers() const {
  std::lock_guard<std::mutex> guard(impl_->mutex);
  return impl_->lost;
}

void Transport::send(int peer, Frame frame, bool moreSoon) {
  std::string head = encodeHead(frame);
  std::shared_ptr<Impl::Connection> c;
  {
    std::lock_guard<std::mutex> guard(impl_->mutex);
    C10D_CHECK(!impl_->closed, StateError, "rpc transport of worker ", impl_->self, " is closed");
    if (auto gone = impl_->lost.find(peer); gone != impl_->lost.end()) {
      throw PeerLostError(peer, gone->second);
    }
    auto it = impl_->peers.find(peer);
    C10D_CHECK(it != impl_->peers.end(), InvalidArgument, "rpc: no connection to worker ", peer);
    c = it->second;
  }
  size_t frameBytes = head.size();
  for (const Tensor& t : frame.tensors) frameBytes += t.nbytes();
  size_t written = 0;
  {
    std::lock_guard<std::mutex> guard(c->writeMutex);
    if (c->closing) throw PeerLostError(peer, c->closingWhy);
    if (!moreSoon && c->queuedWrites == 0 && frameBytes <= kDirectWriteBytes) {
      // Nothing queued and a small frame: write on this thread, which saves a hand-off to the
      // loop thread (47 instead of 120-135 us per empty call between two processes here).
      // The socket is non-blocking; what does not fit goes to the loop.
      std::vector<iovec> parts;
      parts.reserve(1 + frame.tensors.size());
      parts.push_back({head.data(), head.size()});
      for (const Tensor& t : frame.tensors) {
        if (t.nbytes() != 0) parts.push_back({t.data(), t.nbytes()});
      }
      int count = static_cast<int>(std::min<size_t>(parts.size(), IOV_MAX));
      ssize_t n;
      msghdr message{};
      message.msg_iov = parts.data();
      message.msg_iovlen = static_cast<size_t>(count);
      do {
        // MSG_NOSIGNAL: a peer that has gone must not kill the caller's process with SIGPIPE.
        n = ::sendmsg(c->fd, &message, MSG_NOSIGNAL);
      } while (n < 0 && errno == EINTR);
      if (n > 0) written = static_cast<size_t>(n);
      if (written == frameBytes) return;
      // Full socket buffer or an error: the loop writes the rest (libuv reports errors).
    }
    c->outbox.push_back(Impl::Outgoing{std::move(head), std::move(frame.tensors), written});
    // The first frame in the outbox schedules its flush; later ones join that write.
    if (c->outbox.size() > 1) return;
    ++c->queuedWrites;
  }
  impl_->scheduleFlush(c);
}

void Transport::close() {
  Impl& impl = *impl_;
  try {
    // Two threads may close at once (shutdown and a destructor): loopThread lets one close and
    // join; the other returns once it has. The commands posted before run first.
    impl.loopThread.stop([&impl] {
      {
        std::lock_guard<std::mutex> guard(impl.mutex);
        impl.closed = true;
      }
      // Frames still queued on a connection go with it.
      std::vector<Impl::Connection*> all(impl.connections.begin(), impl.connections.end());
      for (auto* c : all) impl.drop(c, "the transport was closed");
      if (impl.listening) uv_close(reinterpret_cast<uv_handle_t*>(&impl.listener), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&impl.afterCallbacks), nullptr);
    });
  } catch (const std::exception& e) {
    C10D_LOG(Warning, "rpc worker ", impl.self, ": closing the transport: ", e.what());
  }
}

}  // namespace c10d::inline v0::rpc
