#include "store/KeyValueState.hpp"

#include <utility>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::detail {

void KeyValueState::checkSet(const std::string& key, const Bytes& value) {
  checkKey("set", key);
  checkValue("set", key, value.size());
}

void KeyValueState::checkCompareSet(const std::string& key, const Bytes& desired) {
  checkKey("compareSet", key);
  checkValue("compareSet", key, desired.size());
}

void KeyValueState::checkMultiSet(const std::vector<std::string>& keys,
                                  const std::vector<Bytes>& values) {
  C10D_CHECK(keys.size() == values.size(), InvalidArgument, "store multiSet: ", keys.size(),
             " keys but ", values.size(), " values");
  for (size_t i = 0; i < keys.size(); ++i) {
    checkKey("multiSet", keys[i]);
    checkValue("multiSet", keys[i], values[i].size());
  }
}

bool KeyValueState::hasAll(const std::vector<std::string>& keys) const {
  for (const std::string& key : keys) {
    if (!has(key)) return false;
  }
  return true;
}

std::vector<std::string> KeyValueState::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> absent;
  for (const std::string& key : keys) {
    if (!has(key)) absent.push_back(key);
  }
  return absent;
}

int64_t KeyValueState::queueLen(const std::string& key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

void KeyValueState::queuePush(const std::string& key, Bytes value,
                              std::vector<std::string>* created) {
  queues_[key].push_back(std::move(value));
  if (created != nullptr) created->push_back(key);
}

std::optional<KeyValueState::Bytes> KeyValueState::queuePop(const std::string& key) {
  auto it = queues_.find(key);
  if (it == queues_.end()) return std::nullopt;
  Bytes front = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
  return front;
}

const KeyValueState::Bytes* KeyValueState::queueFront(const std::string& key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? nullptr : &it->second.front();
}

std::vector<KeyValueState::Bytes> KeyValueState::multiGet(
    const std::vector<std::string>& keys) const {
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) values.push_back(map_.at(key));
  return values;
}

int64_t KeyValueState::counter(const std::string& key) const {
  const Bytes* value = find(key);
  return value == nullptr ? 0 : parseCounter(key, *value);
}

void KeyValueState::set(const std::string& key, Bytes value, std::vector<std::string>* created) {
  assign(key, std::move(value), created);
}

int64_t KeyValueState::add(const std::string& key, int64_t delta,
                           std::vector<std::string>* created) {
  pending_.clear();
  const int64_t result = planAdd(key, delta, pending_);
  applyPending(created);
  return result;
}

KeyValueState::Bytes KeyValueState::compareSet(const std::string& key, const Bytes& expected,
                                               Bytes desired, std::vector<std::string>* created) {
  pending_.clear();
  Bytes result = planCompareSet(key, expected, std::move(desired), pending_);
  applyPending(created);
  return result;
}

bool KeyValueState::deleteKey(const std::string& key) {
  pending_.clear();
  const bool existed = planDeleteKey(key, pending_);
  applyPending(nullptr);
  return existed;
}

void KeyValueState::multiSet(const std::vector<std::string>& keys, std::vector<Bytes> values,
                             std::vector<std::string>* created) {
  // Nothing to decide, so no plan: each value moves straight into the map, in order.
  for (size_t i = 0; i < keys.size(); ++i) assign(keys[i], std::move(values[i]), created);
}

void KeyValueState::append(const std::string& key, std::span<const uint8_t> suffix,
                           std::vector<std::string>* created) {
  // In place, not through planAppend, whose change carries a copy of the whole value: repeated
  // appends to one key would cost the square of its final size.
  auto it = map_.find(key);
  const bool absent = it == map_.end();
  checkAppend(key, absent ? nullptr : &it->second, suffix.size());
  if (absent) it = map_.emplace(key, Bytes()).first;
  it->second.insert(it->second.end(), suffix.begin(), suffix.end());
  if (absent && created != nullptr) created->push_back(key);
}

int64_t KeyValueState::planAdd(const std::string& key, int64_t delta, Changes& changes) const {
  const int64_t result = addToCounter(key, counter(key), delta);
  changes.push_back(Change{key, formatCounter(result)});
  return result;
}

KeyValueState::Bytes KeyValueState::planCompareSet(const std::string& key, const Bytes& expected,
                                                   Bytes desired, Changes& changes) const {
  const Bytes* current = find(key);
  // PyTorch's compare_set: an absent key matches an empty expected and nothing else.
  if (current == nullptr ? !expected.empty() : *current != expected) {
    // No swap. The caller learns what is there; for an absent key that is its own expected.
    return current == nullptr ? expected : *current;
  }
  changes.push_back(Change{key, desired});
  return desired;
}

bool KeyValueState::planDeleteKey(const std::string& key, Changes& changes) const {
  if (!has(key)) return false;
  changes.push_back(Change{key, std::nullopt});
  return true;
}

void KeyValueState::planAppend(const std::string& key, std::span<const uint8_t> suffix,
                               Changes& changes) const {
  const Bytes* current = find(key);
  checkAppend(key, current, suffix.size());
  Bytes combined;
  combined.reserve((current == nullptr ? 0 : current->size()) + suffix.size());
  if (current != nullptr) combined.assign(current->begin(), current->end());
  combined.insert(combined.end(), suffix.begin(), suffix.end());
  changes.push_back(Change{key, std::move(combined)});
}

void KeyValueState::applySet(std::string key, std::span<const uint8_t> value) {
  // assign() into the mapped vector, so a key rewritten by every record (a counter) keeps its
  // allocation.
  map_[std::move(key)].assign(value.begin(), value.end());
}

const KeyValueState::Bytes* KeyValueState::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

void KeyValueState::checkAppend(const std::string& key, const Bytes* current, size_t suffixBytes) {
  checkValue("append", key, (current == nullptr ? 0 : current->size()) + suffixBytes);
}

void KeyValueState::assign(const std::string& key, Bytes value, std::vector<std::string>* created) {
  const bool inserted = map_.insert_or_assign(key, std::move(value)).second;
  if (inserted && created != nullptr) created->push_back(key);
}

void KeyValueState::applyPending(std::vector<std::string>* created) {
  for (Change& change : pending_) {
    if (change.value.has_value()) {
      assign(change.key, std::move(*change.value), created);
    } else {
      map_.erase(change.key);
    }
  }
  pending_.clear();
}

}  // namespace c10d::inline v1::detail
