// The RPC agent: workers on threads of this process, over a shared HashStore and loopback TCP.
// Typed calls (scalars, strings, containers, tensors, user structs), every failure a caller can
// meet (unknown worker or function, wrong argument types, a remote exception, a timeout, a lost
// peer, a call after shutdown), and malformed bytes on the wire.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "c10d/core/Exception.hpp"
#include "c10d/net/Auth.hpp"
#include "rpc/RpcAgent.hpp"
#include "rpc/transport/Connection.hpp"
#include "rpc/transport/Wire.hpp"
#include "store/HashStore.hpp"
#include "tests/support/RpcTestUtil.hpp"

namespace c10d::inline v1::rpc {
namespace {

using namespace std::chrono_literals;
using test::messageOf;
using test::shutdownAll;
using test::startWorkers;

struct Point {
  double x = 0;
  double y = 0;
  std::string label;
  MSGPACK_DEFINE(x, y, label);
};

Tensor floats(std::vector<float> values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, ScalarType::Float32);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

TEST(RpcTest, TypedCallsCarryValuesAndTensors) {
  auto agents = startWorkers(2);
  RpcAgent& server = *agents[1];
  server.registerFunction("add", [](int a, int b) { return a + b; });
  server.registerFunction("greet", [](const std::string& who) { return "hello " + who; });
  server.registerFunction("stats", [](const std::vector<double>& v) {
    std::map<std::string, double> out{{"sum", 0.0}, {"max", v.empty() ? 0.0 : v[0]}};
    for (double x : v) {
      out["sum"] += x;
      out["max"] = std::max(out["max"], x);
    }
    return out;
  });
  server.registerFunction("twice", [](const Tensor& t) {
    Tensor out = Tensor::empty(t.sizes(), t.dtype());
    for (int64_t i = 0; i < t.numel(); ++i) out.data<float>()[i] = 2 * t.data<float>()[i];
    return out;
  });
  server.registerFunction("mirror", [](Point p) { return Point{-p.x, -p.y, p.label + "'"}; });
  std::atomic<int> touched{0};
  server.registerFunction("touch", [&touched] { touched++; });

  RpcAgent& client = *agents[0];
  EXPECT_EQ(client.rpcSync<int>("worker1", "add", 2, 40), 42);
  EXPECT_EQ(client.rpcSync<std::string>("worker1", "greet", std::string("rank 0")), "hello rank 0");
  auto stats = client.rpcSync<std::map<std::string, double>>("worker1", "stats",
                                                             std::vector<double>{1, 5, 2});
  EXPECT_EQ(stats["sum"], 8.0);
  EXPECT_EQ(stats["max"], 5.0);
  Tensor doubled = client.rpcSync<Tensor>("worker1", "twice", floats({1.5f, -2.0f, 0.25f}));
  ASSERT_EQ(doubled.numel(), 3);
  EXPECT_EQ(doubled.data<float>()[0], 3.0f);
  EXPECT_EQ(doubled.data<float>()[1], -4.0f);
  Point mirrored = client.rpcSync<Point>("worker1", "mirror", Point{1, 2, "p"});
  EXPECT_EQ(mirrored.x, -1);
  EXPECT_EQ(mirrored.label, "p'");
  client.rpcSync<void>("worker1", "touch");
  EXPECT_EQ(touched.load(), 1);
  // A large tensor: 16 MiB each way.
  Tensor big = Tensor::empty({4 << 20}, ScalarType::Float32);
  for (int64_t i = 0; i < big.numel(); ++i) big.data<float>()[i] = static_cast<float>(i % 1000);
  Tensor bigDoubled = client.rpcSync<Tensor>("worker1", "twice", big);
  EXPECT_EQ(bigDoubled.data<float>()[4 * 1000 * 1000 + 7], 2.0f * 7);
  shutdownAll(agents);
}

TEST(RpcTest, AsyncCallsAndThen) {
  auto agents = startWorkers(3);
  for (auto& agent : agents) {
    int id = agent->self().id;
    agent->registerFunction("id", [id] { return id; });
    agent->registerFunction("add", [](int a, int b) { return a + b; });
  }
  std::vector<Future<int>> futures;
  for (int i = 0; i < 100; ++i) futures.push_back(agents[0]->rpcAsync<int>("worker2", "add", i, i));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(futures[i].value(), 2 * i);
  Future<std::string> chained = agents[1]->rpcAsync<int>("worker0", "id").then([](Future<int> f) {
    return "worker0 says " + std::to_string(f.value());
  });
  EXPECT_EQ(chained.value(), "worker0 says 0");
  // A call to oneself works like any other.
  EXPECT_EQ(agents[2]->rpcSync<int>("worker2", "id"), 2);
  EXPECT_EQ(agents[2]->workerInfo("worker1").id, 1);
  EXPECT_EQ(agents[2]->workerInfo(0).name, "worker0");
  shutdownAll(agents);
}

// A function that returns a Future replies when it completes (PyTorch's async_execution): it may
// chain on another worker's call, and while its future is pending it holds none of the callee's
// threads (one here: eight calls wait at once and a plain call still gets through).
TEST(RpcTest, AsyncExecutionRepliesWhenItsFutureCompletes) {
  RpcOptions oneThread;
  oneThread.threads = 1;
  auto agents = startWorkers(3, oneThread);
  RpcAgent* callee = agents[1].get();
  agents[2]->registerFunction("add", [](int a, int b) { return a + b; });
  callee->registerFunction("add_then", [callee](int x, int y, int z) {
    return callee->rpcAsync<int>("worker2", "add", x, y).then([z](Future<int> f) {
      return f.value() + z;
    });
  });
  Future<int> gate;
  callee->registerFunction("after_gate", [gate](int k) {
    return gate.then([k](Future<int> f) { return f.value() * k; });
  });
  callee->registerFunction("ping", [] { return std::string("pong"); });
  callee->registerFunction("fails_later", [] {
    Future<int> f;
    f.setError(std::make_exception_ptr(InvalidArgument("the chained step refused 7")));
    return f;
  });
  callee->registerFunction(
      "throws_first", []() -> Future<void> { C10D_THROW(InvalidArgument, "no future for you"); });

  RpcAgent& caller = *agents[0];
  EXPECT_EQ(caller.rpcSync<int>("worker1", "add_then", 1, 2, 30), 33);
  std::vector<Future<int>> waiting;
  for (int k = 1; k <= 8; ++k) waiting.push_back(caller.rpcAsync<int>("worker1", "after_gate", k));
  EXPECT_EQ(caller.rpcSync<std::string>("worker1", "ping"), "pong");  // the thread is free
  for (auto& f : waiting) EXPECT_FALSE(f.waitFor(10ms));
  gate.setValue(5);
  for (int k = 1; k <= 8; ++k) EXPECT_EQ(waiting[k - 1].value(), 5 * k);

  std::string message = messageOf([&] { caller.rpcSync<int>("worker1", "fails_later"); });
  EXPECT_NE(message.find("fails_later"), std::string::npos) << message;
  EXPECT_NE(message.find("the chained step refused 7"), std::string::npos) << message;
  EXPECT_THROW(caller.rpcSync<int>("worker1", "fails_later"), RemoteError);
  message = messageOf([&] { caller.rpcSync<void>("worker1", "throws_first"); });
  EXPECT_NE(message.find("no future for you"), std::string::npos) << message;
  // From itself, too, and remote() says it cannot hold what replies later.
  EXPECT_EQ(callee->rpcSync<int>("worker1", "add_then", 2, 2, 2), 6);
  message = messageOf([&] { caller.remote<int>("worker1", "add_then", 1, 1, 1).toHere(); });
  EXPECT_NE(message.find("replies later"), std::string::npos) << message;
  shutdownAll(agents);
}

// Past a few calls in flight, requests and responses travel in batched writes (the transport's
// outbox). Two clients keep up to 64 calls each in flight to one server, interleaving empty
// calls with tensors of 0 B to 300 KiB (larger ones always go through the outbox): every call
// returns its own data, and with one pool thread the server runs each client's calls in the
// order they were sent.
TEST(RpcTest, PipelinedCallsOfMixedSizesKeepTheirOrderAndData) {
  RpcOptions options;
  options.threads = 1;
  auto agents = startWorkers(3, options);
  std::mutex mutex;
  std::map<int, std::vector<int64_t>> arrivals;  // client id -> sequence numbers, as run
  agents[2]->registerFunction("record", [&](int client, int64_t seq) {
    std::lock_guard<std::mutex> guard(mutex);
    arrivals[client].push_back(seq);
  });
  agents[2]->registerFunction("echo", [&](int client, int64_t seq, const Tensor& t) {
    {
      std::lock_guard<std::mutex> guard(mutex);
      arrivals[client].push_back(seq);
    }
    return t;
  });
  const int64_t calls = 2000;
  const std::array<int64_t, 4> sizes = {0, 3, 1000, 300 * 1024};
  // Every third call is an echo; echoes cycle through the sizes.
  auto bytesOf = [&](int64_t seq) { return sizes[(seq / 3) % sizes.size()]; };
  auto pipeline = [&](int client) {
    std::deque<std::pair<int64_t, Future<Tensor>>> echoes;
    std::deque<Future<void>> records;
    for (int64_t seq = 0; seq < calls; ++seq) {
      if (seq % 3 == 0) {
        int64_t bytes = bytesOf(seq);
        Tensor t = Tensor::empty({bytes}, ScalarType::UInt8);
        for (int64_t i = 0; i < bytes; ++i) t.data<uint8_t>()[i] = uint8_t(seq + i);
        echoes.emplace_back(seq,
                            agents[client]->rpcAsync<Tensor>("worker2", "echo", client, seq, t));
      } else {
        records.push_back(agents[client]->rpcAsync<void>("worker2", "record", client, seq));
      }
      while (echoes.size() + records.size() > 64) {
        if (!records.empty()) {
          records.front().wait();
          records.pop_front();
          continue;
        }
        auto [sent, future] = echoes.front();
        echoes.pop_front();
        Tensor back = future.value();
        int64_t bytes = bytesOf(sent);
        ASSERT_EQ(back.numel(), bytes) << "client " << client << " call " << sent;
        for (int64_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(back.data<uint8_t>()[i], uint8_t(sent + i))
              << "client " << client << " call " << sent << " byte " << i;
        }
      }
    }
    for (auto& f : records) f.wait();
    for (auto& [sent, future] : echoes) {
      EXPECT_EQ(future.value().numel(), bytesOf(sent)) << "call " << sent;
    }
  };
  std::thread second([&] { pipeline(1); });
  pipeline(0);
  second.join();
  for (int client : {0, 1}) {
    const std::vector<int64_t>& seen = arrivals[client];
    ASSERT_EQ(static_cast<int64_t>(seen.size()), calls) << "client " << client;
    for (int64_t seq = 0; seq < calls; ++seq) {
      ASSERT_EQ(seen[seq], seq) << "client " << client << ": call " << seq << " ran out of order";
    }
  }
  shutdownAll(agents);
}

// A lent tensor is copied off the receiver's loop thread: while worker 0 copies a 256 MiB
// argument from worker 1's memory, worker 2's calls to it go on (issue 32, part 3).
TEST(RpcTest, ALargeLentArgumentLeavesTheReceiversOtherConnectionsFree) {
  auto agents = startWorkers(3);
  agents[0]->registerFunction("numel", [](const Tensor& t) { return t.numel(); });
  agents[0]->registerFunction("ping", [](int x) { return x; });
  // A few round trips: the connections' Probe, Proof and Lend are through, so worker 1 lends.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(agents[1]->rpcSync<int>("worker0", "ping", i), i);
    ASSERT_EQ(agents[2]->rpcSync<int>("worker0", "ping", i), i);
    std::this_thread::sleep_for(20ms);
  }
  constexpr int64_t kFloats = 64 << 20;  // 256 MiB
  Tensor large = Tensor::zeros({kFloats}, ScalarType::Float32);
  using Clock = std::chrono::steady_clock;
  std::atomic<bool> done{false};
  Clock::time_point sentAt, doneAt;
  std::thread caller([&] {
    sentAt = Clock::now();
    auto numel = agents[1]->rpcAsync<int64_t>("worker0", "numel", large);
    EXPECT_EQ(numel.value(), kFloats);
    doneAt = Clock::now();
    done = true;
  });
  // Pings until the large call is done, each one's start and end.
  std::vector<std::pair<Clock::time_point, Clock::time_point>> pings;
  for (int i = 0; !done; ++i) {
    const Clock::time_point start = Clock::now();
    EXPECT_EQ(agents[2]->rpcSync<int>("worker0", "ping", i), i);
    pings.emplace_back(start, Clock::now());
  }
  caller.join();
  // The longest a ping waited while the large call was in flight. On the loop, the copy held
  // up every other connection for its whole length: most of the call's time.
  using Ms = std::chrono::duration<double, std::milli>;
  Ms longest{0};
  for (const auto& [start, end] : pings) {
    if (end > sentAt && start < doneAt)
      longest = std::max<Ms>(longest, std::min(end, doneAt) - std::max(start, sentAt));
  }
  const Ms call = doneAt - sentAt;
  EXPECT_LT(longest.count(), call.count() / 2)
      << "a ping waited " << longest.count() << " ms of the large call's " << call.count()
      << " ms (" << pings.size() << " pings in all)";
  shutdownAll(agents);
}

TEST(RpcTest, EveryFailureReachesTheCallerWithWhatAndWhere) {
  RpcOptions options;
  options.timeout = 5s;
  auto agents = startWorkers(2, options);
  RpcAgent& server = *agents[1];
  server.registerFunction("add", [](int a, int b) { return a + b; });
  server.registerFunction("fail", [](int code) -> int {
    throw std::runtime_error("bad input " + std::to_string(code));
  });
  server.registerFunction("slow", [] { std::this_thread::sleep_for(1500ms); });
  server.registerFunction("oddThrow", []() -> int { throw 42; });
  RpcAgent& client = *agents[0];
  client.registerFunction("oddThrow", []() -> int { throw 42; });
  for (const char* worker : {"worker1", "worker0"}) {
    std::string odd = messageOf([&] { client.rpcSync<int>(worker, "oddThrow"); });
    EXPECT_NE(odd.find("failed with an exception that is not a std::exception"), std::string::npos)
        << worker << ": " << odd;
  }

  std::string unknown = messageOf([&] { client.rpcSync<int>("worker1", "sub", 1, 2); });
  EXPECT_NE(unknown.find("unknown function 'sub' on worker 'worker1' (id 1)"), std::string::npos)
      << unknown;
  EXPECT_NE(unknown.find("registered: add, fail, oddThrow, slow"), std::string::npos) << unknown;
  EXPECT_THROW(client.rpcSync<int>("worker1", "sub", 1, 2), RemoteError);

  std::string wrongTypes =
      messageOf([&] { client.rpcSync<int>("worker1", "add", std::string("one"), 2); });
  EXPECT_NE(wrongTypes.find("arguments of 'add'"), std::string::npos) << wrongTypes;
  std::string wrongCount = messageOf([&] { client.rpcSync<int>("worker1", "add", 1); });
  EXPECT_NE(wrongCount.find("'add' takes 2 argument(s), got 1"), std::string::npos) << wrongCount;

  std::string remote = messageOf([&] { client.rpcSync<int>("worker1", "fail", 7); });
  EXPECT_NE(remote.find("function 'fail' on worker 'worker1' (id 1) failed: bad input 7"),
            std::string::npos)
      << remote;

  std::string wrongResult = messageOf([&] { client.rpcSync<std::string>("worker1", "add", 1, 2); });
  EXPECT_NE(wrongResult.find("result of 'add' from worker 'worker1'"), std::string::npos)
      << wrongResult;

  std::string noWorker = messageOf([&] { client.rpcSync<int>("worker9", "add", 1, 2); });
  EXPECT_NE(noWorker.find("no worker named 'worker9' (workers: worker0, worker1)"),
            std::string::npos)
      << noWorker;

  auto started = std::chrono::steady_clock::now();
  Future<void> late = client.rpcAsyncWithTimeout<void>("worker1", "slow", 200ms);
  std::string timeout = messageOf([&] { late.wait(); });
  EXPECT_NE(timeout.find("rpc call 'slow' to worker 'worker1' (id 1) timed out after 200 ms"),
            std::string::npos)
      << timeout;
  EXPECT_THROW(late.wait(), TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1400ms);
  // The agent still works after all that.
  EXPECT_EQ(client.rpcSync<int>("worker1", "add", 1, 2), 3);
  std::this_thread::sleep_for(1500ms);  // let "slow" finish before the graceful shutdown
  shutdownAll(agents);
  std::string after = messageOf([&] { client.rpcSync<int>("worker1", "add", 1, 2); });
  EXPECT_NE(after.find("after worker 'worker0' shut down"), std::string::npos) << after;
}

// Two threads of one worker shut it down at once, gracefully or not: one does the work and the
// other returns once it is done; the other worker's graceful shutdown meets it, or names it as
// gone when it left without the barrier.
TEST(RpcTest, ShuttingDownFromTwoThreadsAtOnceIsSafe) {
  for (bool graceful : {true, false}) {
    auto agents = startWorkers(2);
    std::vector<std::string> errors(3);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back(
          [&, i] { errors[i] = messageOf([&] { agents[1]->shutdown(graceful); }); });
    }
    errors[2] = messageOf([&] { agents[0]->shutdown(); });
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(errors[0], "(no error)");
    EXPECT_EQ(errors[1], "(no error)");
    if (graceful) {
      EXPECT_EQ(errors[2], "(no error)");
    } else {  // worker 1 left without reaching the barrier: worker 0 says so at once
      EXPECT_NE(errors[2].find("worker 'worker1' (id 1) is gone"), std::string::npos) << errors[2];
    }
    EXPECT_THROW(agents[1]->rpcSync<int>("worker0", "nothing"), StateError);
  }
}

