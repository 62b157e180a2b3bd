// One behaviour suite for the Store interface, instantiated for every store in the library.
// Each fixture hands out handles onto one shared store, the way distinct ranks (or threads)
// see it: writes through one handle must be visible through the others.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "c10d/core/Exception.hpp"
#include "store/CountingStore.hpp"
#include "store/FileStore.hpp"
#include "store/HashStore.hpp"
#include "store/PrefixStore.hpp"
#include "store/PyTorchTCPStore.hpp"
#include "store/TCPStore.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;
using Bytes = Store::Bytes;

class StoreFactory {
 public:
  virtual ~StoreFactory() = default;
  // A new handle onto this factory's store; the first call creates the store.
  virtual std::shared_ptr<Store> open() = 0;
};

class HashStoreFactory : public StoreFactory {
 public:
  std::shared_ptr<Store> open() override { return store_; }

 private:
  std::shared_ptr<Store> store_ = std::make_shared<HashStore>();
};

class FileStoreFactory : public StoreFactory {
 public:
  FileStoreFactory() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("c10d_store_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  }
  ~FileStoreFactory() override { std::filesystem::remove(path_); }
  std::shared_ptr<Store> open() override { return std::make_shared<FileStore>(path_.string()); }

 private:
  std::filesystem::path path_;
};

class PrefixStoreFactory : public StoreFactory {
 public:
  std::shared_ptr<Store> open() override { return std::make_shared<PrefixStore>("group0", base_); }

 private:
  std::shared_ptr<Store> base_ = std::make_shared<HashStore>();
};

class TCPStoreFactory : public StoreFactory {
 public:
  std::shared_ptr<Store> open() override {
    if (!server_) {
      server_ = std::make_shared<TCPStore>(
          "127.0.0.1", 0, TCPStoreOptions{.isServer = true, .listenAddress = "127.0.0.1"});
      return server_;
    }
    return std::make_shared<TCPStore>("127.0.0.1", server_->port());
  }

 private:
  std::shared_ptr<TCPStore> server_;
};

// Counting in front of a TCPStore: the counts change nothing a caller sees.
class CountingStoreFactory : public StoreFactory {
 public:
  std::shared_ptr<Store> open() override { return std::make_shared<CountingStore>(tcp_.open()); }

 private:
  TCPStoreFactory tcp_;
};

// Our server's PyTorch dialect, through our client of PyTorch's server speaking each protocol:
// what torch.distributed programs see under c10drun.
class PyTorchClientFactory : public StoreFactory {
 public:
  explicit PyTorchClientFactory(PyTorchTCPStore::Protocol protocol) : protocol_(protocol) {}
  std::shared_ptr<Store> open() override {
    return std::make_shared<PyTorchTCPStore>("127.0.0.1", server_.port(), Store::kDefaultTimeout,
                                             protocol_);
  }

 private:
  TCPStoreServer server_{TCPStoreServerOptions{.listenAddress = "127.0.0.1"}};
  PyTorchTCPStore::Protocol protocol_;
};

struct StoreKind {
  std::string name;
  std::function<std::unique_ptr<StoreFactory>()> make;
  // PyTorch's protocol has no error answer: the server closes the connection instead, so the
  // client sees StoreError (on the call, or the next one for a request that is not answered).
  bool answersErrors = true;
};

void PrintTo(const StoreKind& kind, std::ostream* out) {
  *out << kind.name;
}

class StoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    factory_ = GetParam().make();
    store_ = factory_->open();
  }
  std::shared_ptr<Store> other() { return factory_->open(); }

  std::unique_ptr<StoreFactory> factory_;
  std::shared_ptr<Store> store_;
};

std::string messageOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST_P(StoreTest, SetThenGetThroughAnotherHandle) {
  store_->setString("alpha", "one");
  EXPECT_EQ(other()->getString("alpha"), "one");
  store_->setString("alpha", "two");  // overwrite
  EXPECT_EQ(other()->getString("alpha"), "two");
}

TEST_P(StoreTest, BinaryAndEmptyValuesSurvive) {
  Bytes all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  store_->set("bytes", all);
  store_->set("empty", {});
  auto reader = other();
  EXPECT_EQ(reader->get("bytes"), all);
  EXPECT_EQ(reader->get("empty"), Bytes{});
  Bytes big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  store_->set("big", big);
  EXPECT_EQ(reader->get("big"), big);
}

