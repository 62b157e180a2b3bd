#include "store/HashStore.hpp"

#include "c10d/core/Exception.hpp"
#include "store/KeyValueState.hpp"

namespace c10d::inline v1 {

// Every operation's meaning is state_'s; this file adds the mutex and the waiting. Waiters wait
// for keys to exist, so they are woken when an operation created a key, and only then.

HashStore::HashStore(std::chrono::milliseconds timeout)
    : Store(timeout), state_(std::make_unique<detail::KeyValueState>()) {}

HashStore::~HashStore() = default;

void HashStore::set(const std::string& key, const Bytes& value) {
  detail::KeyValueState::checkSet(key, value);
  std::vector<std::string> created;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    state_->set(key, value, &created);
  }
  if (!created.empty()) changed_.notify_all();
}

HashStore::Bytes HashStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("get", key);
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, {key}, timeout, "get");
  return state_->get(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  checkKey("add", key);
  std::vector<std::string> created;
  int64_t result;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    result = state_->add(key, delta, &created);
  }
  if (!created.empty()) changed_.notify_all();
  return result;
}

HashStore::Bytes HashStore::compareSet(const std::string& key, const Bytes& expected,
                                       const Bytes& desired) {
  detail::KeyValueState::checkCompareSet(key, desired);
  std::vector<std::string> created;
  Bytes result;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    result = state_->compareSet(key, expected, desired, &created);
  }
  if (!created.empty()) changed_.notify_all();
  return result;
}

bool HashStore::deleteKey(const std::string& key) {
  checkKey("deleteKey", key);
  std::lock_guard<std::mutex> guard(mutex_);
  return state_->deleteKey(key);
}

bool HashStore::check(const std::vector<std::string>& keys) {
  checkKeys("check", keys);
  std::lock_guard<std::mutex> guard(mutex_);
  return state_->hasAll(keys);
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  checkKeys("wait", keys);
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, keys, timeout, "wait");
}

int64_t HashStore::numKeys() {
  std::lock_guard<std::mutex> guard(mutex_);
  return state_->numKeys();
}

std::vector<HashStore::Bytes> HashStore::multiGet(const std::vector<std::string>& keys,
                                                  std::chrono::milliseconds timeout) {
  checkKeys("multiGet", keys);
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, keys, timeout, "multiGet");
  return state_->multiGet(keys);
}

void HashStore::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  detail::KeyValueState::checkMultiSet(keys, values);
  std::vector<std::string> created;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    state_->multiSet(keys, values, &created);
  }
  if (!created.empty()) changed_.notify_all();
}

void HashStore::append(const std::string& key, const Bytes& value) {
  checkKey("append", key);
  std::vector<std::string> created;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    state_->append(key, value, &created);
  }
  if (!created.empty()) changed_.notify_all();
}

void HashStore::queuePush(const std::string& key, const Bytes& value) {
  checkKey("queuePush", key);
  checkValue("queuePush", key, value.size());
  {
    std::lock_guard<std::mutex> guard(mutex_);
    state_->queuePush(key, value);
  }
  changed_.notify_all();
}

HashStore::Bytes HashStore::queuePop(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("queuePop", key);
  C10D_CHECK(timeout.count() > 0, InvalidArgument,
             "HashStore queuePop: timeout must be positive, got ", timeout.count(), " ms");
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [&] { return state_->queueLen(key) > 0; })) {
    throw TimeoutError(detail::concat("HashStore queuePop: queue '", key, "' stayed empty for ",
                                      timeout.count(), " ms"),
                       ErrorContext{.op = "store queuePop", .key = key});
  }
  return *state_->queuePop(key);
}

std::optional<HashStore::Bytes> HashStore::tryQueuePop(const std::string& key) {
  checkKey("tryQueuePop", key);
  std::lock_guard<std::mutex> guard(mutex_);
  return state_->queuePop(key);
}

int64_t HashStore::queueLen(const std::string& key) {
  checkKey("queueLen", key);
  std::lock_guard<std::mutex> guard(mutex_);
  return state_->queueLen(key);
}

void HashStore::waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                           std::chrono::milliseconds timeout, const char* op) {
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "HashStore ", op,
             ": timeout must be positive, got ", timeout.count(), " ms");
  if (changed_.wait_for(lock, timeout, [&] { return state_->hasAll(keys); })) return;
  std::vector<std::string> missing = state_->missing(keys);
  throw TimeoutError(detail::concat("HashStore ", op, ": key(s) ", describeKeys(missing),
                                    " not set after ", timeout.count(), " ms"),
                     ErrorContext{.op = detail::concat("store ", op), .key = missing.front()});
}

}  // namespace c10d::inline v1
