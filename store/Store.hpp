#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace c10d::inline v1 {

/// A key-value store shared by all ranks of a job; it is how they find each other.
///
/// Values are byte strings. add() keeps its counter as the value's decimal text, so get() of a
/// counter returns e.g. "42" and set("n", "5") followed by add("n", 1) gives 6.
///
/// Blocking calls (get, wait, multiGet) wait until every key they name exists, or throw
/// TimeoutError naming the missing keys once the timeout has passed. Every store has a default
/// timeout (timeout()), 300 s unless set; it must be positive: nothing here waits forever.
///
/// Errors: TimeoutError (keys missing at the deadline), InvalidArgument (a key or value over the
/// store's limits, mismatched multiSet lists), StoreError (the store is unreachable or failed).
///
/// Implementations override the overloads that take a timeout and add
/// `using Store::get; using Store::wait; using Store::multiGet;`.
///
/// Threading: every method of every store in this library may be called from any thread,
/// concurrently; each call is atomic with respect to the others on the same store.
class Store {
 public:
  using Bytes = std::vector<uint8_t>;
  static constexpr std::chrono::milliseconds kDefaultTimeout{300000};
  /// Limits every store enforces alike, so code that runs on one store runs on all of them.
  /// Keys must be 1 to kMaxKeyBytes bytes, values at most kMaxValueBytes; calls that break a
  /// limit throw InvalidArgument before anything is stored or sent.
  static constexpr size_t kMaxKeyBytes = 64 * 1024;
  static constexpr size_t kMaxValueBytes = 64 * 1024 * 1024;

  explicit Store(std::chrono::milliseconds timeout = kDefaultTimeout);
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual void set(const std::string& key, const Bytes& value) = 0;

  /// Waits up to timeout() (or the given timeout) for key to exist, then returns its value.
  Bytes get(const std::string& key) { return get(key, timeout_); }
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;

  /// Atomically adds delta to the integer at key (absent counts as 0) and returns the sum.
  /// Throws StoreError when the existing value is not a decimal integer.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;

  /// Atomically: if key is absent and expected is empty, or key's value equals expected, sets it
  /// to desired and returns desired; if key is absent (expected not empty), returns expected;
  /// otherwise returns the current value unchanged. (PyTorch's compare_set semantics.)
  virtual Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;

  /// Removes key; returns whether it existed.
  virtual bool deleteKey(const std::string& key) = 0;

  /// Whether all keys exist right now (no waiting).
  virtual bool check(const std::vector<std::string>& keys) = 0;

  /// Waits until all keys exist: up to timeout() or the given timeout.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;

  /// Number of keys in the store (for a PrefixStore: in the store underneath).
  virtual int64_t numKeys() = 0;

  /// Waits up to timeout() (or the given timeout) for all keys, then returns their values in
  /// order, read atomically.
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys) {
    return multiGet(keys, timeout_);
  }
  virtual std::vector<Bytes> multiGet(const std::vector<std::string>& keys,
                                      std::chrono::milliseconds timeout) = 0;

  /// Sets keys[i] to values[i] for all i, atomically. Throws InvalidArgument on a size mismatch.
  virtual void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) = 0;

  /// Appends value to key's value, creating the key when absent.
  virtual void append(const std::string& key, const Bytes& value) = 0;

  /// Queues (PyTorch 2.6's queue_push / queue_pop / queue_len): a first-in first-out list of
  /// values per key, kept apart from the key's value, so get, set, deleteKey and numKeys do not
  /// see it. Each pushed value is popped by exactly one caller. Values obey kMaxValueBytes.
  /// Every store of this library has queues; the defaults here throw StoreError, for stores a
  /// program derives itself (and the wrapper of a PyTorch 1.13 store, which has none).
  /// A TCPStore's queues need a server of this version (an older one drops the connection).
  virtual void queuePush(const std::string& key, const Bytes& value);
  /// Removes and returns the front value of key's queue, waiting up to timeout() (or the given
  /// timeout) for one to be pushed; TimeoutError naming key when none was.
  Bytes queuePop(const std::string& key) { return queuePop(key, timeout_); }
  virtual Bytes queuePop(const std::string& key, std::chrono::milliseconds timeout);
  /// queuePop without waiting: nullopt when key's queue is empty.
  virtual std::optional<Bytes> tryQueuePop(const std::string& key);
  /// How many values key's queue holds (0 for a key never pushed to).
  virtual int64_t queueLen(const std::string& key);

  /// The store this one passes its calls to (PrefixStore, CountingStore), else nullptr: how
  /// tcpStoreHost finds the TCPStore under any wrappers.
  virtual const Store* forwardsTo() const { return nullptr; }

  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Throws InvalidArgument unless timeout > 0.
  void setTimeout(std::chrono::milliseconds timeout);

  /// Text conveniences over set/get.
  void setString(const std::string& key, std::string_view value);
  std::string getString(const std::string& key);

 private:
  std::chrono::milliseconds timeout_;
};

/// Throw InvalidArgument naming op and key when a key or value breaks the limits above.
void checkKey(std::string_view op, const std::string& key);
void checkValue(std::string_view op, const std::string& key, size_t valueBytes);
void checkKeys(std::string_view op, const std::vector<std::string>& keys);

Store::Bytes toBytes(std::string_view text);
std::string toString(const Store::Bytes& bytes);

/// Parses a counter value the way add() stores it; nullopt-free: throws StoreError naming key.
int64_t parseCounter(const std::string& key, const Store::Bytes& value);
Store::Bytes formatCounter(int64_t value);
/// current + delta; throws InvalidArgument naming key when the sum overflows int64.
int64_t addToCounter(const std::string& key, int64_t current, int64_t delta);

/// "a, b, c" with at most a handful of keys, for error messages about missing keys.
std::string describeKeys(const std::vector<std::string>& keys);

}  // namespace c10d::inline v1