TEST(RpcTest, ALostPeerFailsItsOutstandingCalls) {
  auto agents = startWorkers(2);
  agents[1]->registerFunction("hang", [] { std::this_thread::sleep_for(3s); });
  Future<void> pending = agents[0]->rpcAsync<void>("worker1", "hang");
  std::this_thread::sleep_for(100ms);
  auto started = std::chrono::steady_clock::now();
  std::thread closer([&] { agents[1]->shutdown(false); });
  std::string lost = messageOf([&] { pending.wait(); });
  EXPECT_NE(lost.find("rpc call 'hang' to worker 'worker1' (id 1) failed: the connection was lost"),
            std::string::npos)
      << lost;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  closer.join();
  // A call made after the loss fails like the one in flight did.
  EXPECT_THROW(agents[0]->rpcSync<void>("worker1", "hang"), RemoteError);
  std::string after = messageOf([&] { agents[0]->rpcSync<void>("worker1", "hang"); });
  EXPECT_NE(
      after.find("rpc call 'hang' to worker 'worker1' (id 1) failed: the connection was lost"),
      std::string::npos)
      << after;
  agents[0]->shutdown(false);
}

TEST(RpcTest, CreateRejectsDuplicateNamesAndTimesOutOnMissingWorkers) {
  auto store = std::make_shared<HashStore>();
  RpcOptions quick;
  quick.initTimeout = 300ms;
  std::string missing = messageOf([&] { RpcAgent::create(store, "alone", 0, 2, quick); });
  EXPECT_NE(missing.find("worker(s) 1 did not publish themselves within 300 ms"), std::string::npos)
      << missing;
  EXPECT_THROW(RpcAgent::create(store, "w", 2, 2), InvalidArgument);

  auto dupStore = std::make_shared<HashStore>();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      errors[rank] = messageOf([&] { RpcAgent::create(dupStore, "same", rank, 2, quick); });
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    EXPECT_NE(e.find("workers 0 and 1 are both named 'same'"), std::string::npos) << e;
  }
}

