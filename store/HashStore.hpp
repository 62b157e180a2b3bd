#pragma once

/// \file
/// HashStore: the in-process Store, for the threads of one process.

#include <condition_variable>
#include <memory>
#include <mutex>

#include "store/Store.hpp"

namespace c10d::inline v1 {

namespace detail {
class KeyValueState;
}

/// An in-process store: a hash map behind one mutex, for threads of one process (tests,
/// single-process jobs, world size 1). See Store for semantics, errors and threading.
class HashStore : public Store {
 public:
  /// Makes an empty store.
  /// \param timeout The default timeout of blocking calls; must be positive.
  /// \throws InvalidArgument when timeout is not positive.
  explicit HashStore(std::chrono::milliseconds timeout = kDefaultTimeout);
  ~HashStore() override;

  using Store::get;
  using Store::multiGet;
  using Store::queuePop;
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t numKeys() override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys,
                              std::chrono::milliseconds timeout) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void append(const std::string& key, const Bytes& value) override;
  void queuePush(const std::string& key, const Bytes& value) override;
  Bytes queuePop(const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<Bytes> tryQueuePop(const std::string& key) override;
  int64_t queueLen(const std::string& key) override;

 private:
  /// Waits on changed_ until all keys exist; lock is held on return. Throws TimeoutError.
  void waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout, const char* op);

  std::mutex mutex_;
  std::condition_variable changed_;  ///< notified when an operation created a key
  /// The keys and what each operation does to them (store/KeyValueState.hpp), behind a pointer so
  /// that this installed header needs none of the private ones.
  std::unique_ptr<detail::KeyValueState> state_;
};

}  // namespace c10d::inline v1
