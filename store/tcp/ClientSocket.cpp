#include "store/tcp/ClientSocket.hpp"

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

namespace c10d::inline v1::detail {
namespace {

using Clock = ClientSocket::Clock;

// How long a caller polls the socket without sleeping before it blocks in poll(). A store
// answers most requests within tens of microseconds; on virtual machines waking a halted vCPU
// costs about as much again, so sleeping at once cut single-client throughput sharply
// (measured: docs/performance.md, "Store"). Requests that wait longer lose only this much CPU
// time.
constexpr std::chrono::microseconds kSpinBeforeBlocking{50};

// Rounded up: poll() with the rounded-down count wakes before the deadline, and a wait could
// then report a timeout that had not yet passed.
int remainingMs(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT32_MAX));
}

}  // namespace

ClientSocket::ClientSocket(const std::string& host, uint16_t port,
                           std::chrono::milliseconds timeout, std::string peer,
                           const std::string& hint)
    : peer_(std::move(peer) + " " + host + ":" + std::to_string(port)) {
  auto deadline = Clock::now() + timeout;
  std::mt19937_64 random(std::random_device{}());
  std::chrono::milliseconds backoff(10);
  const std::chrono::milliseconds maxBackoff(1000);
  std::string error;
  int attempts = 0;
  while (true) {
    ++attempts;
    if (tryConnectOnce(host, port, deadline, error)) break;
    if (Clock::now() >= deadline) {
      C10D_THROW(TimeoutError, "could not connect to ", peer_, " within ", timeout.count(), " ms (",
                 attempts, " attempts; last error: ", error, "). ", hint);
    }
    // Jitter (a pause drawn from [backoff/2, backoff]) keeps thousands of ranks that start
    // together from retrying in lockstep.
    std::uniform_int_distribution<int64_t> jitter(backoff.count() / 2, backoff.count());
    auto pause = std::chrono::milliseconds(jitter(random));
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    backoff = std::min(backoff * 2, maxBackoff);
  }
}

ClientSocket::~ClientSocket() {
  if (fd_ >= 0) ::close(fd_);
}

bool ClientSocket::tryConnectOnce(const std::string& host, uint16_t port,
                                  Clock::time_point deadline, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* results = nullptr;
  std::string service = std::to_string(port);
  int gai = getaddrinfo(host.c_str(), service.c_str(), &hints, &results);
  if (gai != 0) {
    error = std::string("cannot resolve host '") + host + "': " + gai_strerror(gai);
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

void ClientSocket::sendAll(const uint8_t* data, size_t size, Clock::time_point deadline) {
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

const uint8_t* ClientSocket::receive(size_t size, Clock::time_point deadline) {
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
      fail(closedMessage_);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail(concat("recv failed: ", std::strerror(errno)));
    }
  }
  const uint8_t* result = input_.data() + begin_;
  begin_ += size;
  return result;
}

void ClientSocket::waitFor(short events, Clock::time_point deadline) {
  pollfd pfd{fd_, events, 0};
  while (true) {
    int ready = ::poll(&pfd, 1, remainingMs(deadline));
    if (ready > 0) return;
    if (ready == 0 && Clock::now() < deadline) continue;  // woken early by the clock's grain
    if (ready == 0) {
      broken_ = true;
      brokenReason_ = "an earlier request timed out waiting for the server";
      C10D_THROW(TimeoutError, peer_,
                 " did not answer before the deadline; the connection is now "
                 "unusable");
    }
    if (errno != EINTR) fail(concat("poll failed: ", std::strerror(errno)));
  }
}

void ClientSocket::fail(const std::string& what) {
  broken_ = true;
  brokenReason_ = what;
  C10D_THROW(StoreError, "connection to ", peer_, ": ", what);
}

}  // namespace c10d::inline v1::detail
