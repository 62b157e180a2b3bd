#include "store/tcp/StoreConnection.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/net/Auth.hpp"

namespace c10d::inline v0::detail {
namespace {

using Clock = StoreConnection::Clock;

// How long a caller polls the socket without sleeping before it blocks in poll(). A store
// answers most requests within tens of microseconds; on virtual machines waking a halted vCPU
// costs about as much again, so sleeping at once cut single-client throughput to a third here
// (12k vs 40k ops/s, see docs/performance.md). Requests that wait longer lose only this much
// CPU time.
constexpr std::chrono::microseconds kSpinBeforeBlocking{50};

int remainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT32_MAX));
}

}  // namespace

StoreConnection::StoreConnection(const std::string& host, uint16_t port,
                                 std::chrono::milliseconds timeout,
                                 std::optional<std::string> token)
    : host_(host),
      port_(port),
      address_(host + ":" + std::to_string(port)),
      token_(std::move(token)) {
  auto deadline = Clock::now() + timeout;
  std::mt19937_64 random(std::random_device{}());
  std::chrono::milliseconds backoff(10);
  const std::chrono::milliseconds maxBackoff(1000);
  std::string error;
  int attempts = 0;
  while (true) {
    ++attempts;
    if (tryConnectOnce(deadline, error)) break;
    if (Clock::now() >= deadline) {
      C10D_THROW(TimeoutError, "TCPStore client could not connect to ", address_, " within ",
                 timeout.count(), " ms (", attempts, " attempts; last error: ", error,
                 "). Check that the store server (rank 0 or c10d-store-server) is running and "
                 "that MASTER_ADDR/MASTER_PORT point at it.");
    }
    // Jitter (a pause drawn from [backoff/2, backoff]) keeps thousands of ranks that start
    // together from retrying in lockstep.
    std::uniform_int_distribution<int64_t> jitter(backoff.count() / 2, backoff.count());
    auto pause = std::chrono::milliseconds(jitter(random));
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    backoff = std::min(backoff * 2, maxBackoff);
  }
  try {
    handshake(deadline);
  } catch (...) {
    // No destructor runs for an object whose constructor throws: close the socket here, so the
    // server sees the refusal end now rather than when this process exits.
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

StoreConnection::~StoreConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool StoreConnection::tryConnectOnce(Clock::time_point deadline, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* results = nullptr;
  std::string service = std::to_string(port_);
  int gai = getaddrinfo(host_.c_str(), service.c_str(), &hints, &results);
  if (gai != 0) {
    error = std::string("cannot resolve host '") + host_ + "': " + gai_strerror(gai);
    return false;
  }
  for (addrinfo* ai = results; ai != nullptr; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd pfd{fd, POLLOUT, 0};
      int ready;
      do {
        ready = ::poll(&pfd, 1, remainingMs(deadline));
      } while (ready < 0 && errno == EINTR);
      if (ready == 0) {
        errno = ETIMEDOUT;
      } else if (ready > 0) {
        int soError = 0;
        socklen_t length = sizeof(soError);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length);
        errno = soError;
        rc = soError == 0 ? 0 : -1;
      }
    }
    if (rc == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      fd_ = fd;
      freeaddrinfo(results);
      return true;
    }
    error = std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(results);
  return false;
}

void StoreConnection::handshake(Clock::time_point deadline) {
  const auto hello = protocol::clientHello();
  sendAll(hello.data(), hello.size(), deadline);
  const uint8_t* reply = receive(protocol::kHandshakeBytes, deadline);
  if (std::memcmp(reply, protocol::kMagic, 4) != 0) {
    fail("the peer is not a c10d TCPStore server (bad handshake)");
  }
  uint16_t serverVersion, status;
  std::memcpy(&serverVersion, reply + 4, 2);
  std::memcpy(&status, reply + 6, 2);
  if (status == static_cast<uint16_t>(protocol::HandshakeStatus::AuthChallenge)) {
    authenticate(deadline);
    return;
  }
  if (status != static_cast<uint16_t>(protocol::HandshakeStatus::Ok)) {
    fail(concat("the server speaks store protocol version ", serverVersion,
                " and this client version ", protocol::kVersion,
                "; run the same c10d version on every rank"));
  }
  if (token_) {
    fail(
        "this client has an authentication token (C10D_AUTH_TOKEN) but the server does not ask "
        "for one; refusing to talk to a server that does not authenticate. Start the server "
        "with the same token");
  }
}

void StoreConnection::authenticate(Clock::time_point deadline) {
  auth::Nonce challenge;
  std::memcpy(challenge.data(), receive(auth::kNonceBytes, deadline), challenge.size());
  if (!token_) {
    fail(
        "the server requires authentication: set C10D_AUTH_TOKEN (or C10D_AUTH_TOKEN_FILE) to "
        "the job's token");
  }
  auth::Nonce ours = auth::randomNonce();
  auth::Proof proof = auth::prove(*token_, protocol::kClientProofRole, challenge, ours);
  std::vector<uint8_t> message(ours.begin(), ours.end());
  message.insert(message.end(), proof.begin(), proof.end());
  sendAll(message.data(), message.size(), deadline);
  const uint8_t* answer;
  try {
    answer = receive(auth::kProofBytes, deadline);
  } catch (const StoreError&) {
    fail(
        "the server refused this client's authentication token (C10D_AUTH_TOKEN differs from "
        "the server's)");
  }
  if (!auth::matches(auth::prove(*token_, protocol::kServerProofRole, ours, challenge), answer)) {
    fail("the server's authentication proof is wrong: it does not hold this job's token");
  }
}

void StoreConnection::roundTrip(const std::vector<uint8_t>& request, std::vector<uint8_t>& response,
                                Clock::time_point deadline) {
  if (broken_) {
    C10D_THROW(StoreError, "TCPStore connection to ", address_, " is unusable: ", brokenReason_);
  }
  sendAll(request.data(), request.size(), deadline);
  uint32_t length;
  std::memcpy(&length, receive(protocol::kFrameHeaderBytes, deadline), sizeof(length));
  if (length == 0 || length > protocol::kMaxFrameBytes) {
    fail(concat("received a frame of ", length, " bytes from the server"));
  }
  const uint8_t* body = receive(length, deadline);
  response.assign(body, body + length);
}

void StoreConnection::sendAll(const uint8_t* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    ssize_t sent = ::send(fd_, data, size, MSG_NOSIGNAL);
    if (sent > 0) {
      data += sent;
      size -= static_cast<size_t>(sent);
    } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      waitFor(POLLOUT, deadline);
    } else if (sent < 0 && errno != EINTR) {
      fail(concat("send failed: ", std::strerror(errno)));
    }
  }
}

