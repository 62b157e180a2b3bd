#include "store/Store.hpp"

#include <charconv>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

Store::Store(std::chrono::milliseconds timeout) : timeout_(kDefaultTimeout) {
  setTimeout(timeout);
}

void Store::setTimeout(std::chrono::milliseconds timeout) {
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "store timeout must be positive, got ",
             timeout.count(), " ms");
  timeout_ = timeout;
}

namespace {
[[noreturn]] void noQueues(const char* op, const std::string& key) {
  C10D_THROW(StoreError, "store ", op, " '", key,
             "': this store has no queues (HashStore, FileStore, TCPStore and the stores that wrap "
             "them have)");
}
}  // namespace

void Store::queuePush(const std::string& key, const Bytes&) {
  noQueues("queuePush", key);
}

Store::Bytes Store::queuePop(const std::string& key, std::chrono::milliseconds) {
  noQueues("queuePop", key);
}

std::optional<Store::Bytes> Store::tryQueuePop(const std::string& key) {
  noQueues("tryQueuePop", key);
}

int64_t Store::queueLen(const std::string& key) {
  noQueues("queueLen", key);
}

void Store::setString(const std::string& key, std::string_view value) {
  set(key, toBytes(value));
}

std::string Store::getString(const std::string& key) {
  return toString(get(key));
}

void checkKey(std::string_view op, const std::string& key) {
  C10D_CHECK(!key.empty(), InvalidArgument, "store ", op, ": empty key");
  if (key.size() > Store::kMaxKeyBytes) {
    throw InvalidArgument(
        detail::concat("store ", op, ": key '", key.substr(0, 64), "...' is ", key.size(),
                       " bytes, over the limit of ", Store::kMaxKeyBytes),
        ErrorContext{.op = detail::concat("store ", op), .key = key});
  }
}

void checkValue(std::string_view op, const std::string& key, size_t valueBytes) {
  if (valueBytes > Store::kMaxValueBytes) {
    throw InvalidArgument(
        detail::concat("store ", op, ": value for key '", key, "' is ", valueBytes,
                       " bytes, over the limit of ", Store::kMaxValueBytes),
        ErrorContext{.op = detail::concat("store ", op), .key = key});
  }
}

void checkKeys(std::string_view op, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) checkKey(op, key);
}

Store::Bytes toBytes(std::string_view text) {
  return Store::Bytes(text.begin(), text.end());
}

std::string toString(const Store::Bytes& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

int64_t parseCounter(const std::string& key, const Store::Bytes& value) {
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  int64_t result = 0;
  auto [ptr, ec] = std::from_chars(begin, end, result);
  C10D_CHECK(ec == std::errc() && ptr == end && !value.empty(), StoreError, "add: value of key '",
             key, "' is not a decimal int64 (", value.size(), " bytes: '",
             std::string(begin, std::min<size_t>(value.size(), 32)), "')");
  return result;
}

Store::Bytes formatCounter(int64_t value) {
  return toBytes(std::to_string(value));
}

int64_t addToCounter(const std::string& key, int64_t current, int64_t delta) {
  int64_t result = 0;
  C10D_CHECK(!__builtin_add_overflow(current, delta, &result), InvalidArgument, "store add: key '",
             key, "' holds ", current, ", adding ", delta, " overflows int64");
  return result;
}

std::string describeKeys(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 8;
  std::string text;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) {
    text += (i ? ", '" : "'") + keys[i] + "'";
  }
  if (keys.size() > kShown) text += " and " + std::to_string(keys.size() - kShown) + " more";
  return text;
}

}  // namespace c10d::inline v1
