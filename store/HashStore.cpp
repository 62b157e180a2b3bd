#include "store/HashStore.hpp"

#include "c10d/core/Exception.hpp"

namespace c10d::inline v0 {

void HashStore::set(const std::string& key, const Bytes& value) {
  checkKey("set", key);
  checkValue("set", key, value.size());
  {
    std::lock_guard<std::mutex> guard(mutex_);
    map_[key] = value;
  }
  changed_.notify_all();
}

HashStore::Bytes HashStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("get", key);
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, {key}, timeout, "get");
  return map_.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  checkKey("add", key);
  int64_t result;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = map_.find(key);
    result = addToCounter(key, it == map_.end() ? 0 : parseCounter(key, it->second), delta);
    map_[key] = formatCounter(result);
  }
  changed_.notify_all();
  return result;
}

HashStore::Bytes HashStore::compareSet(const std::string& key, const Bytes& expected,
                                       const Bytes& desired) {
  checkKey("compareSet", key);
  checkValue("compareSet", key, desired.size());
  Bytes result;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) {
      if (!expected.empty()) return expected;
      map_.emplace(key, desired);
      result = desired;
    } else if (it->second == expected) {
      it->second = desired;
      result = desired;
    } else {
      return it->second;
    }
  }
  changed_.notify_all();
  return result;
}

bool HashStore::deleteKey(const std::string& key) {
  checkKey("deleteKey", key);
  std::lock_guard<std::mutex> guard(mutex_);
  return map_.erase(key) > 0;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  checkKeys("check", keys);
  std::lock_guard<std::mutex> guard(mutex_);
  for (const auto& key : keys) {
    if (map_.count(key) == 0) return false;
  }
  return true;
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  checkKeys("wait", keys);
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, keys, timeout, "wait");
}

int64_t HashStore::numKeys() {
  std::lock_guard<std::mutex> guard(mutex_);
  return static_cast<int64_t>(map_.size());
}

std::vector<HashStore::Bytes> HashStore::multiGet(const std::vector<std::string>& keys,
                                                  std::chrono::milliseconds timeout) {
  checkKeys("multiGet", keys);
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, keys, timeout, "multiGet");
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(map_.at(key));
  return values;
}

void HashStore::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  C10D_CHECK(keys.size() == values.size(), InvalidArgument, "store multiSet: ", keys.size(),
             " keys but ", values.size(), " values");
  for (size_t i = 0; i < keys.size(); ++i) {
    checkKey("multiSet", keys[i]);
    checkValue("multiSet", keys[i], values[i].size());
  }
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (size_t i = 0; i < keys.size(); ++i) map_[keys[i]] = values[i];
  }
  changed_.notify_all();
}

void HashStore::append(const std::string& key, const Bytes& value) {
  checkKey("append", key);
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = map_.find(key);
    checkValue("append", key, (it == map_.end() ? 0 : it->second.size()) + value.size());
    Bytes& current = it == map_.end() ? map_[key] : it->second;
    current.insert(current.end(), value.begin(), value.end());
  }
  changed_.notify_all();
}

void HashStore::waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                           std::chrono::milliseconds timeout, const char* op) {
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "HashStore ", op,
             ": timeout must be positive, got ", timeout.count(), " ms");
  auto allPresent = [&] {
    for (const auto& key : keys) {
      if (map_.count(key) == 0) return false;
    }
    return true;
  };
  if (changed_.wait_for(lock, timeout, allPresent)) return;
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (map_.count(key) == 0) missing.push_back(key);
  }
  throw TimeoutError(detail::concat("HashStore ", op, ": key(s) ", describeKeys(missing),
                                    " not set after ", timeout.count(), " ms"),
                     ErrorContext{.op = detail::concat("store ", op), .key = missing.front()});
}

}  // namespace c10d::inline v0
