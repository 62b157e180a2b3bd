// TCPStore beyond the shared Store suite: real processes, hostile bytes, many connections,
// connection retries and lost servers.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>

#include "c10d/core/Exception.hpp"
#include "c10d/net/Auth.hpp"
#include "store/TCPStore.hpp"
#include "store/tcp/StoreProtocol.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

// Forked children running body(i). wait() returns their exit codes; a child still running at the
// deadline is killed and reported as -1, so a hang fails the test instead of stalling it.
class Children {
 public:
  Children(int n, const std::function<int(int)>& body) {
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        int code = 1;
        try {
          code = body(i);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "child %d: %s\n", i, e.what());
        }
        std::fflush(stderr);
        _exit(code);
      }
      pids_.push_back(pid);
    }
  }
  ~Children() { killAll(); }

  std::vector<int> wait(std::chrono::seconds limit) {
    std::vector<int> codes(pids_.size(), -1);
    auto deadline = std::chrono::steady_clock::now() + limit;
    size_t done = 0;
    while (done < pids_.size() && std::chrono::steady_clock::now() < deadline) {
      for (size_t i = 0; i < pids_.size(); ++i) {
        int status = 0;
        if (pids_[i] != 0 && waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
          codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          pids_[i] = 0;
          ++done;
        }
      }
      std::this_thread::sleep_for(5ms);
    }
    killAll();
    return codes;
  }

 private:
  void killAll() {
    for (pid_t& pid : pids_) {
      if (pid != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        pid = 0;
      }
    }
  }
  std::vector<pid_t> pids_;
};

TEST(TCPStoreProcessTest, RanksInSeparateProcessesRendezvous) {
  constexpr int kWorld = 4;
  const uint16_t port = test::freeLoopbackPort();
  // The other ranks start before the server exists: their connects must retry until it listens.
  Children ranks(kWorld - 1, [port](int i) {
    int rank = i + 1;
    TCPStore store("127.0.0.1", port, TCPStoreOptions{.numWorkers = kWorld, .timeout = 30s});
    store.setString("rank/" + std::to_string(rank), std::to_string(rank * 10));
    store.add("sum", rank);
    std::vector<std::string> keys;
    for (int r = 0; r < kWorld; ++r) keys.push_back("rank/" + std::to_string(r));
    auto values = store.multiGet(keys);
    for (int r = 0; r < kWorld; ++r) {
      if (toString(values[r]) != std::to_string(r * 10)) return 2;
    }
    if (store.add("arrived", 1) == kWorld) store.setString("go", "1");
    store.wait({"go"});
    int64_t sum = store.add("sum", 0);
    store.add("finished", 1);
    return sum == 0 + 1 + 2 + 3 ? 0 : 3;
  });
  std::this_thread::sleep_for(200ms);
  TCPStore server(
      "127.0.0.1", port,
      TCPStoreOptions{
          .isServer = true, .numWorkers = kWorld, .timeout = 30s, .listenAddress = "127.0.0.1"});
  server.setString("rank/0", "0");
  if (server.add("arrived", 1) == kWorld) server.setString("go", "1");
  server.wait({"go"});
  std::vector<int> codes = ranks.wait(60s);
  EXPECT_EQ(codes, std::vector<int>(kWorld - 1, 0));
  EXPECT_EQ(server.add("finished", 0), kWorld - 1);
  EXPECT_EQ(server.add("sum", 0), 6);
}

TEST(TCPStoreProcessTest, KilledClientDoesNotDisturbOthers) {
  TCPStore server("127.0.0.1", 0,
                  TCPStoreOptions{.isServer = true, .timeout = 30s, .listenAddress = "127.0.0.1"});
  const uint16_t port = server.port();
  // A client parks in wait() and is killed with SIGKILL while the server holds its waiter.
  Children victim(1, [port](int) {
    TCPStore store("127.0.0.1", port, TCPStoreOptions{.timeout = 30s});
    store.setString("victim-ready", "1");
    store.wait({"never"});
    return 0;
  });
  server.wait({"victim-ready"}, 10s);
  std::vector<int> codes = victim.wait(0s);  // kills it
  EXPECT_EQ(codes[0], -1);
  server.setString("never", "now set");  // wakes the dead waiter: must not crash the server
  TCPStore other("127.0.0.1", port);
  EXPECT_EQ(other.getString("victim-ready"), "1");
  EXPECT_EQ(other.getString("never"), "now set");
}

