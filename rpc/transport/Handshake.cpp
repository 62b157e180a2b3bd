// Transport::Impl's introduction of a connection: the Hello frames, and with a token the
// challenge-response of c10d/net/Auth.hpp, before any other frame of it is delivered
// (Connection::Stage says the order).

#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "c10d/core/Exception.hpp"
#include "c10d/net/Auth.hpp"
#include "rpc/transport/Connection.hpp"
#include "rpc/transport/TransportImpl.hpp"
#include "rpc/transport/Wire.hpp"

namespace c10d::inline v1::rpc {

namespace {

constexpr char kConnectorRole[] = "c10d rpc connector";
constexpr char kAcceptorRole[] = "c10d rpc acceptor";

using detail::bytesOf;
using detail::controlFrame;
using detail::Refused;

static_assert(std::is_same_v<auth::Nonce, auth::Proof>);  // bytesOf takes both

}  // namespace

void Transport::Impl::introduce(Connection* c, int peer,
                                std::shared_ptr<std::promise<ConnectResult>> pending) {
  c->peer = peer;
  c->stage = Connection::Stage::AwaitReply;
  c->pendingConnect = std::move(pending);
  Frame hello = controlFrame(FrameKind::Hello, static_cast<uint64_t>(self));
  if (token) {
    c->ourNonce = auth::randomNonce();
    hello.payload.assign(bytesOf(c->ourNonce));
  }
  sendOnLoop(c, hello);
}

void Transport::Impl::deliver(Connection* c, Frame frame) {
  if (c->stage == Connection::Stage::Open) {
    if (static_cast<uint8_t>(frame.kind) >= static_cast<uint8_t>(FrameKind::Probe)) {
      onLendingFrame(c, frame);
    } else if (c->framesAtCopier > 0 || (frame.loan != 0 && !copyOnLoop(c, frame))) {
      queueForCopier(c, std::move(frame));
    } else if (frame.loan == 0 || takeLoanOnLoop(c, frame)) {
      onFrame(c->peer, std::move(frame));
    }
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

void Transport::Impl::acceptHello(Connection* c, const Frame& hello) {
  C10D_CHECK(hello.id < static_cast<uint64_t>(worldSize) && hello.id != static_cast<uint64_t>(self),
             InvalidArgument, "rpc: a Hello names worker ", hello.id, " (workers are 0 to ",
             worldSize - 1, "; this is ", self, ")");
  c->claimed = static_cast<int>(hello.id);
  {
    std::lock_guard<std::mutex> guard(mutex);
    C10D_CHECK(peers.count(c->claimed) == 0, InvalidArgument,
               "rpc: a second connection claims to be worker ", c->claimed);
  }
  Frame reply = controlFrame(FrameKind::Hello, static_cast<uint64_t>(self));
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

void Transport::Impl::acceptProof(Connection* c, const Frame& hello) {
  auth::Proof expected = auth::prove(*token, kConnectorRole, c->ourNonce, c->theirNonce);
  if (hello.payload.size() != auth::kProofBytes ||
      !auth::matches(expected, reinterpret_cast<const uint8_t*>(hello.payload.data()))) {
    c->stage = Connection::Stage::AwaitHello;  // refused: no second log line when it closes
    C10D_THROW(Refused, "refused a connection claiming to be worker ", c->claimed,
               ": wrong authentication token; none of its frames were read");
  }
  open(c, c->claimed);
}

void Transport::Impl::acceptReply(Connection* c, const Frame& hello) {
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
    sendOnLoop(
        c, controlFrame(FrameKind::Hello, static_cast<uint64_t>(self),
                        bytesOf(auth::prove(*token, kConnectorRole, c->theirNonce, c->ourNonce))));
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

void Transport::Impl::open(Connection* c, int peer) {
  c->stage = Connection::Stage::Open;
  registerPeer(c, peer);
  probe(c);
}

void Transport::Impl::refuse(Connection* c, const std::string& why) {
  if (auto pending = std::exchange(c->pendingConnect, nullptr)) {
    pending->set_value(ConnectResult{0, why});
  }
  drop(c, why);
}

}  // namespace c10d::inline v1::rpc