TEST(RpcWireTest, FramesRoundTripInPiecesAndMalformedBytesAreRefused) {
  Frame frame;
  frame.kind = FrameKind::Request;
  frame.id = 77;
  frame.name = "f";
  frame.payload = "xyz";
  frame.tensors = {floats({1, 2, 3}), Tensor::empty({0}, ScalarType::Int64)};
  std::string bytes = encodeHead(frame);
  bytes.append(static_cast<const char*>(frame.tensors[0].data()), frame.tensors[0].nbytes());
  // Fed one byte at a time, the reader still reassembles exactly one frame.
  FrameReader reader;
  std::optional<Frame> out;
  for (char byte : bytes) {
    auto [where, want] = reader.want();
    ASSERT_GE(want, 1u);
    *where = byte;
    auto done = reader.filled(1);
    if (done) {
      EXPECT_FALSE(out.has_value());
      out = std::move(done);
    }
  }
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->id, 77u);
  EXPECT_EQ(out->name, "f");
  EXPECT_EQ(out->payload, "xyz");
  ASSERT_EQ(out->tensors.size(), 2u);
  EXPECT_EQ(out->tensors[0].data<float>()[2], 3.0f);
  EXPECT_EQ(out->tensors[1].numel(), 0);

  auto feed = [](std::string data) {
    FrameReader r;
    size_t at = 0;
    while (at < data.size()) {
      auto [where, want] = r.want();
      size_t n = std::min(want, data.size() - at);
      std::memcpy(where, data.data() + at, n);
      at += n;
      r.filled(n);
    }
  };
  EXPECT_THROW(feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), InvalidArgument);
  std::string hugeMeta = bytes.substr(0, kHeaderBytes);
  hugeMeta[16] = hugeMeta[17] = hugeMeta[18] = hugeMeta[19] = '\xff';
  EXPECT_THROW(feed(hugeMeta), InvalidArgument);
  std::string badMeta = bytes;
  badMeta[kHeaderBytes] = '\xc1';  // a byte msgpack never uses
  EXPECT_THROW(feed(badMeta), InvalidArgument);
  // A frame announcing 2^39 x 2^39 floats is refused before anything is allocated.
  Frame huge;
  huge.kind = FrameKind::Request;
  huge.tensors = {Tensor::fromBlob(nullptr, ScalarType::Float32, {0})};
  std::string hugeHead = encodeHead(huge);
  std::string patched = hugeHead;
  // The table's only entry ends with the sizes array [0] (0x91 0x00): make it [2^39, 2^39].
  size_t at = patched.rfind(std::string("\x91\x00", 2));
  ASSERT_NE(at, std::string::npos);
  std::string bigSize = "\xcf" + std::string("\x00\x00\x00\x80\x00\x00\x00\x00", 8);
  patched.replace(at, 2, "\x92" + bigSize + bigSize);
  uint32_t metaBytes = static_cast<uint32_t>(patched.size() - kHeaderBytes);
  for (int i = 0; i < 4; ++i) patched[16 + i] = static_cast<char>(metaBytes >> (8 * i));
  std::string limit = messageOf([&] { feed(patched); });
  EXPECT_NE(limit.find("over the limit of"), std::string::npos) << limit;
}