// ---- hostile input ----

class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
    }
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawClient() { ::close(fd_); }

  void send(const std::vector<uint8_t>& bytes) {
    ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  void handshake(uint16_t version = protocol::kVersion) {
    const auto hello = protocol::clientHello(version);
    send({hello.begin(), hello.end()});
  }
  // Bytes received until the server closes the connection or 5 s pass.
  std::vector<uint8_t> readUntilClosed() {
    std::vector<uint8_t> all;
    uint8_t buffer[4096];
    while (true) {
      ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (got <= 0) {
        closedByPeer_ = got == 0 || errno == ECONNRESET;
        return all;
      }
      all.insert(all.end(), buffer, buffer + got);
    }
  }
  bool closedByPeer() const { return closedByPeer_; }

 private:
  int fd_;
  bool closedByPeer_ = false;
};

std::vector<uint8_t> frame(const std::vector<uint8_t>& body) {
  std::vector<uint8_t> out(4);
  uint32_t length = static_cast<uint32_t>(body.size());
  std::memcpy(out.data(), &length, 4);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::vector<uint8_t> le32(uint32_t value) {
  std::vector<uint8_t> out(4);
  std::memcpy(out.data(), &value, 4);
  return out;
}

std::vector<uint8_t> concatBytes(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

TEST(TCPStoreHostileInputTest, GarbageIsDroppedAndOtherClientsKeepTheirKeys) {
  TCPStoreServer server(TCPStoreServerOptions{"127.0.0.1", 0});
  TCPStore good("127.0.0.1", server.port(), TCPStoreOptions{.timeout = 10s});
  for (int i = 0; i < 100; ++i) good.setString("key" + std::to_string(i), std::to_string(i));
  good.add("counter", 7);

  const uint8_t set = static_cast<uint8_t>(protocol::Op::Set);
  const uint8_t get = static_cast<uint8_t>(protocol::Op::Get);
  struct Case {
    const char* what;
    bool handshake;
    std::vector<uint8_t> bytes;
  };
  std::vector<uint8_t> random(1000);
  for (size_t i = 0; i < random.size(); ++i) random[i] = static_cast<uint8_t>(i * 131 + 7);
  const std::vector<Case> cases = {
      {"HTTP request instead of a handshake",
       false,
       {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1', '\r', '\n'}},
      {"random bytes", false, random},
      {"random bytes after handshake", true, random},
      {"absurd frame length", true, le32(0xffffffffu)},
      {"empty frame", true, le32(0)},
      {"unknown op", true, frame({200})},
      {"op zero", true, frame({0})},
      {"key length past the frame", true, frame(concatBytes({{set}, le32(1000), {'k'}}))},
      {"key over the key limit", true, frame(concatBytes({{set}, le32(Store::kMaxKeyBytes + 1)}))},
      {"empty key", true, frame(concatBytes({{set}, le32(0), le32(0)}))},
      {"trailing bytes", true, frame(concatBytes({{set}, le32(1), {'k'}, le32(0), {1, 2, 3}}))},
      {"negative wait timeout", true,
       frame(
           concatBytes({{get}, le32(1), {'k'}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}))},
      {"key count larger than the frame", true,
       frame(concatBytes({{static_cast<uint8_t>(protocol::Op::Check)}, le32(0x7fffffff)}))},
  };
  int64_t droppedBefore = server.droppedConnectionCount();
  for (const Case& c : cases) {
    RawClient raw(server.port());
    if (c.handshake) raw.handshake();
    raw.send(c.bytes);
    raw.readUntilClosed();
    EXPECT_TRUE(raw.closedByPeer()) << c.what << ": the server kept a misbehaving connection";
    // The well-behaved client is unaffected and nothing was lost or overwritten.
    EXPECT_EQ(good.getString("key42"), "42") << c.what;
    EXPECT_EQ(good.add("counter", 0), 7) << c.what;
  }
  EXPECT_EQ(server.droppedConnectionCount() - droppedBefore, static_cast<int64_t>(cases.size()));
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(good.getString("key" + std::to_string(i)), std::to_string(i));
  EXPECT_EQ(good.numKeys(), 101);
}

TEST(TCPStoreHostileInputTest, HalfSentRequestsAndVanishingClientsAreHarmless) {
  TCPStoreServer server(TCPStoreServerOptions{"127.0.0.1", 0});
  TCPStore good("127.0.0.1", server.port(), TCPStoreOptions{.timeout = 10s});
  good.setString("kept", "yes");
  const uint8_t set = static_cast<uint8_t>(protocol::Op::Set);
  for (int i = 0; i < 20; ++i) {
    RawClient raw(server.port());
    if (i % 2 == 0) raw.handshake();
    // Half a frame announcing 100 bytes, then the client disappears.
    raw.send(concatBytes({le32(100), {set}, le32(4), {'k', 'e'}}));
  }
  {
    RawClient partial(server.port());
    partial.send({'C', '1'});  // half a handshake
  }
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(good.getString("kept"), "yes");
  EXPECT_FALSE(good.check({"ke"}));
  good.setString("after", "ok");
  EXPECT_EQ(TCPStore("127.0.0.1", server.port()).getString("after"), "ok");
}

// Many keys naming one large value would make an answer without bound: refused before it is
// built, and the connection serves on.
TEST(TCPStoreHostileInputTest, AMultiGetPastTheAnswerLimitIsRefused) {
  TCPStoreServer server(TCPStoreServerOptions{"127.0.0.1", 0});
  TCPStore store("127.0.0.1", server.port(), TCPStoreOptions{.timeout = 10s});
  store.set("big", Store::Bytes(4 << 20, 'x'));
  std::vector<std::string> keys(64, "big");  // 256 MiB of answer
  try {
    store.multiGet(keys, 1s);
    ADD_FAILURE() << "a 256 MiB multiGet answer was built";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("ask for fewer keys"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.multiGet({"big", "big"}, 1s).size(), 2u);
}

TEST(TCPStoreHostileInputTest, VersionMismatchIsRefusedWithTheServerVersion) {
  TCPStoreServer server(TCPStoreServerOptions{"127.0.0.1", 0});
  RawClient raw(server.port());
  raw.handshake(protocol::kVersion + 41);
  std::vector<uint8_t> reply = raw.readUntilClosed();
  ASSERT_EQ(reply.size(), protocol::kHandshakeBytes);
  EXPECT_EQ(std::memcmp(reply.data(), protocol::kMagic, 4), 0);
  uint16_t version, status;
  std::memcpy(&version, reply.data() + 4, 2);
  std::memcpy(&status, reply.data() + 6, 2);
  EXPECT_EQ(version, protocol::kVersion);
  EXPECT_EQ(status, static_cast<uint16_t>(protocol::HandshakeStatus::VersionMismatch));
  EXPECT_TRUE(raw.closedByPeer());
}

// ---- scale ----

TEST(TCPStoreScaleTest, FiveHundredTwelveConcurrentClients) {
  constexpr int kClients = 512, kThreads = 32, kPerThread = kClients / kThreads;
  TCPStoreServer server(TCPStoreServerOptions{"127.0.0.1", 0});
  const uint16_t port = server.port();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::vector<std::unique_ptr<TCPStore>> clients;
        for (int c = 0; c < kPerThread; ++c) {
          clients.push_back(
              std::make_unique<TCPStore>("127.0.0.1", port, TCPStoreOptions{.timeout = 60s}));
        }
        for (int c = 0; c < kPerThread; ++c) {
          int id = t * kPerThread + c;
          clients[c]->setString("client/" + std::to_string(id), std::to_string(id * 3));
          clients[c]->add("total", id);
          if (clients[c]->add("arrived", 1) == kClients) clients[c]->setString("released", "1");
        }
        for (int c = 0; c < kPerThread; ++c) {
          int id = t * kPerThread + c;
          clients[c]->wait({"released"});
          int peer = (id + 1) % kClients;
          if (clients[c]->getString("client/" + std::to_string(peer)) != std::to_string(peer * 3)) {
            ++failures;
          }
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "thread %d: %s\n", t, e.what());
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  TCPStore check("127.0.0.1", port);
  EXPECT_EQ(check.add("total", 0), int64_t{kClients} * (kClients - 1) / 2);
  EXPECT_EQ(check.add("arrived", 0), kClients);
}

// ---- connection lifecycle ----

TEST(TCPStoreLifecycleTest, ConnectRetriesUntilTheServerAppears) {
  const uint16_t port = test::freeLoopbackPort();
  std::unique_ptr<TCPStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(300ms);
    server = std::make_unique<TCPStoreServer>(TCPStoreServerOptions{"127.0.0.1", port});
  });
  auto start = std::chrono::steady_clock::now();
  TCPStore client("127.0.0.1", port, TCPStoreOptions{.timeout = 20s});
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  starter.join();
  client.setString("k", "v");
  EXPECT_EQ(client.getString("k"), "v");
}

TEST(TCPStoreLifecycleTest, NoServerTimesOutNamingTheAddress) {
  const uint16_t port = test::freeLoopbackPort();
  auto start = std::chrono::steady_clock::now();
  try {
    TCPStore client("127.0.0.1", port, TCPStoreOptions{.timeout = 500ms});
    FAIL() << "connected to a port nobody listens on";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, 450ms);
  EXPECT_LT(elapsed, 5s);
}

TEST(TCPStoreLifecycleTest, LostServerFailsCallsInsteadOfHanging) {
  auto server = std::make_unique<TCPStoreServer>(TCPStoreServerOptions{"127.0.0.1", 0});
  TCPStore client("127.0.0.1", server->port(), TCPStoreOptions{.timeout = 10s});
  client.setString("k", "v");
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    server->stop();
  });
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.get("never", 30s), StoreError);  // parked when the server goes away
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  stopper.join();
  EXPECT_THROW(client.setString("k", "again"), StoreError);
}

