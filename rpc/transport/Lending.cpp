// Transport::Impl's lending of tensors between workers on one host: instead of streaming a large
// tensor through TCP loopback, the sender names its address and the receiver copies it straight
// from the sender's memory into its own tensor with one process_vm_readv.
//
// A worker reads a peer's memory only after the peer proved, on this connection, that the process
// it names is its own: right after a connection opens, each side sends Probe (its host identity
// and a fresh random challenge); a peer on the same host writes the challenge into its memory and
// answers Proof (its pid and the challenge's address); the prober reads the challenge back from
// that pid and, when it matches, answers Lend. Only a peer that got Lend lends, and a frame that
// lends to a worker that never invited it is refused as malformed. A liar cannot name another
// process, since it cannot write the challenge there, and with a token none of this starts before
// the connection is authenticated.
//
// A loan is the sender's: it holds the tensors (Connection::loans) until the receiver, having
// copied them, answers Returned(loan), or until the connection is dropped. A copy that fails (the
// sender died, or named memory it does not have) drops the connection with the reason, so calls
// to that worker fail as they do when TCP breaks.

#include <unistd.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/net/Auth.hpp"
#include "c10d/net/SharedMemory.hpp"
#include "rpc/transport/Connection.hpp"
#include "rpc/transport/TransportImpl.hpp"
#include "rpc/transport/Wire.hpp"

namespace c10d::inline v0::rpc {

namespace {

Frame transportFrame(FrameKind kind, uint64_t id, std::string name = {}, std::string payload = {}) {
  Frame frame;
  frame.kind = kind;
  frame.id = id;
  frame.name = std::move(name);
  frame.payload = std::move(payload);
  return frame;
}

std::string_view bytesOf(const auth::Nonce& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

void Transport::Impl::probe(Connection* c) {
  if (host.empty()) return;
  c->challenge = auth::randomNonce();
  writeOrQueue(c->self, c->peer,
               transportFrame(FrameKind::Probe, 0, host, std::string(bytesOf(c->challenge))),
               false);
}

void Transport::Impl::onLendingFrame(Connection* c, const Frame& frame) {
  switch (frame.kind) {
    case FrameKind::Probe: {
      C10D_CHECK(frame.payload.size() == auth::kNonceBytes, InvalidArgument, "rpc: a Probe of ",
                 frame.payload.size(), " bytes");
      // Another host, or lending off here: no Proof, so the peer streams what it sends.
      if (host.empty() || frame.name != host) return;
      std::memcpy(c->proofWord.data(), frame.payload.data(), auth::kNonceBytes);
      const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c->proofWord.data()));
      writeOrQueue(c->self, c->peer,
                   transportFrame(FrameKind::Proof, static_cast<uint64_t>(::getpid()), {},
                                  u64Bytes(address)),
                   false);
      return;
    }
    case FrameKind::Proof: {
      C10D_CHECK(!host.empty() && c->peerPid == 0, InvalidArgument,
                 "rpc: a Proof that no Probe asked for");
      const auto pid = static_cast<long>(frame.id);
      C10D_CHECK(pid > 0 && frame.id < (uint64_t{1} << 31), InvalidArgument,
                 "rpc: a Proof names process ", frame.id);
      // A peer in this very process (agents on threads) proves itself like any other; pointing
      // at our own copy of the challenge does not count.
      const uint64_t address = fromU64Bytes(frame.payload);
      C10D_CHECK(address != reinterpret_cast<uintptr_t>(c->challenge.data()), InvalidArgument,
                 "rpc: a Proof names the prober's own challenge");
      auth::Nonce seen{};
      std::string failed = shm::readProcessMemory(pid, address, seen.data(), seen.size());
      if (failed.empty() && seen != c->challenge) failed = "it does not hold the challenge";
      if (!failed.empty()) {
        C10D_LOG(Info, "rpc worker ", self, ": worker ", c->peer,
                 " is on this host but its memory cannot be read (", failed,
                 "); its tensors come over TCP");
        return;
      }
      c->peerPid = pid;
      C10D_LOG(Info, "rpc worker ", self, ": worker ", c->peer, " (process ", pid,
               ") shares this host; its tensors of ", kLendBytes,
               " bytes or more are read from its memory");
      writeOrQueue(c->self, c->peer, transportFrame(FrameKind::Lend, 0), false);
      return;
    }
    case FrameKind::Lend:
      c->lendsToPeer.store(true, std::memory_order_release);
      return;
    case FrameKind::Returned: {
      std::vector<Tensor> returned;  // freed outside the lock
      {
        std::lock_guard<std::mutex> guard(c->writeMutex);
        auto loan = c->loans.find(frame.id);
        C10D_CHECK(loan != c->loans.end(), InvalidArgument, "rpc: Returned(", frame.id,
                   ") names no loan");
        returned = std::move(loan->second);
        c->loans.erase(loan);
      }
      return;
    }
    default:
      C10D_THROW(InvalidArgument, "rpc: frame kind ", int(frame.kind), " is not the transport's");
  }
}

bool Transport::Impl::takeLoan(Connection* c, Frame& frame) {
  C10D_CHECK(c->peerPid != 0, InvalidArgument, "rpc: worker ", c->peer,
             " lent tensors but was never invited to (no Lend was sent to it)");
  for (const auto& [index, address] : frame.lent) {
    Tensor& t = frame.tensors[index];
    std::string failed = reader.read(c->peerPid, address, t.data(), t.nbytes());
    if (!failed.empty()) {
      drop(c, c10d::detail::concat("copying a lent tensor of ", t.nbytes(), " bytes from worker ",
                                   c->peer, "'s memory failed: ", failed,
                                   shm::processEnded(c->peerPid) ? " (its process ended)" : ""));
      return false;
    }
  }
  writeOrQueue(c->self, c->peer, transportFrame(FrameKind::Returned, frame.loan), false);
  return true;
}

}  // namespace c10d::inline v0::rpc