// Two agents on threads, "a" (rank 0) and "b" (rank 1), and b's address.
std::pair<std::vector<std::shared_ptr<RpcAgent>>, std::string> startPairWithAddress() {
  auto store = std::make_shared<HashStore>();
  std::vector<std::shared_ptr<RpcAgent>> agents(2);
  std::thread t0([&] { agents[0] = RpcAgent::create(store, "a", 0, 2); });
  std::thread t1([&] { agents[1] = RpcAgent::create(store, "b", 1, 2); });
  t0.join();
  t1.join();
  return {agents, toString(store->get("rpc/address/1", 5s))};
}

// A TCP connection to an agent's "host:port", reads timing out after 5 s; -1 on failure.
int connectTo(const std::string& address) {
  size_t colon = address.rfind(':');
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &target.sin_addr);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(RpcTest, GarbageOnTheListeningPortDropsOnlyThatConnection) {
  auto [agents, address] = startPairWithAddress();
  agents[1]->registerFunction("ping", [] { return std::string("pong"); });
  int fd = connectTo(address);
  ASSERT_GE(fd, 0);
  std::string garbage(4096, '\x5a');
  ASSERT_GT(::write(fd, garbage.data(), garbage.size()), 0);
  char buffer[16];
  EXPECT_EQ(::read(fd, buffer, sizeof(buffer)), 0);  // the agent closed it
  ::close(fd);
  EXPECT_EQ(agents[0]->rpcSync<std::string>("b", "ping"), "pong");
  shutdownAll(agents);
}

