#pragma once

/// \file
/// The Store interface (the key-value store the ranks of a job meet in), and the key and value
/// checks and counter helpers its implementations share.

#include <atomic>
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
  using Bytes = std::vector<uint8_t>;  ///< A value: a byte string, not necessarily text.
  /// The default timeout of blocking calls when none is given: 300 s.
  static constexpr std::chrono::milliseconds kDefaultTimeout{300000};
  /// Limits every store enforces alike, so code that runs on one store runs on all of them.
  /// Keys must be 1 to kMaxKeyBytes bytes, values at most kMaxValueBytes; calls that break a
  /// limit throw InvalidArgument before anything is stored or sent.
  static constexpr size_t kMaxKeyBytes = 64 * 1024;
  static constexpr size_t kMaxValueBytes = 64 * 1024 * 1024;  ///< The largest value: 64 MiB.

  /// Makes a store whose blocking calls wait up to timeout when given none.
  /// \param timeout The default timeout (timeout()); must be positive.
  /// \throws InvalidArgument when timeout is not positive.
  explicit Store(std::chrono::milliseconds timeout = kDefaultTimeout);
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Sets key to value, replacing any value it had, and wakes the calls waiting for key.
  /// \param key The key: 1 to kMaxKeyBytes bytes.
  /// \param value Its new value: at most kMaxValueBytes.
  /// \throws InvalidArgument when key or value breaks those limits.
  virtual void set(const std::string& key, const Bytes& value) = 0;

  /// Waits up to timeout() (or the given timeout) for key to exist, then returns its value.
  /// \param key The key to read.
  /// \return key's value.
  /// \throws TimeoutError naming key when it still does not exist after timeout().
  Bytes get(const std::string& key) { return get(key, timeout_); }
  /// get(key) with its own timeout instead of timeout().
  /// \param key The key to read.
  /// \param timeout How long to wait for key; must be positive (InvalidArgument otherwise).
  /// \return key's value.
  /// \throws TimeoutError naming key when it still does not exist after timeout.
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;

  /// Atomically adds delta to the integer at key (absent counts as 0) and returns the sum.
  /// Throws StoreError when the existing value is not a decimal integer.
  /// \param key The counter's key; add() creates it when absent.
  /// \param delta The amount to add; may be negative. 0 reads the counter, but still creates
  ///        an absent key (as "0"), which wakes the calls waiting for it.
  /// \return The counter's new value.
  /// \throws StoreError when key's value is not a decimal int64.
  /// \throws InvalidArgument when the sum would overflow int64.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;

  /// Atomically: if key is absent and expected is empty, or key's value equals expected, sets it
  /// to desired and returns desired; if key is absent (expected not empty), returns expected;
  /// otherwise returns the current value unchanged. (PyTorch's compare_set semantics.)
  /// \param key The key to compare and set.
  /// \param expected The value key must hold for the swap; empty also matches an absent key.
  /// \param desired The value key takes on a match: at most kMaxValueBytes.
  /// \return desired after a swap, else key's current value (expected when key is absent).
  /// \throws InvalidArgument when key or desired breaks the limits.
  virtual Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;

  /// Removes key; returns whether it existed.
  /// \param key The key to remove.
  /// \return true when key existed and was removed, false when it did not exist.
  virtual bool deleteKey(const std::string& key) = 0;

  /// Whether all keys exist right now (no waiting).
  /// \param keys The keys to look for.
  /// \return true when every one of keys exists.
  virtual bool check(const std::vector<std::string>& keys) = 0;

  /// Waits until all keys exist: up to timeout() or the given timeout.
  /// \param keys The keys to wait for.
  /// \throws TimeoutError naming the keys still missing after timeout().
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  /// wait(keys) with its own timeout instead of timeout().
  /// \param keys The keys to wait for.
  /// \param timeout How long to wait; must be positive (InvalidArgument otherwise).
  /// \throws TimeoutError naming the keys still missing after timeout.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;

  /// Number of keys in the store (for a PrefixStore: in the store underneath).
  /// \return How many keys have a value; queues are not counted.
  virtual int64_t numKeys() = 0;

  /// Waits up to timeout() (or the given timeout) for all keys, then returns their values in
  /// order, read atomically.
  /// \param keys The keys to read.
  /// \return Their values: the i-th is keys[i]'s.
  /// \throws TimeoutError naming the keys still missing after timeout().
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys) {
    return multiGet(keys, timeout_);
  }
  /// multiGet(keys) with its own timeout instead of timeout().
  /// \param keys The keys to read.
  /// \param timeout How long to wait for them; must be positive (InvalidArgument otherwise).
  /// \return Their values: the i-th is keys[i]'s.
  /// \throws TimeoutError naming the keys still missing after timeout.
  virtual std::vector<Bytes> multiGet(const std::vector<std::string>& keys,
                                      std::chrono::milliseconds timeout) = 0;

  /// Sets keys[i] to values[i] for all i, atomically. Throws InvalidArgument on a size mismatch.
  /// \param keys The keys to set; a key named twice ends with the last of its values.
  /// \param values Their values, as many as keys.
  /// \throws InvalidArgument when the sizes differ or a key or value breaks the limits.
  virtual void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) = 0;

  /// Appends value to key's value, creating the key when absent.
  /// \param key The key to append to.
  /// \param value The bytes to add at the end.
  /// \throws InvalidArgument when the value would grow past kMaxValueBytes.
  virtual void append(const std::string& key, const Bytes& value) = 0;

  /// Pushes value at the back of key's queue, waking a pop that waits on it.
  ///
  /// Queues (PyTorch 2.6's queue_push / queue_pop / queue_len): a first-in first-out list of
  /// values per key, kept apart from the key's value, so get, set, deleteKey and numKeys do not
  /// see it. Each pushed value is popped by exactly one caller. Values obey kMaxValueBytes.
  /// Every store of this library has queues; the defaults here throw StoreError, for stores a
  /// program derives itself (and the wrapper of a PyTorch 1.13 store, which has none).
  /// A TCPStore's queues need a server of this version (an older one drops the connection).
  /// \param key The queue's key.
  /// \param value The value to push: at most kMaxValueBytes.
  /// \throws StoreError when the store has no queues (Store's own implementation).
  virtual void queuePush(const std::string& key, const Bytes& value);
  /// Removes and returns the front value of key's queue, waiting up to timeout() (or the given
  /// timeout) for one to be pushed; TimeoutError naming key when none was.
  /// \param key The queue's key.
  /// \return The value that was at the front of the queue.
  /// \throws TimeoutError naming key when the queue stayed empty for timeout().
  Bytes queuePop(const std::string& key) { return queuePop(key, timeout_); }
  /// queuePop(key) with its own timeout instead of timeout().
  /// \param key The queue's key.
  /// \param timeout How long to wait for a value; must be positive (InvalidArgument otherwise).
  /// \return The value that was at the front of the queue.
  /// \throws TimeoutError naming key when the queue stayed empty for timeout.
  /// \throws StoreError when the store has no queues (Store's own implementation).
  virtual Bytes queuePop(const std::string& key, std::chrono::milliseconds timeout);
  /// queuePop without waiting: nullopt when key's queue is empty.
  /// \param key The queue's key.
  /// \return The value that was at the front of the queue, or nullopt when it was empty.
  /// \throws StoreError when the store has no queues (Store's own implementation).
  virtual std::optional<Bytes> tryQueuePop(const std::string& key);
  /// How many values key's queue holds (0 for a key never pushed to).
  /// \param key The queue's key.
  /// \return The queue's length.
  /// \throws StoreError when the store has no queues (Store's own implementation).
  virtual int64_t queueLen(const std::string& key);

  /// The store this one passes its calls to (PrefixStore, CountingStore), else nullptr: how
  /// tcpStoreHost finds the TCPStore under any wrappers.
  /// \return The store underneath, which this one shares ownership of (a shared_ptr);
  ///         nullptr for a store that holds its keys.
  virtual const Store* forwardsTo() const { return nullptr; }

  /// The default timeout of blocking calls.
  /// \return The timeout that get, wait, multiGet and queuePop use when given none.
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Throws InvalidArgument unless timeout > 0.
  /// \param timeout The new default timeout of this store's blocking calls.
  /// \throws InvalidArgument when timeout is not positive.
  void setTimeout(std::chrono::milliseconds timeout);

  /// Text conveniences over set/get.
  /// \param key The key to set.
  /// \param value The text to store, as its bytes.
  void setString(const std::string& key, std::string_view value);
  /// get(key) as text: waits up to timeout() for key, as get does.
  /// \param key The key to read.
  /// \return key's value, its bytes unchanged, as a string.
  /// \throws TimeoutError naming key when it still does not exist after timeout().
  std::string getString(const std::string& key);

 private:
  std::atomic<std::chrono::milliseconds> timeout_;  // setTimeout may race the other calls
};