TEST(TCPStoreLifecycleTest, StoppingFromTwoThreadsAtOnceJoinsOnce) {
  for (int round = 0; round < 20; ++round) {
    TCPStoreServer server(TCPStoreServerOptions{"127.0.0.1", 0});
    std::thread other([&] { server.stop(); });
    server.stop();  // both saw the thread joinable and joined it: std::system_error, terminate
    other.join();
  }
}

TEST(TCPStoreLifecycleTest, NumWorkersWaitsForEveryoneOrSaysWhoIsMissing) {
  const uint16_t port = test::freeLoopbackPort();
  std::thread worker([port] {
    std::this_thread::sleep_for(100ms);
    TCPStore client("127.0.0.1", port, TCPStoreOptions{.numWorkers = 2, .timeout = 10s});
  });
  TCPStore server(
      "127.0.0.1", port,
      TCPStoreOptions{
          .isServer = true, .numWorkers = 2, .timeout = 10s, .listenAddress = "127.0.0.1"});
  worker.join();
  try {
    TCPStore lonely(
        "127.0.0.1", 0,
        TCPStoreOptions{
            .isServer = true, .numWorkers = 3, .timeout = 300ms, .listenAddress = "127.0.0.1"});
    FAIL() << "a server waiting for 3 workers returned with 1";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("only 1 of 3 workers"), std::string::npos) << e.what();
  }
}

