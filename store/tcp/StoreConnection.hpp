#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/tcp/ClientSocket.hpp"
#include "store/tcp/StoreProtocol.hpp"

namespace c10d::inline v1::detail {

// One client connection to a TCPStoreServer: our handshake and request frames over a
// ClientSocket, so every call has a deadline. Not thread-safe: TCPStore serialises calls.
class StoreConnection {
 public:
  using Clock = ClientSocket::Clock;

  // Connects and handshakes, retrying refused/unreachable connects with exponential backoff and
  // jitter until timeout. Throws TimeoutError with the last error, or StoreError when the peer
  // answers with another protocol or version, or authentication fails: the server refused
  // token, asked for one this client does not have, or (token set) did not ask for one.
  StoreConnection(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
                  std::optional<std::string> token = std::nullopt);
  ~StoreConnection() = default;
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;

  // Sends one request frame and receives its response body (status byte first) into response.
  // Throws StoreError if the connection is lost or broken, TimeoutError if no answer came by
  // deadline (after which the connection is unusable: a late answer would be misread).
  void roundTrip(const std::vector<uint8_t>& request, std::vector<uint8_t>& response,
                 Clock::time_point deadline);

  // "TCPStore server host:port", for messages.
  const std::string& peer() const { return socket_.peer(); }

 private:
  void handshake(Clock::time_point deadline);
  void authenticate(Clock::time_point deadline);
  [[noreturn]] void fail(const std::string& what);

  ClientSocket socket_;
  std::optional<std::string> token_;
};

}  // namespace c10d::inline v1::detail