// A connection claiming a worker id outside the world is refused at its Hello (it used to be
// accepted, and its loss then read past the agent's table of names).
TEST(RpcTest, AHelloNamingAWorkerOutsideTheWorldIsRefused) {
  ::testing::internal::CaptureStderr();  // before any socket, as in RpcLendingTest below
  auto [agents, address] = startPairWithAddress();
  agents[1]->registerFunction("ping", [] { return std::string("pong"); });
  for (uint64_t claimed : {uint64_t{2}, uint64_t{7}, uint64_t{1} << 40}) {
    int fd = connectTo(address);
    ASSERT_GE(fd, 0);
    Frame hello;
    hello.kind = FrameKind::Hello;
    hello.id = claimed;
    std::string bytes = encodeHead(hello);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    char buffer[16];
    EXPECT_EQ(::read(fd, buffer, sizeof(buffer)), 0) << "a Hello from worker " << claimed;
    ::close(fd);
  }
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("rpc: a Hello names worker 7 (workers are 0 to 1; this is 1)"),
            std::string::npos)
      << log;
  EXPECT_EQ(agents[0]->rpcSync<std::string>("b", "ping"), "pong");
  shutdownAll(agents);
}

// A worker written by hand on a socket, to say on the wire what an agent never would. It
// introduces itself as worker id (no token).
class RawWorker {
 public:
  RawWorker(const std::string& address, int id) : fd_(connectTo(address)) {
    Frame hello;
    hello.kind = FrameKind::Hello;
    hello.id = static_cast<uint64_t>(id);
    send(hello);
    std::optional<Frame> reply = next();
    EXPECT_TRUE(reply && reply->kind == FrameKind::Hello) << "the agent's Hello";
  }
  ~RawWorker() { ::close(fd_); }
  RawWorker(const RawWorker&) = delete;
  RawWorker& operator=(const RawWorker&) = delete;

