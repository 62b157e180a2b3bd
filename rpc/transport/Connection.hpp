#pragma once

// Private to rpc/transport/: one TCP connection of a Transport, shared by its loop thread and the
// threads that send on it. Transport::Impl (TransportImpl.hpp) drives it: Connection.cpp reads
// and writes its bytes, Handshake.cpp runs its introduction, Transport.cpp makes, registers and
// drops it.

#include <uv.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"
#include "c10d/net/Auth.hpp"
#include "rpc/transport/Transport.hpp"
#include "rpc/transport/Wire.hpp"

namespace c10d::inline v1::rpc::detail {

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

// A frame of the transport's own (Hello, and Lending.cpp's), which carries no tensors.
inline Frame controlFrame(FrameKind kind, uint64_t id, std::string_view payload = {},
                          std::string name = {}) {
  Frame frame;
  frame.kind = kind;
  frame.id = id;
  frame.name = std::move(name);
  frame.payload = payload;
  return frame;
}

// A nonce (or an auth::Proof, the same type) as frame payload bytes.
inline std::string_view bytesOf(const auth::Nonce& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Tensors lent to the peer under one loan, and the loan's seal: a word in this process that
// holds the loan's id while the loan stands and is cleared before the tensors are let go. The
// receiver reads it back after its copy, so a copy made after the loan ended (the connection
// dropped with the frame in flight, and the memory reused) is refused instead of delivered.
struct Loan {
  std::vector<Tensor> tensors;
  std::unique_ptr<std::atomic<uint64_t>> seal;
  Loan() = default;
  Loan(Loan&&) = default;
  Loan& operator=(Loan&&) = delete;
  ~Loan() {
    if (seal) seal->store(0, std::memory_order_seq_cst);
  }
};

// What a prover writes where the prober reads it: the prober's challenge, then the connection as
// "prober's address|prover's address", so that a Proof relayed from another connection (of this
// worker or another) does not match.
inline constexpr size_t kProofWordBytes = auth::kNonceBytes + 128;
using ProofWord = std::array<char, kProofWordBytes>;

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
  // Lending (rpc/transport/Lending.cpp). Under writeMutex: the loans to the peer, by id, until
  // it says Returned; dropped with the connection.
  std::map<uint64_t, Loan> loans;
  // Loan ids are a count XORed with this connection's random key: unique, and not a value a
  // reused seal word is likely to hold.
  std::atomic<uint64_t> lastLoan{0};
  const uint64_t loanKey = [] {
    auth::Nonce random = auth::randomNonce();
    uint64_t key;
    std::memcpy(&key, random.data(), sizeof key);
    return key;
  }();
  // Set when the peer has read our Proof from our memory and invited loans.
  std::atomic<bool> lendsToPeer{false};
  // Loop thread only: the challenge sent in our Probe; the peer's pid once its Proof showed the
  // challenge and this connection at the address it named (0 until then: a frame that lends is
  // refused); whether we sent a Proof (a Lend without one is refused).
  auth::Nonce challenge{};
  long peerPid = 0;
  bool provedOurselves = false;
  // The peer's challenge and this connection, written here for it to read; its address goes in
  // our Proof.
  ProofWord proofWord{};
  // Loop thread only: frames of this connection handed to the loan copier and not yet delivered
  // back. While there are any, the connection's other frames queue behind them, so frames are
  // delivered in the order they arrived.
  int framesAtCopier = 0;
  bool isClosing() {
    std::lock_guard<std::mutex> guard(writeMutex);
    return closing;
  }
};

}  // namespace c10d::inline v1::rpc::detail