TEST(TCPStoreLifecycleTest, WorkersThatDisagreeAboutTheWorldSizeFailAtOnceSayingSo) {
  // Rank 0 (the server) was started with WORLD_SIZE=2, another rank with 3: both fail within a
  // moment, with both values, instead of the server waiting out its timeout.
  const uint16_t port = test::freeLoopbackPort();
  const auto start = std::chrono::steady_clock::now();
  std::string clientError;
  std::thread worker([&] {
    std::this_thread::sleep_for(100ms);
    try {
      TCPStore client("127.0.0.1", port, TCPStoreOptions{.numWorkers = 3, .timeout = 20s});
    } catch (const InvalidArgument& e) {
      clientError = e.what();
    }
  });
  std::string serverError;
  try {
    TCPStore server(
        "127.0.0.1", port,
        TCPStoreOptions{
            .isServer = true, .numWorkers = 2, .timeout = 20s, .listenAddress = "127.0.0.1"});
  } catch (const InvalidArgument& e) {
    serverError = e.what();
  }
  worker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  for (const std::string& message : {clientError, serverError}) {
    EXPECT_NE(message.find("disagree about the world size"), std::string::npos) << message;
    EXPECT_NE(message.find("one expects 3 workers, the first to connect expects 2"),
              std::string::npos)
        << message;
  }
}