TEST_P(StoreTest, GetWaitsForALaterSet) {
  auto writer = other();
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    writer->setString("late", "here");
  });
  EXPECT_EQ(store_->get("late", 10s), toBytes("here"));
  later.join();
}

TEST_P(StoreTest, GetTimesOutNamingTheKey) {
  auto start = std::chrono::steady_clock::now();
  std::string message = messageOf([&] { store_->get("never-set", 100ms); });
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_NE(message.find("never-set"), std::string::npos) << message;
  EXPECT_GE(elapsed, 100ms);
  EXPECT_LT(elapsed, 5s);
  EXPECT_THROW(store_->get("never-set", 50ms), TimeoutError);
}

TEST_P(StoreTest, AddCountsFromZeroAndSharesTheCounter) {
  EXPECT_EQ(store_->add("counter", 5), 5);
  EXPECT_EQ(other()->add("counter", -7), -2);
  EXPECT_EQ(store_->getString("counter"), "-2");
  store_->setString("preset", "40");
  EXPECT_EQ(store_->add("preset", 2), 42);
}

TEST_P(StoreTest, AddOnNonIntegerFails) {
  store_->setString("text", "hello");
  std::string message = messageOf([&] { store_->add("text", 1); });
  EXPECT_NE(message.find("text"), std::string::npos) << message;
  EXPECT_THROW(store_->add("text", 1), StoreError);
  EXPECT_EQ(store_->getString("text"), "hello");
}

TEST_P(StoreTest, AddOverflowFailsAndKeepsTheValue) {
  store_->add("big", INT64_MAX - 1);
  if (!GetParam().answersErrors) {
    std::string message = messageOf([&] { store_->add("big", 2); });
    EXPECT_NE(message.find("refused the request"), std::string::npos) << message;
    EXPECT_THROW(store_->add("big", 2), StoreError);
    EXPECT_EQ(store_->add("big", 0), INT64_MAX - 1);  // a new connection, the value kept
    return;
  }
  std::string message = messageOf([&] { store_->add("big", 2); });
  EXPECT_NE(message.find("overflows int64"), std::string::npos) << message;
  // The same misuse is the same type on every store (TCPStore used to say StoreError).
  EXPECT_THROW(store_->add("big", 2), InvalidArgument);
  EXPECT_EQ(store_->add("big", 0), INT64_MAX - 1);
}

TEST_P(StoreTest, AppendPastTheValueLimitFailsAndKeepsTheValue) {
  Bytes almost(Store::kMaxValueBytes - 1, 'a');
  store_->append("log", almost);
  if (!GetParam().answersErrors) {
    // Refused by the client where it knows the size (v1's compare-and-set), else by the server,
    // which closes: then the next call fails.
    EXPECT_THROW(
        {
          store_->append("log", toBytes("bc"));
          store_->check({"log"});
        },
        Error);
    store_->append("log", toBytes("b"));
    EXPECT_EQ(store_->get("log").size(), Store::kMaxValueBytes);
    return;
  }
  std::string message = messageOf([&] { other()->append("log", toBytes("bc")); });
  EXPECT_NE(message.find("log"), std::string::npos) << message;
  EXPECT_THROW(store_->append("log", toBytes("bc")), InvalidArgument);
  store_->append("log", toBytes("b"));  // exactly at the limit
  EXPECT_EQ(store_->get("log").size(), Store::kMaxValueBytes);
}

TEST_P(StoreTest, ConcurrentAddsFromManyHandlesAreAtomic) {
  constexpr int kThreads = 4, kAdds = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, handle = other()] {
      for (int i = 0; i < kAdds; ++i) handle->add("shared", 1);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(store_->add("shared", 0), kThreads * kAdds);
}

TEST_P(StoreTest, CompareSetFollowsPyTorchSemantics) {
  // Absent key, empty expected: set.
  EXPECT_EQ(store_->compareSet("cas", {}, toBytes("v1")), toBytes("v1"));
  // Present, expected matches: swap.
  EXPECT_EQ(store_->compareSet("cas", toBytes("v1"), toBytes("v2")), toBytes("v2"));
  // Present, expected differs: unchanged, current value returned.
  EXPECT_EQ(store_->compareSet("cas", toBytes("nope"), toBytes("v3")), toBytes("v2"));
  EXPECT_EQ(store_->getString("cas"), "v2");
  // Absent key, non-empty expected: nothing set, expected returned.
  EXPECT_EQ(store_->compareSet("absent", toBytes("x"), toBytes("y")), toBytes("x"));
  EXPECT_FALSE(store_->check({"absent"}));
}

