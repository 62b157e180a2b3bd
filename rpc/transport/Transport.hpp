#pragma once

// Private to rpc/: TCP connections between workers on one libuv loop thread. One connection per
// pair of workers (the lower id connects to the higher), each starting with a Hello frame that
// names the sender. Frames are written with scatter-gather writes: the encoded head, then each
// tensor's memory, with no copy.
//
// Threading: send() and close() may be called from any thread; the callbacks run on the loop
// thread and must not block.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "c10d/core/Exception.hpp"
#include "rpc/transport/Wire.hpp"

namespace c10d::inline v1::rpc {

// send() to a peer whose connection is lost, or being dropped right now: the same error either
// way, so a caller can fail the call as it fails those in flight at the loss.
class PeerLostError : public RemoteError {
 public:
  PeerLostError(int peer, std::string why)
      : RemoteError(
            c10d::detail::concat("rpc: the connection to worker ", peer, " is lost (", why, ")")),
        why_(std::move(why)) {}
  const std::string& why() const { return why_; }

 private:
  std::string why_;
};

class Transport {
 public:
  using OnFrame = std::function<void(int peer, Frame frame)>;
  // A connection to peer is gone (closed, reset, or it sent a malformed frame).
  using OnPeerLost = std::function<void(int peer, const std::string& why)>;

  // With a token, every connection must pass the challenge-response of c10d/net/Auth.hpp (see
  // Connection::Stage in rpc/transport/Connection.hpp) before a frame of it is delivered. With
  // sharedMemory, large tensors between workers that prove they share the host and can read each
  // other's memory are lent instead of streamed (rpc/transport/Lending.cpp).
  // Workers are [0, worldSize); a Hello naming another id is refused.
  Transport(int self, int worldSize, std::optional<std::string> token, bool sharedMemory,
            OnFrame onFrame, OnPeerLost onPeerLost);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Starts listening on host (port chosen by the system); returns "host:port".
  std::string listen(const std::string& host);
  // Connects to peer at address and introduces this worker (authenticating with the token);
  // retries until deadline. Blocks until the peer has answered. Throws TimeoutError, or
  // RemoteError at once when the introduction fails (authentication either way, or another
  // worker answering).
  void connect(int peer, const std::string& address,
               std::chrono::steady_clock::time_point deadline);
  // Blocks until a connection to each other worker is up (made or accepted). Throws
  // TimeoutError naming the missing peers.
  void waitForPeers(std::chrono::steady_clock::time_point deadline);
  // Queues frame to peer. Throws PeerLostError for a lost peer, StateError once closed,
  // InvalidArgument for an unknown peer or a frame that cannot be encoded. The tensors stay
  // referenced until written. A small frame is written on the calling thread when nothing is queued
  // before it; otherwise, or when the caller says more frames follow soon (moreSoon), it joins the
  // loop thread's next write, which carries every frame queued by then in one system call.
  void send(int peer, Frame frame, bool moreSoon = false);
  // Closes every connection and stops the loop thread. Idempotent.
  void close();
  // Every peer whose connection was lost, and why.
  std::map<int, std::string> lostPeers() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace c10d::inline v1::rpc