TEST(TCPStoreLifecycleTest, PortInUseIsAClearError) {
  TCPStoreServer first(TCPStoreServerOptions{"127.0.0.1", 0});
  try {
    TCPStoreServer second(TCPStoreServerOptions{"127.0.0.1", first.port()});
    FAIL() << "two servers bound one port";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(first.port())), std::string::npos)
        << e.what();
  }
}

TEST(TCPStoreLifecycleTest, DefaultListenAddressAcceptsIPv4Clients) {
  TCPStoreServer server;  // every interface
  TCPStore client("127.0.0.1", server.port(), TCPStoreOptions{.timeout = 5s});
  client.setString("k", "v");
  EXPECT_EQ(client.getString("k"), "v");
}

// ---- authentication ----

// Unsets the token variables for one test, so that only the options decide.
class NoTokenInEnvironment {
 public:
  NoTokenInEnvironment() {
    ::unsetenv("C10D_AUTH_TOKEN");
    ::unsetenv("C10D_AUTH_TOKEN_FILE");
  }
  ~NoTokenInEnvironment() {
    ::unsetenv("C10D_AUTH_TOKEN");
    ::unsetenv("C10D_AUTH_TOKEN_FILE");
  }
};

TCPStoreServerOptions serverWithToken(std::optional<std::string> token) {
  TCPStoreServerOptions options;
  options.listenAddress = "127.0.0.1";
  options.authToken = std::move(token);
  return options;
}

TCPStoreOptions clientWithToken(std::optional<std::string> token) {
  return TCPStoreOptions{.timeout = 5s, .authToken = std::move(token)};
}

std::string connectError(uint16_t port, std::optional<std::string> token) {
  try {
    TCPStore("127.0.0.1", port, clientWithToken(std::move(token)));
  } catch (const StoreError& e) {
    return e.what();
  }
  return "(connected)";
}

// Waits up to 5 s until the server holds `open` connections (refused ones closed).
void waitForConnections(const TCPStoreServer& server, int64_t open) {
  for (int i = 0; i < 500 && server.connectionCount() != open; ++i)
    std::this_thread::sleep_for(10ms);
}

TEST(TCPStoreAuthTest, MatchingTokensConnectAndServe) {
  NoTokenInEnvironment env;
  TCPStoreServer server(serverWithToken("open sesame"));
  TCPStore a("127.0.0.1", server.port(), clientWithToken("open sesame"));
  TCPStore b("127.0.0.1", server.port(), clientWithToken("open sesame"));
  a.setString("k", "v");
  EXPECT_EQ(b.getString("k"), "v");
  EXPECT_EQ(b.add("n", 3), 3);
}