  // frame's head, then the bytes of the tensors it does not lend under loan, with a seal that
  // holds the loan's id unless sealHolds is false.
  void send(const Frame& frame, uint64_t loan = 0, bool sealHolds = true) {
    seal_ = sealHolds ? loan : 0;
    std::string bytes = encodeHead(frame, loan, reinterpret_cast<uintptr_t>(&seal_));
    for (const Tensor& t : frame.tensors) {
      if (loan == 0 || !lendable(t)) bytes.append(static_cast<const char*>(t.data()), t.nbytes());
    }
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  // What a Proof's address must hold for the agent that sent challenge on this connection: the
  // challenge, then "agent's address|this end's address".
  std::array<char, detail::kProofWordBytes> proofWordFor(const std::string& challenge) const {
    std::array<char, detail::kProofWordBytes> word{};
    std::memcpy(word.data(), challenge.data(), auth::kNonceBytes);
    auto name = [&](bool peer) {
      sockaddr_in address{};
      socklen_t length = sizeof address;
      peer ? ::getpeername(fd_, reinterpret_cast<sockaddr*>(&address), &length)
           : ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
      char host[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &address.sin_addr, host, sizeof host);
      return std::string(host) + ":" + std::to_string(ntohs(address.sin_port));
    };
    const std::string names = name(true) + "|" + name(false);
    std::memcpy(word.data() + auth::kNonceBytes, names.data(), names.size());
    return word;
  }

  // The agent's next frame; nullopt once it closed the connection (or after 5 s of silence,
  // which fails the test).
  std::optional<Frame> next() {
    while (true) {
      auto [where, want] = reader_.want();
      ssize_t n = ::recv(fd_, where, want, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return std::nullopt;
      if (n < 0) {
        ADD_FAILURE() << "no frame from the agent within 5 s (errno " << errno << ")";
        return std::nullopt;
      }
      if (auto frame = reader_.filled(static_cast<size_t>(n))) return frame;
    }
  }

 private:
  int fd_;
  FrameReader reader_;
  uint64_t seal_ = 0;  // read by the agent after it copies what was lent
};

// Lending from the wire's side: a peer may lend only after it proved, with the agent's challenge
// in its memory, that the agent can read it; a lie ends its connection with the reason logged,
// and the agent serves its other peers throughout. The test plays worker 0 by hand (through the
// store and RawWorker); agents "b" and "c" are workers 1 and 2.
TEST(RpcLendingTest, OnlyAPeerThatProvedItsMemoryLendsAndALieEndsOnlyItsConnection) {
  // Before any socket: the capture's own descriptors must not reuse a number the agents' loop
  // threads closed, which ThreadSanitizer reports as a race on that descriptor.
  ::testing::internal::CaptureStderr();
  auto store = std::make_shared<HashStore>();
  store->set("rpc/name/0", toBytes("raw"));
  std::vector<std::shared_ptr<RpcAgent>> agents(2);
  auto sum = [](const Tensor& t) {
    double total = 0;
    for (int64_t i = 0; i < t.numel(); ++i) total += t.data<float>()[i];
    return total;
  };
  std::vector<std::thread> creating;
  for (int rank : {1, 2}) {
    creating.emplace_back([&, rank] {
      agents[rank - 1] = RpcAgent::create(store, rank == 1 ? "b" : "c", rank, 3, {},
                                          [&](RpcAgent& a) { a.registerFunction("sum", sum); });
    });
  }
  const std::string addressOfB = toString(store->get("rpc/address/1", 5s));
  {
    // Worker 0 connects to both, as the lower id does, and joins the set-up barrier.
    RawWorker toB(addressOfB, 0);
    RawWorker toC(toString(store->get("rpc/address/2", 5s)), 0);
    if (store->add("rpc/ready", 1) == 3) store->set("rpc/ready/all", toBytes("1"));
    for (auto& t : creating) t.join();
  }
  ASSERT_TRUE(agents[0] && agents[1]);

  const int64_t count = kLendBytes / sizeof(float) + 10;
  Tensor ones = Tensor::empty({count}, ScalarType::Float32);
  std::fill_n(ones.data<float>(), count, 1.0f);
  auto sumOf = [](Tensor t, uint64_t id) {
    Packed arguments = pack(std::make_tuple(t));
    Frame request;
    request.kind = FrameKind::Request;
    request.id = id;
    request.name = "sum";
    request.payload = std::move(arguments.bytes);
    request.tensors = std::move(arguments.tensors);
    return request;
  };
  auto proofOf = [](const void* word) {
    Frame proof;
    proof.kind = FrameKind::Proof;
    proof.id = static_cast<uint64_t>(::getpid());
    proof.payload = u64Bytes(reinterpret_cast<uintptr_t>(word));
    return proof;
  };
  {
    // Lends with no Proof at all.
    RawWorker raw(addressOfB, 0);
    std::optional<Frame> probe = raw.next();
    ASSERT_TRUE(probe && probe->kind == FrameKind::Probe);
    raw.send(sumOf(ones, 1), 1);
    EXPECT_FALSE(raw.next().has_value()) << "the agent took a loan it never invited";
  }
  // A Proof pointing at the word falseWord makes from the challenge: no Lend comes, and a loan
  // after it is refused.
  auto falseProofIsRefused = [&](const auto& falseWord, uint64_t loan, const char* what) {
    RawWorker raw(addressOfB, 0);
    std::optional<Frame> probe = raw.next();
    ASSERT_TRUE(probe && probe->kind == FrameKind::Probe);
    const auto word = falseWord(raw, probe->payload);
    raw.send(proofOf(word.data()));
    raw.send(sumOf(ones, loan), loan);
    std::optional<Frame> after = raw.next();
    EXPECT_FALSE(after.has_value())
        << "the agent answered " << what << " with frame kind " << int(after->kind);
  };
  // Memory that does not hold the challenge.
  falseProofIsRefused([](RawWorker&, const std::string&) { return auth::Nonce{}; }, 2,
                      "a false Proof");
  // The challenge, but another connection's name, as a Proof relayed from one would hold.
  falseProofIsRefused(
      [](RawWorker& raw, const std::string& challenge) {
        auto relayed = raw.proofWordFor(challenge);
        relayed[auth::kNonceBytes] ^= 1;
        return relayed;
      },
      3, "a relayed Proof");
  {
    // Invites loans it never proved it could take: the connection ends.
    RawWorker raw(addressOfB, 0);
    ASSERT_TRUE(raw.next().has_value());  // the Probe
    raw.send(detail::controlFrame(FrameKind::Lend, 0));
    EXPECT_FALSE(raw.next().has_value()) << "the agent took an unasked-for Lend";
  }
  // A connection that proved itself truly: the agent invites its loans.
  auto proven = [&]() -> std::unique_ptr<RawWorker> {
    auto raw = std::make_unique<RawWorker>(addressOfB, 0);
    std::optional<Frame> probe = raw->next();
    if (!probe || probe->kind != FrameKind::Probe) return nullptr;
    const auto word = raw->proofWordFor(probe->payload);
    raw->send(proofOf(word.data()));
    std::optional<Frame> lend = raw->next();
    if (!lend || lend->kind != FrameKind::Lend) return nullptr;
    return raw;
  };
  {
    // A loan whose seal no longer holds its id (as after the lender let go): refused.
    auto raw = proven();
    ASSERT_TRUE(raw) << "no Lend for a true Proof";
    raw->send(sumOf(ones, 40), 4, /*sealHolds=*/false);
    EXPECT_FALSE(raw->next().has_value()) << "the agent used a loan that had ended";
  }
  {
    // Copies the lent tensor, returns the loan, answers.
    auto owned = proven();
    ASSERT_TRUE(owned) << "no Lend for a true Proof";
    RawWorker& raw = *owned;
    raw.send(sumOf(ones, 41), 5);
    std::optional<Frame> returned = raw.next();
    ASSERT_TRUE(returned && returned->kind == FrameKind::Returned);
    EXPECT_EQ(returned->id, 5u);
    std::optional<Frame> response = raw.next();
    ASSERT_TRUE(response && response->kind == FrameKind::Response);
    EXPECT_EQ(response->id, 41u);
    EXPECT_EQ(unpack<double>(response->payload, response->tensors, [] { return "sum"; }),
              static_cast<double>(count));
    // Then lends memory it does not have.
    Tensor nowhere =
        Tensor::fromBlob(reinterpret_cast<void*>(uintptr_t{4096}), ScalarType::Float32, {count});
    raw.send(sumOf(nowhere, 42), 6);
    EXPECT_FALSE(raw.next().has_value()) << "the agent kept a connection whose loan failed";
  }
  EXPECT_EQ(agents[1]->rpcSync<double>("b", "sum", ones), static_cast<double>(count));
  std::string log = ::testing::internal::GetCapturedStderr();
  for (const std::string& expected : std::vector<std::string>{
           "worker 0 lent tensors but was never invited to",
           "copying a lent tensor of " + std::to_string(count * 4) +
               " bytes from worker 0's memory failed: process_vm_readv",
           std::string("Bad address"), "rpc: a Lend for a Proof this worker never sent",
           "copying the tensors worker 0 lent failed: the loan had ended"}) {
    EXPECT_NE(log.find(expected), std::string::npos) << expected << " in:\n" << log;
  }
  // The loans with no Proof, after a false one and after a relayed one were refused.
  size_t refusals = 0;
  const std::string refused =
      "lost the connection to worker 'raw' (id 0): malformed frame: rpc: "
      "worker 0 lent tensors but was never invited to";
  for (size_t at = log.find(refused); at != std::string::npos; at = log.find(refused, at + 1)) {
    ++refusals;
  }
  EXPECT_EQ(refusals, 3u) << log;
  for (auto& agent : agents) agent->shutdown(false);
}

// Creates workers "a" (rank 0, connects) and "b" (rank 1, accepts) with their own tokens;
// returns each one's error, or "" for a worker that came up; a refusal by the other side (a
// RemoteError) reads "RemoteError: ...".
std::array<std::string, 2> createWithTokens(std::optional<std::string> tokenA,
                                            std::optional<std::string> tokenB) {
  auto store = std::make_shared<HashStore>();
  std::array<std::optional<std::string>, 2> tokens{tokenA, tokenB};
  std::array<std::string, 2> errors;
  std::array<std::shared_ptr<RpcAgent>, 2> agents;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      RpcOptions options;
      options.initTimeout = 2s;
      options.authToken = tokens[rank];
      try {
        agents[rank] = RpcAgent::create(store, rank == 0 ? "a" : "b", rank, 2, options);
      } catch (const RemoteError& e) {
        errors[rank] = std::string("RemoteError: ") + e.what();
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (agents[0] && agents[1]) {
    agents[1]->registerFunction("ping", [] { return std::string("pong"); });
    if (agents[0]->rpcSync<std::string>("b", "ping") != "pong") errors[0] = "wrong answer";
  }
  for (auto& agent : agents) {
    if (agent) agent->shutdown(false);
  }
  return errors;
}

TEST(RpcAuthTest, WorkersWithTheSameTokenConnect) {
  ::unsetenv("C10D_AUTH_TOKEN");
  auto errors = createWithTokens("shared", "shared");
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  RpcOptions options;
  options.authToken = "shared";
  auto agents = startWorkers(3, options);
  agents[2]->registerFunction("add", [](int x, int y) { return x + y; });
  EXPECT_EQ(agents[0]->rpcSync<int>("worker2", "add", 2, 3), 5);
  EXPECT_EQ(agents[1]->rpcSync<int>("worker2", "add", 4, 3), 7);
  shutdownAll(agents);
}

TEST(RpcAuthTest, AWrongTokenIsRefusedAndLoggedOnBothSides) {
  ::unsetenv("C10D_AUTH_TOKEN");
  ::testing::internal::CaptureStderr();
  auto errors = createWithTokens("mine", "theirs");
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(errors[0].rfind("RemoteError: ", 0), 0u) << errors[0];
  EXPECT_NE(errors[0].find("proved a different authentication token"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("no connection from worker(s) 0"), std::string::npos) << errors[1];
  EXPECT_NE(log.find("refused a connection claiming to be worker 0: wrong authentication token"),
            std::string::npos)
      << log;
}

TEST(RpcAuthTest, AMissingTokenIsRefusedEitherWay) {
  ::unsetenv("C10D_AUTH_TOKEN");
  ::testing::internal::CaptureStderr();
  auto errors = createWithTokens(std::nullopt, "theirs");
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(errors[0].rfind("RemoteError: ", 0), 0u) << errors[0];
  EXPECT_NE(errors[0].find("worker 1 requires authentication: set C10D_AUTH_TOKEN"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(log.find("left without authenticating"), std::string::npos) << log;

  errors = createWithTokens("mine", std::nullopt);
  EXPECT_EQ(errors[0].rfind("RemoteError: ", 0), 0u) << errors[0];
  EXPECT_NE(errors[0].find("worker 1 does not authenticate"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace c10d::inline v1::rpc