const uint8_t* StoreConnection::receive(size_t size, Clock::time_point deadline) {
  if (end_ - begin_ < size) {
    if (begin_ > 0) {
      std::memmove(input_.data(), input_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (input_.size() < std::max<size_t>(size, 4096)) input_.resize(std::max<size_t>(size, 4096));
  }
  auto spinUntil = Clock::now() + kSpinBeforeBlocking;
  while (end_ - begin_ < size) {
    ssize_t got = ::recv(fd_, input_.data() + end_, input_.size() - end_, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Clock::now() < spinUntil) continue;
      waitFor(POLLIN, deadline);
      continue;
    }
    if (got > 0) {
      end_ += static_cast<size_t>(got);
    } else if (got == 0) {
      fail("the server closed the connection (did the store's host process exit?)");
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail(concat("recv failed: ", std::strerror(errno)));
    }
  }
  const uint8_t* result = input_.data() + begin_;
  begin_ += size;
  return result;
}

void StoreConnection::waitFor(short events, Clock::time_point deadline) {
  pollfd pfd{fd_, events, 0};
  while (true) {
    int ready = ::poll(&pfd, 1, remainingMs(deadline));
    if (ready > 0) return;
    if (ready == 0) {
      broken_ = true;
      brokenReason_ = "an earlier request timed out waiting for the server";
      C10D_THROW(TimeoutError, "TCPStore server ", address_,
                 " did not answer before the deadline; the connection is now unusable");
    }
    if (errno != EINTR) fail(concat("poll failed: ", std::strerror(errno)));
  }
}

void StoreConnection::fail(const std::string& what) {
  broken_ = true;
  brokenReason_ = what;
  C10D_THROW(StoreError, "TCPStore connection to ", address_, ": ", what);
}

}  // namespace c10d::inline v0::detail
