#pragma once

/// \file
/// PyTorchTCPStore: a Store that is a client of PyTorch's TCPStore server.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/Store.hpp"

namespace c10d::inline v1 {

namespace detail {
class ClientSocket;
}

/// A client of PyTorch's TCPStore server: the store torchrun's agent hosts for its workers (see
/// connectStore in c10d/Init.hpp), or one a PyTorch program hosts. Keys are sent as PyTorch's
/// client sends them ("/" + key), so torch.distributed clients of the same server see the same
/// keys and values; counters are decimal text, as in every store of this library.
///
/// Two wire protocols exist (`docs/store-protocol.md#pytorchs-tcpstore`): v1, spoken by PyTorch
/// 1.13 and 2.0 (tested here against Debian's 1.13), and v2, PyTorch 2.2 and later (a VALIDATE
/// message first, every op's code one higher; written from PyTorch's source, and tested only
/// against this repository's model of it). "auto" asks the server with a probe that v1 answers
/// and v2 does not, on a connection of its own.
///
/// Over v1, which lacks them, multiGet and multiSet are several requests (not atomic) and append
/// is a compare-and-set loop. A blocking call that times out closes the connection, because a v1
/// server would still answer the abandoned wait later; the next call reconnects.
///
/// Errors: as Store's; StoreError names the server when it closes the connection, which a PyTorch
/// server does for a request it cannot serve. Threading: calls are serialised on one connection.
class PyTorchTCPStore : public Store {
 public:
  /// The wire protocol (see PyTorchTCPStore). Auto asks the constructor to detect it: V1 or V2
  /// by C10D_TORCH_STORE_PROTOCOL ("v1" or "v2"), else by probePyTorchStoreProtocol.
  enum class Protocol { Auto, /**< detect */ V1, /**< PyTorch 1.13-2.1 */ V2 /**< PyTorch 2.2+ */ };

  /// Connects (retrying until timeout). protocol Auto: C10D_TORCH_STORE_PROTOCOL, else the probe.
  /// A process probes each host:port once and reuses the answer for later stores.
  /// \param host The server's host name or address.
  /// \param port The server's port.
  /// \param timeout The default timeout of blocking calls, and how long connecting and any
  ///        other request may take; must be positive.
  /// \param protocol The server's protocol, or Auto to find it out.
  /// \throws TimeoutError when it cannot connect within timeout.
  /// \throws InvalidArgument when timeout is not positive.
  PyTorchTCPStore(std::string host, uint16_t port,
                  std::chrono::milliseconds timeout = Store::kDefaultTimeout,
                  Protocol protocol = Protocol::Auto);
  ~PyTorchTCPStore() override;

  /// \return The protocol in use: V1 or V2, once connected (never Auto).
  Protocol protocol() const { return protocol_; }

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  /// Every key the server holds, PyTorch's own ("init/", the agent's) included.
  /// \return That number.
  int64_t numKeys() override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys,
                              std::chrono::milliseconds timeout) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void append(const std::string& key, const Bytes& value) override;
  /// \copydoc Store::queuePush
  ///
  /// Queues need PyTorch 2.6's server or ours (protocol v2); over v1 they throw StoreError. A
  /// blocking pop waits for the queue's key as PyTorch's client does, then pops, and waits again
  /// when another client popped first.
  void queuePush(const std::string& key, const Bytes& value) override;
  /// \copydoc Store::queuePop(const std::string&,std::chrono::milliseconds)
  ///
  /// Over protocol v1: StoreError (see queuePush). It waits for the queue's key as PyTorch's
  /// client does, then pops, and waits again when another client popped first.
  Bytes queuePop(const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<Bytes> tryQueuePop(const std::string& key) override;
  int64_t queueLen(const std::string& key) override;
  using Store::get;
  using Store::multiGet;
  using Store::queuePop;
  using Store::wait;

 private:
  class Request;
  detail::ClientSocket& connection();
  void waitLocked(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                  const char* op);
  Bytes getLocked(const std::string& key);
  std::optional<Bytes> popLocked(const std::string& key);
  /// StoreError naming op and key over protocol v1, which has no queues.
  void requireQueues(const char* op, const std::string& key) const;
  /// After a request PyTorch's protocol does not answer (SET, APPEND, MULTI_SET): a CHECK of key
  /// on the same connection, whose answer means the server has applied what came before it, so
  /// that the write is visible to other clients once the call returns, as the Store contract
  /// says (CI saw another connection read a value without a just-returned append).
  void confirmLocked(const std::string& key, std::chrono::steady_clock::time_point deadline);
  /// The keys of a timed-out wait that are still missing (all of them when none is, or the server
  /// cannot say), asked on a new connection.
  std::vector<std::string> missingLocked(const std::vector<std::string>& keys);

  std::string host_;
  uint16_t port_;
  Protocol protocol_;
  std::mutex mutex_;
  std::unique_ptr<detail::ClientSocket> socket_;  ///< null after a timeout: reconnect
};

/// The protocol a PyTorch TCPStore server at host:port speaks, found by the probe (a request for
/// the key count, which v1 answers and v2 leaves unanswered or refuses), within timeout.
/// \param host The server's host name or address.
/// \param port The server's port.
/// \param timeout How long connecting may take; the probe then waits for its answer up to
///        timeout or 2 s, whichever is less.
/// \return V1 when the server answered the probe, else V2.
/// \throws TimeoutError when it cannot connect within timeout.
PyTorchTCPStore::Protocol probePyTorchStoreProtocol(const std::string& host, uint16_t port,
                                                    std::chrono::milliseconds timeout);

}  // namespace c10d::inline v1