TEST(TCPStoreAuthTest, WrongOrMissingTokenIsRefusedLoggedAndTouchesNoKey) {
  NoTokenInEnvironment env;
  TCPStoreServer server(serverWithToken("right"));
  TCPStore good("127.0.0.1", server.port(), clientWithToken("right"));
  good.setString("kept", "yes");

  ::testing::internal::CaptureStderr();
  std::string wrong = connectError(server.port(), "wrong");
  std::string missing = connectError(server.port(), std::nullopt);
  waitForConnections(server, 1);
  std::string log = ::testing::internal::GetCapturedStderr();

  EXPECT_NE(wrong.find("refused this client's authentication token"), std::string::npos) << wrong;
  EXPECT_NE(missing.find("requires authentication: set C10D_AUTH_TOKEN"), std::string::npos)
      << missing;
  EXPECT_NE(log.find("wrong authentication token; no key was read or written"), std::string::npos)
      << log;
  EXPECT_NE(log.find("left without authenticating"), std::string::npos) << log;
  EXPECT_EQ(good.numKeys(), 1);
  EXPECT_EQ(good.getString("kept"), "yes");
}

TEST(TCPStoreAuthTest, RequestsBeforeTheProofAreNeverServed) {
  NoTokenInEnvironment env;
  TCPStoreServer server(serverWithToken("right"));
  TCPStore good("127.0.0.1", server.port(), clientWithToken("right"));
  const uint8_t set = static_cast<uint8_t>(protocol::Op::Set);
  // A client that skips the challenge and sends a set: its bytes are read as a (wrong) proof.
  RawClient raw(server.port());
  raw.handshake();
  std::vector<uint8_t> request =
      frame(concatBytes({{set}, le32(6), {'s', 't', 'o', 'l', 'e', 'n'}, le32(1), {'x'}}));
  request.resize(auth::kNonceBytes + auth::kProofBytes + request.size(), 0);
  raw.send(request);
  std::vector<uint8_t> reply = raw.readUntilClosed();
  EXPECT_TRUE(raw.closedByPeer());
  EXPECT_EQ(reply.size(), protocol::kHandshakeBytes + auth::kNonceBytes);  // the challenge only
  EXPECT_FALSE(good.check({"stolen"}));
  EXPECT_EQ(good.numKeys(), 0);
}

TEST(TCPStoreAuthTest, AClientWithATokenRefusesAServerWithout) {
  NoTokenInEnvironment env;
  TCPStoreServer server(serverWithToken(std::nullopt));
  std::string error = connectError(server.port(), "secret");
  EXPECT_NE(error.find("does not ask for one"), std::string::npos) << error;
}

TEST(TCPStoreAuthTest, TokenComesFromTheEnvironmentOrAFile) {
  NoTokenInEnvironment env;
  ::setenv("C10D_AUTH_TOKEN", "from env", 1);
  TCPStoreServer server(serverWithToken(std::nullopt));
  EXPECT_EQ(auth::tokenFromEnvironment(), "from env");
  TCPStore("127.0.0.1", server.port(), clientWithToken(std::nullopt)).setString("a", "1");
  EXPECT_NE(connectError(server.port(), "other").find("refused"), std::string::npos);

  ::unsetenv("C10D_AUTH_TOKEN");
  std::string path = ::testing::TempDir() + "c10d_token_" + std::to_string(::getpid());
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs("from env\n", file);
  std::fclose(file);
  ::setenv("C10D_AUTH_TOKEN_FILE", path.c_str(), 1);
  EXPECT_EQ(TCPStore("127.0.0.1", server.port(), clientWithToken(std::nullopt)).getString("a"),
            "1");

  file = std::fopen(path.c_str(), "w");
  std::fclose(file);
  EXPECT_THROW(auth::tokenFromEnvironment(), InvalidArgument);  // an empty token
  ::setenv("C10D_AUTH_TOKEN_FILE", (path + ".missing").c_str(), 1);
  EXPECT_THROW(auth::tokenFromEnvironment(), InvalidArgument);
  EXPECT_THROW(auth::resolveToken(std::string()), InvalidArgument);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace c10d::inline v1
