// Transport::Impl's lending of tensors between workers on one host: instead of streaming a large
// tensor through TCP loopback, the sender names its address and the receiver copies it straight
// from the sender's memory into its own tensor with one process_vm_readv.
//
// A worker reads a peer's memory only after the peer proved, on this connection, that the process
// it names is its own: right after a connection opens, each side sends Probe (its host identity
// and a fresh random challenge); a peer on the same host writes the challenge and the connection's
// two addresses into its memory and answers Proof (its pid and where it wrote them); the prober
// reads them back from that pid and, when they match (its challenge, this connection seen from
// the other end), answers Lend. Only a peer that got Lend lends, only one that sent a Proof may
// take Lend, and a frame that lends to a worker that never invited it is refused as malformed. A
// liar cannot name another process, since it cannot write the challenge there, nor relay another
// connection's Proof, whose addresses differ; with a token none of this starts before the
// connection is authenticated.
//
// A loan is the sender's: it holds the tensors (Connection::loans) until the receiver, having
// copied them, answers Returned(loan), or until the connection is dropped. The loan's seal says
// whether it still stood when the copy was made. A copy that fails (the sender died, named memory
// it does not have, or ended the loan first) drops the connection with the reason, so calls to
// that worker fail as they do when TCP breaks. Loans of 4 MiB or more are copied on a thread of
// their own (the loan copier), not on the loop: frames of that connection queue behind a loan's
// until it is delivered, the other connections' go on.

#include <netinet/in.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"
#include "c10d/net/Auth.hpp"
#include "c10d/net/SharedMemory.hpp"
#include "rpc/transport/Connection.hpp"
#include "rpc/transport/TransportImpl.hpp"
#include "rpc/transport/Wire.hpp"

namespace c10d::inline v1::rpc {

namespace {

using detail::bytesOf;
using detail::controlFrame;
using detail::ProofWord;

// "host:port" of one end of a connection.
std::string endpoint(const uv_tcp_t* handle, bool peer) {
  sockaddr_storage address{};
  int length = sizeof address;
  auto* at = reinterpret_cast<sockaddr*>(&address);
  const int rc =
      peer ? uv_tcp_getpeername(handle, at, &length) : uv_tcp_getsockname(handle, at, &length);
  if (rc != 0) return "?";
  char host[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(at);
    uv_ip6_name(v6, host, sizeof host);
    return c10d::detail::concat("[", host, "]:", ntohs(v6->sin6_port));
  }
  auto* v4 = reinterpret_cast<sockaddr_in*>(at);
  uv_ip4_name(v4, host, sizeof host);
  return c10d::detail::concat(host, ":", ntohs(v4->sin_port));
}

// The challenge, then "prober's address|prover's address" (proberIsPeer: we are the prover).
ProofWord proofWord(const char* challenge, const uv_tcp_t* handle, bool proberIsPeer) {
  ProofWord word{};
  std::memcpy(word.data(), challenge, auth::kNonceBytes);
  const std::string names = endpoint(handle, proberIsPeer) + "|" + endpoint(handle, !proberIsPeer);
  std::memcpy(word.data() + auth::kNonceBytes, names.data(),
              std::min(names.size(), word.size() - auth::kNonceBytes));
  return word;
}

}  // namespace

void Transport::Impl::probe(Connection* c) {
  if (host.empty()) return;
  c->challenge = auth::randomNonce();
  writeOrQueue(c->self, c->peer, controlFrame(FrameKind::Probe, 0, bytesOf(c->challenge), host),
               false);
}

void Transport::Impl::onLendingFrame(Connection* c, const Frame& frame) {
  switch (frame.kind) {
    case FrameKind::Probe: {
      C10D_CHECK(frame.payload.size() == auth::kNonceBytes, InvalidArgument, "rpc: a Probe of ",
                 frame.payload.size(), " bytes");
      // Another host, or lending off here: no Proof, so the peer streams what it sends.
      if (host.empty() || frame.name != host) return;
      c->proofWord = proofWord(frame.payload.data(), &c->handle, true);
      c->provedOurselves = true;
      const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c->proofWord.data()));
      writeOrQueue(
          c->self, c->peer,
          controlFrame(FrameKind::Proof, static_cast<uint64_t>(::getpid()), u64Bytes(address)),
          false);
      return;
    }
    case FrameKind::Proof: {
      C10D_CHECK(!host.empty() && c->peerPid == 0, InvalidArgument,
                 "rpc: a Proof that no Probe asked for");
      const auto pid = static_cast<long>(frame.id);
      C10D_CHECK(pid > 0 && frame.id < (uint64_t{1} << 31), InvalidArgument,
                 "rpc: a Proof names process ", frame.id);
      // A peer in this very process (agents on threads) proves itself like any other.
      ProofWord seen{};
      std::string failed =
          shm::readProcessMemory(pid, fromU64Bytes(frame.payload), seen.data(), seen.size());
      const ProofWord expected =
          proofWord(reinterpret_cast<const char*>(c->challenge.data()), &c->handle, false);
      if (failed.empty() && seen != expected) {
        failed = "it does not hold the challenge and this connection";
      }
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
      writeOrQueue(c->self, c->peer, controlFrame(FrameKind::Lend, 0), false);
      return;
    }
    case FrameKind::Lend:
      C10D_CHECK(c->provedOurselves, InvalidArgument,
                 "rpc: a Lend for a Proof this worker never sent");
      c->lendsToPeer.store(true, std::memory_order_release);
      return;
    case FrameKind::Returned: {
      std::optional<detail::Loan> returned;  // ended outside the lock
      {
        std::lock_guard<std::mutex> guard(c->writeMutex);
        auto loan = c->loans.find(frame.id);
        C10D_CHECK(loan != c->loans.end(), InvalidArgument, "rpc: Returned(", frame.id,
                   ") names no loan");
        returned.emplace(std::move(loan->second));
        c->loans.erase(loan);
      }
      return;
    }
    default:
      C10D_THROW(InvalidArgument, "rpc: frame kind ", int(frame.kind), " is not the transport's");
  }
}

