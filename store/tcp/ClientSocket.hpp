#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace c10d::inline v1::detail {

// A TCP client connection driven with poll(), so every send and receive has a deadline: what the
// store clients (ours, and PyTorch's protocol) share. Connecting retries refused or unreachable
// attempts with exponential backoff and jitter. Not thread-safe: its owner serialises calls.
//
// Errors: StoreError for a lost, refused or failed connection (after which it is broken), and
// TimeoutError when the peer does not answer by the deadline (also broken: a late answer would
// be misread). Every message names `peer` ("TCPStore server 10.0.0.1:29500").
class ClientSocket {
 public:
  using Clock = std::chrono::steady_clock;

  // peer: what the other side is, for messages ("TCPStore server"); hint: what to check when no
  // connection can be made within timeout (appended to the TimeoutError).
  ClientSocket(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
               std::string peer, const std::string& hint);
  ~ClientSocket();
  ClientSocket(const ClientSocket&) = delete;
  ClientSocket& operator=(const ClientSocket&) = delete;

  void sendAll(const uint8_t* data, size_t size, Clock::time_point deadline);
  // Reads at least `size` bytes; returns a pointer to them (valid until the next call) and
  // consumes them.
  const uint8_t* receive(size_t size, Clock::time_point deadline);
  // Marks the connection broken and throws StoreError naming the peer and what.
  [[noreturn]] void fail(const std::string& what);

  bool broken() const { return broken_; }
  const std::string& brokenReason() const { return brokenReason_; }
  // "TCPStore server host:port", for messages.
  const std::string& peer() const { return peer_; }
  // What a receive says when the server closes the connection (by default: did it exit?).
  void setClosedMessage(std::string message) { closedMessage_ = std::move(message); }

 private:
  bool tryConnectOnce(const std::string& host, uint16_t port, Clock::time_point deadline,
                      std::string& error);
  void waitFor(short events, Clock::time_point deadline);

  std::string peer_;
  int fd_ = -1;
  bool broken_ = false;
  std::string brokenReason_;
  std::string closedMessage_ = "the server closed the connection (did its process exit?)";
  std::vector<uint8_t> input_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace c10d::inline v1::detail