TEST_P(StoreTest, DeleteKeyReportsExistence) {
  store_->setString("doomed", "x");
  EXPECT_TRUE(store_->deleteKey("doomed"));
  EXPECT_FALSE(store_->deleteKey("doomed"));
  EXPECT_FALSE(store_->check({"doomed"}));
  EXPECT_THROW(store_->get("doomed", 50ms), TimeoutError);
}

TEST_P(StoreTest, CheckDoesNotWait) {
  store_->setString("a", "1");
  EXPECT_TRUE(store_->check({"a"}));
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(store_->check({"a", "b"}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

TEST_P(StoreTest, WaitReturnsWhenAllKeysExist) {
  auto writer = other();
  std::thread later([&] {
    writer->setString("w1", "x");
    std::this_thread::sleep_for(30ms);
    writer->setString("w2", "y");
  });
  store_->wait({"w1", "w2"}, 10s);
  EXPECT_TRUE(store_->check({"w1", "w2"}));
  later.join();
}

TEST_P(StoreTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  store_->setString("present", "1");
  std::string message = messageOf([&] { store_->wait({"present", "missing"}, 100ms); });
  // A PrefixStore reports the full key ('group0/missing'), which says where to look.
  EXPECT_NE(message.find("missing'"), std::string::npos) << message;
  EXPECT_EQ(message.find("present'"), std::string::npos) << message;
  EXPECT_THROW(store_->wait({"missing"}, 50ms), TimeoutError);
}

TEST_P(StoreTest, NumKeysCountsLiveKeys) {
  int64_t before = store_->numKeys();
  store_->setString("n1", "x");
  store_->setString("n2", "x");
  store_->add("n3", 1);
  EXPECT_EQ(store_->numKeys(), before + 3);
  store_->deleteKey("n2");
  EXPECT_EQ(other()->numKeys(), before + 2);
}

TEST_P(StoreTest, MultiSetAndMultiGet) {
  store_->multiSet({"m1", "m2", "m3"}, {toBytes("a"), {}, toBytes("ccc")});
  auto values = other()->multiGet({"m3", "m1", "m2"});
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0], toBytes("ccc"));
  EXPECT_EQ(values[1], toBytes("a"));
  EXPECT_EQ(values[2], Bytes{});
  EXPECT_THROW(store_->multiSet({"x", "y"}, {toBytes("1")}), InvalidArgument);
  EXPECT_THROW(store_->multiGet({"m1", "not-there"}, 50ms), TimeoutError);
}

// A program can tell which key an error is about without reading the message (under a
// PrefixStore the field holds the key as the store underneath saw it).
TEST_P(StoreTest, ErrorsCarryTheirKeyAsAField) {
  store_->setString("m1", "here");
  try {
    store_->multiGet({"m1", "not-there"}, 50ms);
    ADD_FAILURE() << "multiGet of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(e.context().key.find("not-there"), std::string::npos) << e.context().key;
    EXPECT_EQ(e.context().op.rfind("store ", 0), 0u) << e.context().op;
  }
  try {
    store_->set("huge", Bytes(Store::kMaxValueBytes + 1));
    ADD_FAILURE() << "an oversized value was stored";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(e.context().key.find("huge"), std::string::npos) << e.context().key;
  }
}

TEST_P(StoreTest, AppendCreatesThenExtends) {
  store_->append("log", toBytes("ab"));
  other()->append("log", toBytes("cd"));
  EXPECT_EQ(store_->getString("log"), "abcd");
}

TEST_P(StoreTest, LimitsAreEnforcedBeforeStoring) {
  EXPECT_THROW(store_->setString("", "x"), InvalidArgument);
  std::string longKey(Store::kMaxKeyBytes + 1, 'k');
  std::string message = messageOf([&] { store_->setString(longKey, "x"); });
  EXPECT_NE(message.find("over the limit"), std::string::npos) << message;
  EXPECT_THROW(store_->get(longKey, 50ms), InvalidArgument);
  Bytes huge(Store::kMaxValueBytes + 1);
  EXPECT_THROW(store_->set("huge", huge), InvalidArgument);
  EXPECT_FALSE(store_->check({"huge"}));
  std::string maxKey(Store::kMaxKeyBytes - 64, 'q');  // room for a prefix
  store_->setString(maxKey, "fits");
  EXPECT_EQ(other()->getString(maxKey), "fits");
}

TEST_P(StoreTest, TimeoutsMustBePositive) {
  EXPECT_THROW(store_->setTimeout(0ms), InvalidArgument);
  EXPECT_THROW(store_->wait({"k"}, 0ms), InvalidArgument);
  EXPECT_THROW(store_->get("k", -1ms), InvalidArgument);
  store_->setTimeout(100ms);
  EXPECT_EQ(store_->timeout(), 100ms);
  EXPECT_THROW(store_->get("never"), TimeoutError);  // uses the store's default timeout
}

// Every store, and the ones with queues (PyTorch's v1 protocol has none: tested below).
const StoreKind kHashStore{"HashStore", [] { return std::make_unique<HashStoreFactory>(); }};
const StoreKind kFileStore{"FileStore", [] { return std::make_unique<FileStoreFactory>(); }};
const StoreKind kPrefixStore{"PrefixStore", [] { return std::make_unique<PrefixStoreFactory>(); }};
const StoreKind kTCPStore{"TCPStore", [] { return std::make_unique<TCPStoreFactory>(); }};
const StoreKind kCountingStore{"CountingStore",
                               [] { return std::make_unique<CountingStoreFactory>(); }};
const StoreKind kPyTorchV1{
    "PyTorchV1Client",
    [] { return std::make_unique<PyTorchClientFactory>(PyTorchTCPStore::Protocol::V1); },
    /*answersErrors=*/false};
const StoreKind kPyTorchV2{
    "PyTorchV2Client",
    [] { return std::make_unique<PyTorchClientFactory>(PyTorchTCPStore::Protocol::V2); },
    /*answersErrors=*/false};

std::string kindName(const ::testing::TestParamInfo<StoreKind>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreTest,
                         ::testing::Values(kHashStore, kFileStore, kPrefixStore, kTCPStore,
                                           kCountingStore, kPyTorchV1, kPyTorchV2),
                         kindName);

// Queues, on every store that has them.
class QueueTest : public StoreTest {};

TEST_P(QueueTest, PushPopIsFirstInFirstOutAcrossHandles) {
  auto reader = other();
  EXPECT_EQ(reader->queueLen("jobs"), 0);
  EXPECT_EQ(reader->tryQueuePop("jobs"), std::nullopt);
  store_->queuePush("jobs", toBytes("first"));
  store_->queuePush("jobs", {});  // an empty value is a value
  store_->queuePush("jobs", toBytes("third"));
  EXPECT_EQ(reader->queueLen("jobs"), 3);
  EXPECT_EQ(reader->queuePop("jobs", 5s), toBytes("first"));
  EXPECT_EQ(reader->tryQueuePop("jobs"), std::optional<Bytes>(Bytes{}));
  EXPECT_EQ(store_->queuePop("jobs"), toBytes("third"));
  EXPECT_EQ(store_->queueLen("jobs"), 0);
  EXPECT_EQ(store_->tryQueuePop("jobs"), std::nullopt);
}

TEST_P(QueueTest, AQueueIsApartFromTheKeysValue) {
  const int64_t keysBefore = store_->numKeys();
  store_->queuePush("q", toBytes("queued"));
  if (GetParam().answersErrors) {
    EXPECT_FALSE(store_->check({"q"}));  // no value at "q"
  } else {
    EXPECT_TRUE(store_->check({"q"}));  // PyTorch's check counts a queue, as its server does
  }
  EXPECT_EQ(store_->numKeys(), keysBefore);
  store_->setString("q", "value");
  EXPECT_EQ(store_->queueLen("q"), 1);
  EXPECT_EQ(store_->queuePop("q"), toBytes("queued"));
  EXPECT_EQ(store_->getString("q"), "value");
  EXPECT_TRUE(store_->deleteKey("q"));
  store_->queuePush("q", toBytes("again"));
  EXPECT_FALSE(store_->deleteKey("q"));  // a queue is not a key to delete
  EXPECT_EQ(store_->queueLen("q"), 1);
}

TEST_P(QueueTest, PopWaitsForALaterPush) {
  auto writer = other();
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    writer->queuePush("late", toBytes("here"));
  });
  EXPECT_EQ(store_->queuePop("late", 10s), toBytes("here"));
  later.join();
}

