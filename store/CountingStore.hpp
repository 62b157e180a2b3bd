#pragma once

/// \file
/// CountingStore: a Store that passes every call on to another and counts them.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "store/Store.hpp"

namespace c10d::inline v1 {

/// Passes every call to another store and counts them by kind, with the keys they name: how
/// many round trips a rendezvous, a group's creation or a reform costs (c10d-scale-bench reads
/// it; a test can assert that a count does not grow with the world size). A call counts once
/// however many keys it names (multiGet of 100 keys is one request, 100 keys), and whether or not
/// it succeeds. Timeout: its own, initialised from the store underneath. Errors as the store
/// underneath.
///
/// Threading: as the store underneath; the counters are atomic, so counts() may run beside calls
/// (a snapshot of each counter, not of all of them at one instant).
class CountingStore : public Store {
 public:
  /// The kinds of call counted, one per Store method (each overload counts as its kind).
  enum class Request : uint8_t {
    Set,         ///< set (and setString)
    Get,         ///< get (and getString)
    Add,         ///< add
    CompareSet,  ///< compareSet
    DeleteKey,   ///< deleteKey
    Check,       ///< check
    Wait,        ///< wait
    NumKeys,     ///< numKeys
    MultiGet,    ///< multiGet
    MultiSet,    ///< multiSet
    Append,      ///< append
    QueuePush,   ///< queuePush
    QueuePop,    ///< queuePop; tryQueuePop too
    QueueLen,    ///< queueLen
  };
  /// How many kinds of Request there are: the length of Counts' arrays.
  static constexpr size_t kRequestKinds = static_cast<size_t>(Request::QueueLen) + 1;
  /// "set", "multiGet", ...
  /// \param request The kind.
  /// \return The name of the Store method it counts ("queuePop" for QueuePop), a static string.
  static const char* name(Request request);

  /// The counters at one moment (counts()), or the difference of two such snapshots.
  struct Counts {
    std::array<int64_t, kRequestKinds> requests{};  ///< calls, indexed by Request
    /// keys the calls named, indexed by Request: 1 per call that takes one key, the list's
    /// length for check, wait, multiGet and multiSet, 0 for numKeys.
    std::array<int64_t, kRequestKinds> keys{};
    /// \param request The kind.
    /// \return How many calls of that kind were counted: requests[request].
    int64_t operator[](Request request) const { return requests[static_cast<size_t>(request)]; }
    /// \return The calls of every kind, added up.
    int64_t totalRequests() const;
    /// \return The keys named by calls of every kind, added up.
    int64_t totalKeys() const;
    /// Per kind, this minus earlier (the calls made between two snapshots).
    /// \param earlier A snapshot of the same store taken before this one.
    /// \return The difference of each counter.
    Counts operator-(const Counts& earlier) const;
  };

  /// Throws InvalidArgument for a null store.
  /// \param store The store underneath, shared with its other users; its timeout() becomes this
  ///        store's.
  /// \throws InvalidArgument when store is null.
  explicit CountingStore(std::shared_ptr<Store> store);

  /// \return A snapshot of the counters: every call made through this store so far.
  Counts counts() const;

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
  void count(Request request, size_t keys);

  std::shared_ptr<Store> store_;
  std::array<std::atomic<int64_t>, kRequestKinds> requests_{};
  std::array<std::atomic<int64_t>, kRequestKinds> keys_{};
};

}  // namespace c10d::inline v1
