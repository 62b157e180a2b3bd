// libFuzzer harness for the TCPStore server's request parsing: each input is a byte stream sent
// to a real TCPStoreServer over loopback, then the connection is half-closed. Properties checked
// after every input: the server is still up, answers a well-behaved client, and the keys that
// client set before fuzzing began are unchanged (malformed frames never corrupt the store).
//
// Input: byte 0 picks the server (bit 1: the one with an authentication token) and whether the
// harness sends a valid handshake first (bit 0); the rest goes to the socket as is.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "store/TCPStore.hpp"
#include "store/tcp/StoreProtocol.hpp"

namespace {

using namespace std::chrono_literals;

// Long enough that a fuzzer cannot guess its way to overwriting it.
const std::string kSentinelKey = "sentinel/7c1f0e5a9b2d4c6e8f0a1b3c5d7e9f2a4b6c8d0e";
const std::string kSentinelValue = "the value set before fuzzing";
const std::string kToken = "fuzzing token";

struct Target {
  std::unique_ptr<c10d::TCPStoreServer> server;
  std::unique_ptr<c10d::TCPStore> client;
};

Target makeTarget(std::optional<std::string> token) {
  c10d::TCPStoreServerOptions options;
  options.listenAddress = "127.0.0.1";
  options.authToken = token;
  Target target;
  target.server = std::make_unique<c10d::TCPStoreServer>(options);
  target.client =
      std::make_unique<c10d::TCPStore>("127.0.0.1", target.server->port(),
                                       c10d::TCPStoreOptions{.timeout = 10s, .authToken = token});
  target.client->setString(kSentinelKey, kSentinelValue);
  return target;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "store_server_fuzzer: %s\n", what);
  std::abort();
}

void sendAndDrain(uint16_t port, const uint8_t* data, size_t size) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // No bind(): a socket bound to a port of its own holds that port for every later connect
  // during its TIME_WAIT minute, which at thousands of inputs a second starves the other tests of
  // ephemeral ports. Unbound, TIME_WAIT pairs are reused for loopback (tcp_tw_reuse).
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // libFuzzer's timeout alarm (SIGALRM) interrupts system calls: EINTR is retried everywhere.
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  // Out of ephemeral ports to this one address (TIME_WAIT without reuse): wait for some to free.
  for (int retry = 0; rc != 0 && errno == EADDRNOTAVAIL && retry < 200; ++retry) {
    ::usleep(10000);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  if (rc != 0) {
    if (errno != EINTR) {
      std::perror("connect");
      die("cannot connect to the server: is it still running?");
    }
    pollfd writable{fd, POLLOUT, 0};
    while (::poll(&writable, 1, 10000) < 0 && errno == EINTR) {
    }
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) die("cannot connect to the server after an interrupted connect");
  }
  timeval limit{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  while (size > 0) {
    ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) break;  // the server dropped the connection: the rest is moot
    data += sent;
    size -= static_cast<size_t>(sent);
  }
  ::shutdown(fd, SHUT_WR);
  // The server answers what it understood and closes once it sees the end of the stream.
  char buffer[65536];
  while (true) {
    ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got == 0 || (got < 0 && errno == ECONNRESET)) break;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) die("the server neither answered nor closed within 10 s");
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Target open = makeTarget(std::nullopt);
  static Target authenticated = makeTarget(kToken);
  if (size == 0) return 0;
  Target& target = (data[0] & 2) ? authenticated : open;
  std::string stream;
  if (data[0] & 1) {
    const auto hello = c10d::protocol::clientHello();
    stream.assign(hello.begin(), hello.end());
  }
  stream.append(reinterpret_cast<const char*>(data + 1), size - 1);
  sendAndDrain(target.server->port(), reinterpret_cast<const uint8_t*>(stream.data()),
               stream.size());
  if (target.client->getString(kSentinelKey) != kSentinelValue) {
    die("the sentinel key changed: a malformed stream corrupted the store");
  }
  return 0;
}
