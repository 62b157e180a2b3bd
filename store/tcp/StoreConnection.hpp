#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/tcp/StoreProtocol.hpp"

namespace c10d::inline v0::detail {

// One client connection to a TCPStoreServer: a non-blocking socket driven with poll() so every
// call has a deadline. Not thread-safe: TCPStore serialises calls.
class StoreConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects and handshakes, retrying refused/unreachable connects with exponential backoff and
  // jitter until timeout. Throws TimeoutError with the last error, or StoreError when the peer
  // answers with another protocol or version, or authentication fails: the server refused
  // token, asked for one this client does not have, or (token set) did not ask for one.
  StoreConnection(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
                  std::optional<std::string> token = std::nullopt);
  ~StoreConnection();
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;

  // Sends one request frame and receives its response body (status byte first) into response.
  // Throws StoreError if the connection is lost or broken, TimeoutError if no answer came by
  // deadline (after which the connection is unusable: a late answer would be misread).
  void roundTrip(const std::vector<uint8_t>& request, std::vector<uint8_t>& response,
                 Clock::time_point deadline);

  const std::string& address() const { return address_; }

 private:
  bool tryConnectOnce(Clock::time_point deadline, std::string& error);
  void handshake(Clock::time_point deadline);
  void authenticate(Clock::time_point deadline);
  void sendAll(const uint8_t* data, size_t size, Clock::time_point deadline);
  // Reads at least `size` buffered bytes; returns a pointer to them and consumes them.
  const uint8_t* receive(size_t size, Clock::time_point deadline);
  void waitFor(short events, Clock::time_point deadline);
  [[noreturn]] void fail(const std::string& what);

  std::string host_;
  uint16_t port_;
  std::string address_;  // "host:port" for messages
  std::optional<std::string> token_;
  int fd_ = -1;
  bool broken_ = false;
  std::string brokenReason_;
  std::vector<uint8_t> input_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace c10d::inline v0::detail