/// Throw InvalidArgument naming op and key when a key or value breaks the limits above.
/// checkKey checks a key's length.
/// \param op The operation, named in the error (e.g. "set").
/// \param key The key: it must be 1 to Store::kMaxKeyBytes bytes.
/// \throws InvalidArgument when key is empty or too long.
void checkKey(std::string_view op, const std::string& key);
/// Checks a value's size against Store::kMaxValueBytes.
/// \param op The operation, named in the error.
/// \param key The value's key, named in the error.
/// \param valueBytes The value's size in bytes.
/// \throws InvalidArgument when valueBytes is over Store::kMaxValueBytes.
void checkValue(std::string_view op, const std::string& key, size_t valueBytes);
/// checkKey for each of keys.
/// \param op The operation, named in the error.
/// \param keys The keys to check.
/// \throws InvalidArgument naming the first key that is empty or too long.
void checkKeys(std::string_view op, const std::vector<std::string>& keys);

/// The bytes of a text.
/// \param text The text.
/// \return Its bytes, unchanged.
Store::Bytes toBytes(std::string_view text);
/// A value as text.
/// \param bytes The value.
/// \return Its bytes, unchanged, as a string (no encoding is checked).
std::string toString(const Store::Bytes& bytes);

/// Parses a counter value the way add() stores it; nullopt-free: throws StoreError naming key.
/// \param key The counter's key, named in the error.
/// \param value The stored value: decimal text of an int64, nothing else.
/// \return The counter.
/// \throws StoreError when value is empty or not a decimal int64.
int64_t parseCounter(const std::string& key, const Store::Bytes& value);
/// A counter value the way add() stores it.
/// \param value The counter.
/// \return Its decimal text, as bytes.
Store::Bytes formatCounter(int64_t value);
/// current + delta; throws InvalidArgument naming key when the sum overflows int64.
/// \param key The counter's key, named in the error.
/// \param current The counter's value now.
/// \param delta The amount to add.
/// \return The sum.
/// \throws InvalidArgument when the sum overflows int64.
int64_t addToCounter(const std::string& key, int64_t current, int64_t delta);

/// "a, b, c" with at most a handful of keys, for error messages about missing keys.
/// \param keys The keys to name.
/// \return The first 8 keys, each in single quotes, then " and N more" for any beyond.
std::string describeKeys(const std::vector<std::string>& keys);

}  // namespace c10d::inline v1
