#pragma once

/// \file
/// TCPStore, the Store of a multi-host job, and TCPStoreServer, the server it connects to.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "store/Store.hpp"

namespace c10d::inline v1 {

class TCPStoreServer;
namespace detail {
class StoreConnection;
}

/// How a TCPStore connects, waits and authenticates: its constructor's options.
struct TCPStoreOptions {
  /// Start a TCPStoreServer inside this process (rank 0 does) before connecting to it.
  bool isServer = false;
  /// With a value: the constructor returns only once this many TCPStore clients (the server's own
  /// included) have connected, or throws TimeoutError saying how many came. Every client of the
  /// job must then pass the same number.
  /// It must be at least 1; a client that expects another number than the first client did
  /// throws InvalidArgument, and so do the clients waiting with it. The three reserved keys
  /// "__c10d_tcpstore_workers_*" it writes then count in numKeys().
  std::optional<int> numWorkers;
  /// Default timeout for blocking calls, and for connecting (retried with backoff until then).
  /// Also how long any other request waits for the server's answer. Must be positive.
  std::chrono::milliseconds timeout = Store::kDefaultTimeout;
  /// Server only: the address to listen on. Empty: every interface (IPv6 and IPv4), so ranks on
  /// other hosts can connect; "127.0.0.1" keeps the store private to this host.
  std::string listenAddress;
  /// Shared secret for the connection's challenge-response (see c10d/net/Auth.hpp), for the client
  /// and the server this object hosts. Unset: C10D_AUTH_TOKEN or C10D_AUTH_TOKEN_FILE, or none.
  /// A client with a token refuses a server without one, and the reverse.
  std::optional<std::string> authToken;
};

/// A client of a TCP key-value server (TCPStoreServer), optionally hosting the server itself.
/// One TCP connection per TCPStore object; requests on it are serialised, so one object may be
/// shared by threads (each call is one round trip; waits happen on the server). Serialised means
/// a call waits for the call ahead of it to be answered: a thread's set on a shared object waits
/// behind another thread's blocking get or wait of a key that is not there yet, up to that call's
/// timeout. Give each thread that blocks on keys an object of its own (a second TCPStore to the
/// same host and port is a second connection to the same keys).
///
/// Construction connects to host:port, retrying with exponential backoff and jitter until
/// options.timeout; throws TimeoutError with the last connection error when it cannot, and
/// StoreError when the peer does not speak this protocol version. Port 0 with isServer picks a
/// free port: read it back from port().
///
/// Errors from calls: see Store. A lost connection fails the call in progress and every later
/// call with StoreError naming the server address; the store does not reconnect by itself.
/// A request that is not blocking waits up to timeout() for the server's answer (a blocking one:
/// its own timeout and 10 s more); one that gets none throws TimeoutError and leaves the
/// connection unusable, so the calls after it throw StoreError. A request over the protocol's
/// frame limit (twice kMaxValueBytes, e.g. a large multiSet) throws InvalidArgument, and a
/// multiGet whose values come to more than that throws StoreError: ask for fewer keys at a time.
class TCPStore : public Store {
 public:
  /// Connects to host:port, after starting the server there first with options.isServer.
  /// \param host The server's host name or address (with isServer, one of this host's).
  /// \param port The server's port; 0 with isServer: any free port (see port()).
  /// \param options How to connect, wait and authenticate.
  /// \throws TimeoutError when it cannot connect within options.timeout, or numWorkers clients
  ///         did not all connect within it.
  /// \throws StoreError when the server cannot listen on the port (isServer), the peer does
  ///         not speak this protocol version, or authentication fails (token refused,
  ///         missing, or set here while the server asks for none).
  /// \throws InvalidArgument when options.timeout is not positive, the token is empty or its
  ///         file unreadable, or the clients disagree about numWorkers.
  TCPStore(std::string host, uint16_t port, TCPStoreOptions options = {});
  ~TCPStore() override;

