#include "store/PrefixStore.hpp"

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultTimeout),
      prefix_(std::move(prefix)),
      store_(std::move(store)) {
  C10D_CHECK(store_ != nullptr, InvalidArgument, "PrefixStore '", prefix_, "': null store");
}

std::string PrefixStore::join(const std::string& key) const {
  return prefix_ + "/" + key;
}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> joined;
  joined.reserve(keys.size());
  for (const auto& key : keys) joined.push_back(join(key));
  return joined;
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  checkKey("set", key);
  store_->set(join(key), value);
}

PrefixStore::Bytes PrefixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("get", key);
  return store_->get(join(key), timeout);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  checkKey("add", key);
  return store_->add(join(key), delta);
}

PrefixStore::Bytes PrefixStore::compareSet(const std::string& key, const Bytes& expected,
                                           const Bytes& desired) {
  checkKey("compareSet", key);
  return store_->compareSet(join(key), expected, desired);
}

bool PrefixStore::deleteKey(const std::string& key) {
  checkKey("deleteKey", key);
  return store_->deleteKey(join(key));
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  checkKeys("check", keys);
  return store_->check(join(keys));
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  checkKeys("wait", keys);
  store_->wait(join(keys), timeout);
}

int64_t PrefixStore::numKeys() {
  return store_->numKeys();
}

std::vector<PrefixStore::Bytes> PrefixStore::multiGet(const std::vector<std::string>& keys,
                                                      std::chrono::milliseconds timeout) {
  checkKeys("multiGet", keys);
  return store_->multiGet(join(keys), timeout);
}

void PrefixStore::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  checkKeys("multiSet", keys);
  store_->multiSet(join(keys), values);
}

void PrefixStore::append(const std::string& key, const Bytes& value) {
  checkKey("append", key);
  store_->append(join(key), value);
}

void PrefixStore::queuePush(const std::string& key, const Bytes& value) {
  checkKey("queuePush", key);
  store_->queuePush(join(key), value);
}

PrefixStore::Bytes PrefixStore::queuePop(const std::string& key,
                                         std::chrono::milliseconds timeout) {
  checkKey("queuePop", key);
  return store_->queuePop(join(key), timeout);
}

std::optional<PrefixStore::Bytes> PrefixStore::tryQueuePop(const std::string& key) {
  checkKey("tryQueuePop", key);
  return store_->tryQueuePop(join(key));
}

int64_t PrefixStore::queueLen(const std::string& key) {
  checkKey("queueLen", key);
  return store_->queueLen(join(key));
}

}  // namespace c10d::inline v1