TEST_P(QueueTest, PopTimesOutNamingTheQueue) {
  const auto start = std::chrono::steady_clock::now();
  try {
    store_->queuePop("empty-queue", 100ms);
    ADD_FAILURE() << "queuePop of an empty queue returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("empty-queue"), std::string::npos) << e.what();
    EXPECT_EQ(e.context().key,
              GetParam().name == "PrefixStore" ? "group0/empty-queue" : "empty-queue");
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  EXPECT_THROW(store_->queuePop("empty-queue", 0ms), InvalidArgument);
  // The store is still usable after a timed-out pop (a PyTorch client reconnects).
  store_->queuePush("empty-queue", toBytes("now"));
  EXPECT_EQ(other()->queuePop("empty-queue", 5s), toBytes("now"));
}

TEST_P(QueueTest, ConcurrentPoppersTakeEachValueOnce) {
  constexpr int kValues = 200;
  constexpr int kPoppers = 4;
  std::vector<std::vector<int>> taken(kPoppers);
  std::vector<std::thread> poppers;
  for (int p = 0; p < kPoppers; ++p) {
    poppers.emplace_back([&, p, handle = other()] {
      for (int i = 0; i < kValues / kPoppers; ++i) {
        taken[p].push_back(std::stoi(toString(handle->queuePop("work", 30s))));
      }
    });
  }
  for (int i = 0; i < kValues; ++i) store_->queuePush("work", toBytes(std::to_string(i)));
  for (auto& t : poppers) t.join();
  std::vector<int> all;
  for (const auto& each : taken) {
    EXPECT_TRUE(std::is_sorted(each.begin(), each.end()));  // one popper sees them in order
    all.insert(all.end(), each.begin(), each.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int> expected(kValues);
  for (int i = 0; i < kValues; ++i) expected[i] = i;
  EXPECT_EQ(all, expected);
  EXPECT_EQ(store_->queueLen("work"), 0);
}

TEST_P(QueueTest, LimitsAreEnforcedBeforeQueueing) {
  EXPECT_THROW(store_->queuePush("", toBytes("x")), InvalidArgument);
  EXPECT_THROW(store_->queuePush("big", Bytes(Store::kMaxValueBytes + 1)), InvalidArgument);
  EXPECT_EQ(store_->queueLen("big"), 0);
  EXPECT_THROW(store_->queueLen(""), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(StoresWithQueues, QueueTest,
                         ::testing::Values(kHashStore, kFileStore, kPrefixStore, kTCPStore,
                                           kCountingStore, kPyTorchV2),
                         kindName);

TEST(QueueRefusalTest, PyTorchsV1ProtocolHasNoQueuesAndSaysSo) {
  TCPStoreServer server{TCPStoreServerOptions{.listenAddress = "127.0.0.1"}};
  PyTorchTCPStore v1("127.0.0.1", server.port(), Store::kDefaultTimeout,
                     PyTorchTCPStore::Protocol::V1);
  try {
    v1.queuePush("q", toBytes("x"));
    ADD_FAILURE() << "queuePush over v1 returned";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("v1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'q'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(v1.queueLen("q"), StoreError);
  EXPECT_THROW(v1.tryQueuePop("q"), StoreError);
  v1.setString("k", "still usable");
  EXPECT_EQ(v1.getString("k"), "still usable");
}

// A store a program derives itself gets queue calls that fail naming the call and the key.
TEST(QueueRefusalTest, AStoreWithoutQueuesSaysSo) {
  class Bare : public Store {
   public:
    using Store::get;
    using Store::multiGet;
    using Store::wait;
    void set(const std::string&, const Bytes&) override {}
    Bytes get(const std::string&, std::chrono::milliseconds) override { return {}; }
    int64_t add(const std::string&, int64_t) override { return 0; }
    Bytes compareSet(const std::string&, const Bytes&, const Bytes&) override { return {}; }
    bool deleteKey(const std::string&) override { return false; }
    bool check(const std::vector<std::string>&) override { return false; }
    void wait(const std::vector<std::string>&, std::chrono::milliseconds) override {}
    int64_t numKeys() override { return 0; }
    std::vector<Bytes> multiGet(const std::vector<std::string>&,
                                std::chrono::milliseconds) override {
      return {};
    }
    void multiSet(const std::vector<std::string>&, const std::vector<Bytes>&) override {}
    void append(const std::string&, const Bytes&) override {}
  } bare;
  const std::string message = messageOf([&] { bare.queuePush("jobs", toBytes("x")); });
  EXPECT_NE(message.find("queuePush 'jobs'"), std::string::npos) << message;
  EXPECT_NE(message.find("no queues"), std::string::npos) << message;
  EXPECT_THROW(bare.queuePop("jobs"), StoreError);
  EXPECT_THROW(bare.tryQueuePop("jobs"), StoreError);
  EXPECT_THROW(bare.queueLen("jobs"), StoreError);
}

// A FileStore's queue is in its log: a store opened later replays pushes and pops alike.
TEST(FileStoreQueueTest, AReopenedStoreSeesTheQueueAsLeft) {
  const auto path =
      std::filesystem::temp_directory_path() / ("c10d_queue_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  {
    FileStore first(path.string());
    for (const char* value : {"a", "b", "c"}) first.queuePush("q", toBytes(value));
    EXPECT_EQ(first.queuePop("q"), toBytes("a"));
  }
  FileStore second(path.string());
  EXPECT_EQ(second.queueLen("q"), 2);
  EXPECT_EQ(second.queuePop("q"), toBytes("b"));
  std::filesystem::remove(path);
}

TEST(PrefixStoreTest, NamespacesDoNotCollide) {
  auto base = std::make_shared<HashStore>();
  PrefixStore a("a", base), b("b", base);
  a.setString("k", "from a");
  b.setString("k", "from b");
  EXPECT_EQ(a.getString("k"), "from a");
  EXPECT_EQ(base->getString("b/k"), "from b");
  PrefixStore nested("inner", std::make_shared<PrefixStore>("outer", base));
  nested.setString("k", "deep");
  EXPECT_EQ(base->getString("outer/inner/k"), "deep");
}

TEST(CountingStoreTest, CountsEachRequestOnceWithItsKeys) {
  auto base = std::make_shared<HashStore>();
  CountingStore store(base);
  store.setString("a", "1");
  store.multiSet({"b", "c", "d"}, {toBytes("2"), toBytes("3"), toBytes("4")});
  EXPECT_EQ(store.multiGet({"a", "b", "c", "d"}).size(), 4u);
  const CountingStore::Counts before = store.counts();
  EXPECT_EQ(store.add("n", 5), 5);
  EXPECT_THROW(store.get("missing", 10ms), TimeoutError);  // a failed request counts too
  store.wait({"a", "b"});
  const CountingStore::Counts after = store.counts();

  EXPECT_EQ(before[CountingStore::Request::Set], 1);
  EXPECT_EQ(before[CountingStore::Request::MultiSet], 1);
  EXPECT_EQ(before[CountingStore::Request::MultiGet], 1);
  EXPECT_EQ(before.keys[static_cast<size_t>(CountingStore::Request::MultiGet)], 4);
  EXPECT_EQ(before.totalRequests(), 3);
  EXPECT_EQ(before.totalKeys(), 8);
  const CountingStore::Counts between = after - before;
  EXPECT_EQ(between[CountingStore::Request::Add], 1);
  EXPECT_EQ(between[CountingStore::Request::Get], 1);
  EXPECT_EQ(between[CountingStore::Request::Wait], 1);
  EXPECT_EQ(between.totalRequests(), 3);
  EXPECT_EQ(between.totalKeys(), 4);
  EXPECT_STREQ(CountingStore::name(CountingStore::Request::MultiGet), "multiGet");
  EXPECT_EQ(base->getString("n"), "5");  // the calls reached the store underneath
  EXPECT_THROW(CountingStore(nullptr), InvalidArgument);
}

TEST(CountingStoreTest, TheTcpStoreHostIsFoundThroughIt) {
  TCPStore server("127.0.0.1", 0, TCPStoreOptions{.isServer = true, .listenAddress = "127.0.0.1"});
  auto client = std::make_shared<TCPStore>("127.0.0.1", server.port());
  CountingStore counting(std::make_shared<PrefixStore>("group0", client));
  EXPECT_EQ(tcpStoreHost(counting), std::optional<std::string>("127.0.0.1"));
  EXPECT_EQ(tcpStoreHost(CountingStore(std::make_shared<HashStore>())), std::nullopt);
}

}  // namespace
}  // namespace c10d::inline v1