  /// \return The server's host, as given to the constructor.
  const std::string& host() const { return host_; }
  /// \return The server's port: the one given, or the one picked for port 0 with isServer.
  uint16_t port() const { return port_; }
  /// The server this object hosts, or null.
  /// \return That server, owned by this object; nullptr without options.isServer.
  TCPStoreServer* server() const { return server_.get(); }

  using Store::get;
  using Store::multiGet;
  using Store::queuePop;
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t numKeys() override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys,
                              std::chrono::milliseconds timeout) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void append(const std::string& key, const Bytes& value) override;
  void queuePush(const std::string& key, const Bytes& value) override;
  /// \copydoc Store::queuePop(const std::string&,std::chrono::milliseconds)
  ///
  /// A blocking pop waits at the server, as get does.
  Bytes queuePop(const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<Bytes> tryQueuePop(const std::string& key) override;
  int64_t queueLen(const std::string& key) override;

 private:
  void waitForWorkers(int numWorkers);
  /// One QueuePop request; wait 0: answered at once, nullopt for an empty queue.
  std::optional<Bytes> popRequest(const std::string& key, std::chrono::milliseconds wait);

  std::string host_;
  uint16_t port_;
  std::unique_ptr<TCPStoreServer> server_;  ///< declared before connection_: outlives it
  std::mutex mutex_;                        ///< one request in flight on connection_
  std::unique_ptr<detail::StoreConnection> connection_;
};

/// Where a TCPStoreServer listens and how it authenticates its clients.
struct TCPStoreServerOptions {
  std::string listenAddress;  ///< empty: all interfaces, dual-stack IPv6 when available
  uint16_t port = 0;          ///< 0: any free port; see TCPStoreServer::port()
  /// With a token, a client must prove it holds the same one before any request is read; a
  /// wrong or missing proof closes its connection and logs a warning. Unset: C10D_AUTH_TOKEN or
  /// C10D_AUTH_TOKEN_FILE, or no authentication.
  std::optional<std::string> authToken;
};

/// The store's server: one libuv event loop on its own thread holds all keys and serves every
/// client; a client blocked in get/wait is parked on the loop (no thread per client) until its
/// keys appear or its timeout fires. Malformed or oversized input drops only that connection.
/// The wire protocol is described in docs/store-protocol.md.
///
/// Construction binds and listens (backlog at the system maximum) or throws StoreError naming
/// the address and the reason. Destruction (or stop()) closes every connection and joins the
/// loop thread. Thread-safe: port() and the counters may be read from any thread.
class TCPStoreServer {
 public:
  /// Binds, listens and starts the loop thread.
  /// \param options Where to listen and how to authenticate.
  /// \throws StoreError naming the address and the reason when it cannot bind or listen.
  /// \throws InvalidArgument when the token is empty or its file unreadable.
  explicit TCPStoreServer(TCPStoreServerOptions options = {});
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  /// \return The port it listens on: the one picked when options.port was 0.
  uint16_t port() const;
  /// Closes every connection and the listener and joins the loop thread, as the destructor does.
  /// Any thread may call it; only the first call (or the destructor's) does the work, and a
  /// concurrent one returns once that is done.
  void stop();

  /// Connections open now.
  /// \return How many clients are connected.
  int64_t connectionCount() const;
  /// Connections dropped for protocol violations since start.
  /// \return How many connections the server dropped, each with a logged warning: for
  ///         malformed or oversized input, a missing or wrong token, unread replies and the like.
  int64_t droppedConnectionCount() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// The host of the TCPStore under store and the stores that forward to it (Store::forwardsTo:
/// PrefixStore, CountingStore); nullopt for the stores of one host (FileStore, HashStore).
/// \param store The store to look under.
/// \return The host given to that TCPStore's constructor, or nullopt when there is none.
std::optional<std::string> tcpStoreHost(const Store& store);

}  // namespace c10d::inline v1
