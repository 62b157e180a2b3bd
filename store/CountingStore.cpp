#include "store/CountingStore.hpp"

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

const char* CountingStore::name(Request request) {
  static constexpr const char* kNames[kRequestKinds] = {
      "set",     "get",      "add",      "compareSet", "deleteKey", "check",    "wait",
      "numKeys", "multiGet", "multiSet", "append",     "queuePush", "queuePop", "queueLen",
  };
  return kNames[static_cast<size_t>(request)];
}

int64_t CountingStore::Counts::totalRequests() const {
  int64_t total = 0;
  for (int64_t n : requests) total += n;
  return total;
}

int64_t CountingStore::Counts::totalKeys() const {
  int64_t total = 0;
  for (int64_t n : keys) total += n;
  return total;
}

CountingStore::Counts CountingStore::Counts::operator-(const Counts& earlier) const {
  Counts difference;
  for (size_t i = 0; i < kRequestKinds; ++i) {
    difference.requests[i] = requests[i] - earlier.requests[i];
    difference.keys[i] = keys[i] - earlier.keys[i];
  }
  return difference;
}

CountingStore::CountingStore(std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultTimeout), store_(std::move(store)) {
  C10D_CHECK(store_ != nullptr, InvalidArgument, "CountingStore: null store");
}

CountingStore::Counts CountingStore::counts() const {
  Counts counts;
  for (size_t i = 0; i < kRequestKinds; ++i) {
    counts.requests[i] = requests_[i].load(std::memory_order_relaxed);
    counts.keys[i] = keys_[i].load(std::memory_order_relaxed);
  }
  return counts;
}

void CountingStore::count(Request request, size_t keys) {
  const auto i = static_cast<size_t>(request);
  requests_[i].fetch_add(1, std::memory_order_relaxed);
  keys_[i].fetch_add(static_cast<int64_t>(keys), std::memory_order_relaxed);
}

void CountingStore::set(const std::string& key, const Bytes& value) {
  count(Request::Set, 1);
  store_->set(key, value);
}

CountingStore::Bytes CountingStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  count(Request::Get, 1);
  return store_->get(key, timeout);
}

int64_t CountingStore::add(const std::string& key, int64_t delta) {
  count(Request::Add, 1);
  return store_->add(key, delta);
}

CountingStore::Bytes CountingStore::compareSet(const std::string& key, const Bytes& expected,
                                               const Bytes& desired) {
  count(Request::CompareSet, 1);
  return store_->compareSet(key, expected, desired);
}

bool CountingStore::deleteKey(const std::string& key) {
  count(Request::DeleteKey, 1);
  return store_->deleteKey(key);
}

bool CountingStore::check(const std::vector<std::string>& keys) {
  count(Request::Check, keys.size());
  return store_->check(keys);
}

void CountingStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  count(Request::Wait, keys.size());
  store_->wait(keys, timeout);
}

int64_t CountingStore::numKeys() {
  count(Request::NumKeys, 0);
  return store_->numKeys();
}

std::vector<CountingStore::Bytes> CountingStore::multiGet(const std::vector<std::string>& keys,
                                                          std::chrono::milliseconds timeout) {
  count(Request::MultiGet, keys.size());
  return store_->multiGet(keys, timeout);
}

void CountingStore::multiSet(const std::vector<std::string>& keys,
                             const std::vector<Bytes>& values) {
  count(Request::MultiSet, keys.size());
  store_->multiSet(keys, values);
}

void CountingStore::append(const std::string& key, const Bytes& value) {
  count(Request::Append, 1);
  store_->append(key, value);
}

void CountingStore::queuePush(const std::string& key, const Bytes& value) {
  count(Request::QueuePush, 1);
  store_->queuePush(key, value);
}

CountingStore::Bytes CountingStore::queuePop(const std::string& key,
                                             std::chrono::milliseconds timeout) {
  count(Request::QueuePop, 1);
  return store_->queuePop(key, timeout);
}

std::optional<CountingStore::Bytes> CountingStore::tryQueuePop(const std::string& key) {
  count(Request::QueuePop, 1);
  return store_->tryQueuePop(key);
}

int64_t CountingStore::queueLen(const std::string& key) {
  count(Request::QueueLen, 1);
  return store_->queueLen(key);
}

}  // namespace c10d::inline v1
