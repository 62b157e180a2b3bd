#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/Store.hpp"

namespace c10d::inline v1::detail {

// What a key-value store holds and what each of its operations means, written once: HashStore,
// FileStore and the TCPStore server keep their keys in one of these, so that set, add,
// compareSet, append, deleteKey, check, multiSet and numKeys cannot drift apart between them
// (Store.hpp says what each does). A private header: the installed HashStore.hpp and
// FileStore.hpp only forward-declare it.
//
// It neither locks nor waits. Each store serialises its calls its own way (a mutex; a mutex and
// flock(); the server's loop thread) and waits its own way (a condition variable; polling;
// parked waiters), so both stay in the stores. Waiting is for keys to exist and nothing else,
// so it needs has(), hasAll() and missing() from here, and, for a store that wakes waiters per
// key, which keys an operation created (the `created` argument).
//
// Arguments are taken as checked: a store runs checkSet, checkCompareSet or checkMultiSet (and
// checkKey/checkKeys of Store.hpp for the other operations) before it takes its lock, so that a
// refused call touches nothing; the TCPStore server's FrameReader enforces the same limits. What
// depends on the contents is checked here, and an operation that throws has changed nothing:
// InvalidArgument naming the key when add overflows int64 or append would pass
// Store::kMaxValueBytes, StoreError naming the key when add finds a value that is not a decimal
// int64.
//
// Not thread-safe: the store that owns it serialises every call, reads included.
class KeyValueState {
 public:
  using Bytes = Store::Bytes;

  // One change an operation decided on: key takes value, or is erased when value is empty.
  struct Change {
    std::string key;
    std::optional<Bytes> value;
  };
  using Changes = std::vector<Change>;

  // Argument checks: InvalidArgument naming the operation and key, as Store.hpp promises.
  static void checkSet(const std::string& key, const Bytes& value);
  static void checkCompareSet(const std::string& key, const Bytes& desired);
  // Also refuses key and value lists of different lengths.
  static void checkMultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values);

  // Reads.
  bool has(const std::string& key) const { return map_.count(key) > 0; }
  // check(): whether every one of keys exists.
  bool hasAll(const std::vector<std::string>& keys) const;
  // The absent ones of keys, in their order: what a wait that timed out names.
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
  // key's value; key must exist (has(key)), else std::out_of_range.
  const Bytes& get(const std::string& key) const { return map_.at(key); }
  // The values of keys, in their order; every key must exist (hasAll(keys)).
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys) const;
  int64_t numKeys() const { return static_cast<int64_t>(map_.size()); }
  // key's counter as add() reads it: 0 when absent; StoreError naming key when the value is not
  // a decimal int64.
  int64_t counter(const std::string& key) const;

  // The operations, decided and done; each returns what the Store method of its name returns.
  // With created not null, every key the call brought into existence is appended to *created:
  // the one event that can complete a wait, so a store need wake its waiters for those only.
  void set(const std::string& key, Bytes value, std::vector<std::string>* created = nullptr);
  int64_t add(const std::string& key, int64_t delta, std::vector<std::string>* created = nullptr);
  Bytes compareSet(const std::string& key, const Bytes& expected, Bytes desired,
                   std::vector<std::string>* created = nullptr);
  bool deleteKey(const std::string& key);
  // keys and values are as long as each other (checkMultiSet); a key named twice ends with the
  // last of its values.
  void multiSet(const std::vector<std::string>& keys, std::vector<Bytes> values,
                std::vector<std::string>* created = nullptr);
  void append(const std::string& key, std::span<const uint8_t> suffix,
              std::vector<std::string>* created = nullptr);

  // The same decisions, not carried out, for a store that must record a change durably before
  // making it: FileStore writes these changes to its log and then replays them through
  // applySet/applyErase like every other record. Each appends the operation's changes to changes
  // (none when it leaves the contents as they are), returns what the operation returns, and
  // changes nothing here. Each throws what the operation throws, having appended nothing.
  int64_t planAdd(const std::string& key, int64_t delta, Changes& changes) const;
  Bytes planCompareSet(const std::string& key, const Bytes& expected, Bytes desired,
                       Changes& changes) const;
  bool planDeleteKey(const std::string& key, Changes& changes) const;
  // Its change sets the whole new value: a log record holds a whole value.
  void planAppend(const std::string& key, std::span<const uint8_t> suffix, Changes& changes) const;

  // Queues (Store::queuePush and the rest), apart from the keys: has, get and numKeys do not see
  // them. A push appends key to *created (a pop waiting on key may go on); the caller checked
  // the value (checkValue). An empty queue is forgotten.
  int64_t queueLen(const std::string& key) const;
  void queuePush(const std::string& key, Bytes value, std::vector<std::string>* created = nullptr);
  std::optional<Bytes> queuePop(const std::string& key);
  // The value queuePop would return, left in place; nullptr for an empty queue.
  const Bytes* queueFront(const std::string& key) const;
  // As PyTorch's server answers check and wait: a key counts as there when it has a value or a
  // non-empty queue (its client waits on a queue's key before popping).
  bool hasOrQueued(const std::string& key) const { return has(key) || queues_.count(key) > 0; }

  // Makes a change that was decided elsewhere (a record replayed from a log): nothing is checked
  // or decided.
  void applySet(std::string key, std::span<const uint8_t> value);
  void applyErase(const std::string& key) { map_.erase(key); }

 private:
  const Bytes* find(const std::string& key) const;
  // InvalidArgument when appending suffixBytes to current (nullptr: absent) would pass the limit.
  static void checkAppend(const std::string& key, const Bytes* current, size_t suffixBytes);
  void assign(const std::string& key, Bytes value, std::vector<std::string>* created);
  // Makes the changes in pending_, in order, and empties it.
  void applyPending(std::vector<std::string>* created);

  std::unordered_map<std::string, Bytes> map_;
  std::unordered_map<std::string, std::deque<Bytes>> queues_;  // never holds an empty queue
  Changes pending_;  // the plan of the operation in progress; kept for its allocation
};

}  // namespace c10d::inline v1::detail
