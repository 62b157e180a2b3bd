#pragma once

// Private to rpc/transport/: one TCP connection of a Transport, shared by its loop thread and the
// threads that send on it. Transport::Impl (TransportImpl.hpp) drives it: Connection.cpp reads
// and writes its bytes, Handshake.cpp runs its introduction, Transport.cpp makes, registers and
// drops it.

#include <uv.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"
#include "c10d/net/Auth.hpp"
#include "rpc/transport/Transport.hpp"
#include "rpc/transport/Wire.hpp"

namespace c10d::inline v0::rpc::detail {

// Reads of at least this much go straight into their destination (a tensor); smaller wants are
// served from one staging buffer, so a small frame costs one read, not one per part.
inline constexpr size_t kDirectReadBytes = 64 * 1024;

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
  Transport::Impl* impl = nullptr;
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
  // Lending (rpc/transport/Lending.cpp). Under writeMutex: the tensors lent to the peer, by
  // loan, until it says Returned; dropped with the connection.
  std::map<uint64_t, std::vector<Tensor>> loans;
  std::atomic<uint64_t> lastLoan{0};
  // Set when the peer has read our proof from our memory and invited loans.
  std::atomic<bool> lendsToPeer{false};
  // Loop thread only: the challenge sent in our Probe; the peer's pid once its Proof showed the
  // challenge at the address it named (0 until then: a frame that lends is refused).
  auth::Nonce challenge{};
  long peerPid = 0;
  // The peer's challenge, written here for it to read; its address goes in our Proof.
  auth::Nonce proofWord{};
  bool isClosing() {
    std::lock_guard<std::mutex> guard(writeMutex);
    return closing;
  }
};

}  // namespace c10d::inline v0::rpc::detail
