#pragma once

/// \file
/// PrefixStore: a Store that puts its keys under a prefix in another store.

#include <memory>

#include "store/Store.hpp"

namespace c10d::inline v1 {

/// Namespaces another store: every key k becomes "<prefix>/k" underneath, so groups and
/// subsystems can share one store without colliding. numKeys() counts the whole store
/// underneath (as PyTorch's PrefixStore does). Timeout: its own, initialised from the store
/// underneath. Errors and threading as the store underneath.
class PrefixStore : public Store {
 public:
  /// Wraps store; this store's timeout starts as store's.
  /// \param prefix The prefix: key k is "<prefix>/k" in store.
  /// \param store The store underneath, shared with its other users; must not be null.
  /// \throws InvalidArgument when store is null.
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  /// \return The prefix, as given to the constructor (without the "/").
  const std::string& prefix() const { return prefix_; }
  /// \return The store underneath.
  const std::shared_ptr<Store>& underlying() const { return store_; }

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
  const Store* forwardsTo() const override { return store_.get(); }

 private:
  std::string join(const std::string& key) const;
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace c10d::inline v1
