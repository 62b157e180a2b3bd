// One behaviour suite for the Store interface, instantiated for every store in the library.
// Each fixture hands out handles onto one shared store, the way distinct ranks (or threads)
// see it: writes through one handle must be visible through the others.

#include <gtest/gtest.h>
#include <unistd.h>

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

namespace c10d::inline v0 {
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

INSTANTIATE_TEST_SUITE_P(
    AllStores, StoreTest,
    ::testing::Values(
        StoreKind{"HashStore", [] { return std::make_unique<HashStoreFactory>(); }},
        StoreKind{"FileStore", [] { return std::make_unique<FileStoreFactory>(); }},
        StoreKind{"PrefixStore", [] { return std::make_unique<PrefixStoreFactory>(); }},
        StoreKind{"TCPStore", [] { return std::make_unique<TCPStoreFactory>(); }},
        StoreKind{"CountingStore", [] { return std::make_unique<CountingStoreFactory>(); }},
        StoreKind{
            "PyTorchV1Client",
            [] { return std::make_unique<PyTorchClientFactory>(PyTorchTCPStore::Protocol::V1); },
            /*answersErrors=*/false},
        StoreKind{
            "PyTorchV2Client",
            [] { return std::make_unique<PyTorchClientFactory>(PyTorchTCPStore::Protocol::V2); },
            /*answersErrors=*/false}),
    [](const ::testing::TestParamInfo<StoreKind>& info) { return info.param.name; });

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
}  // namespace c10d::inline v0