bool Transport::Impl::copyOnLoop(Connection* c, const Frame& frame) const {
  C10D_CHECK(c->peerPid != 0, InvalidArgument, "rpc: worker ", c->peer,
             " lent tensors but was never invited to (no Lend was sent to it)");
  size_t bytes = 0;
  for (const auto& [index, address] : frame.lent) bytes += frame.tensors.at(index).nbytes();
  return bytes < kCopyOffLoopBytes;
}

bool Transport::Impl::takeLoanOnLoop(Connection* c, Frame& frame) {
  std::string failed = takeLoan(loopReader, c->peerPid, c->peer, frame);
  if (!failed.empty()) {
    drop(c, failed);
    return false;
  }
  writeOrQueue(c->self, c->peer, controlFrame(FrameKind::Returned, frame.loan), false);
  return true;
}

void Transport::Impl::queueForCopier(Connection* c, Frame frame) {
  if (frame.loan != 0) copyOnLoop(c, frame);  // refuses a loan from a peer never invited
  ++c->framesAtCopier;
  std::lock_guard<std::mutex> guard(copyMutex);
  if (copyStopping) return;  // closing: the frame goes with the transport
  if (!copier.joinable()) copier = std::thread([this] { copyLoans(); });
  copyQueue.emplace_back(c->self, std::move(frame));
  copyChanged.notify_one();
}

void Transport::Impl::stopCopier() {
  {
    std::lock_guard<std::mutex> guard(copyMutex);
    copyStopping = true;
    copyQueue.clear();
  }
  copyChanged.notify_all();
  std::lock_guard<std::mutex> joining(copierJoin);
  if (copier.joinable()) copier.join();
}

void Transport::Impl::copyLoans() {
  c10d::detail::nameThisThread("c10d-rpc-copy");
  c10d::detail::blockSigpipeInThisThread();
  std::unique_lock<std::mutex> lock(copyMutex);
  for (;;) {
    copyChanged.wait(lock, [&] { return copyStopping || !copyQueue.empty(); });
    if (copyStopping) return;
    auto [c, frame] = std::move(copyQueue.front());
    copyQueue.pop_front();
    lock.unlock();
    // peerPid is the loop's, but set once, before the Lend that let the peer lend.
    std::string failed =
        frame.loan != 0 ? takeLoan(reader, c->peerPid, c->peer, frame) : std::string();
    try {
      post(
          [this, c = std::move(c), frame = std::move(frame), failed = std::move(failed)]() mutable {
            --c->framesAtCopier;
            if (c->isClosing()) return;  // dropped meanwhile: its calls failed with it
            if (!failed.empty()) {
              drop(c.get(), failed);
              return;
            }
            try {
              if (frame.loan != 0) {
                writeOrQueue(c, c->peer, controlFrame(FrameKind::Returned, frame.loan), false);
              }
              onFrame(c->peer, std::move(frame));
            } catch (const std::exception& e) {
              drop(c.get(), c10d::detail::concat("delivering a frame of worker ", c->peer,
                                                 " failed: ", e.what()));
            }
          });
    } catch (const std::exception&) {
      // The transport is closing: its loop takes no more commands, and the frame goes with it.
    }
    lock.lock();
  }
}

std::string Transport::Impl::takeLoan(shm::SplitReader& reader, long pid, int peer, Frame& frame) {
  for (const auto& [index, address] : frame.lent) {
    Tensor& t = frame.tensors[index];
    std::string failed = reader.read(pid, address, t.data(), t.nbytes());
    if (!failed.empty()) {
      return c10d::detail::concat("copying a lent tensor of ", t.nbytes(), " bytes from worker ",
                                  peer, "'s memory failed: ", failed,
                                  shm::processEnded(pid) ? " (its process ended)" : "");
    }
  }
  // Read after the tensors: the sender clears it before it lets them go, so a seal that still
  // holds the loan's id means the copies were made while the loan stood.
  uint64_t seal = 0;
  std::string failed = shm::readProcessMemory(pid, frame.seal, &seal, sizeof seal);
  if (failed.empty() && seal != frame.loan) {
    failed =
        "the loan had ended (the worker let go of the tensors, as when it drops the "
        "connection)";
  }
  if (!failed.empty()) {
    return c10d::detail::concat("copying the tensors worker ", peer, " lent failed: ", failed);
  }
  return "";
}

}  // namespace c10d::inline v1::rpc
