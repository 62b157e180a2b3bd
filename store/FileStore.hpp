#pragma once

/// \file
/// FileStore: a Store kept in one file, shared by the processes of one host.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/Store.hpp"

namespace c10d::inline v1 {

namespace detail {
class KeyValueState;
}

/// A store shared by the processes of one host through one file: the store behind
/// `file:///path` init (PyTorch's FileStore). See Store for semantics.
///
/// The file is an append-only log of set and delete records. Each FileStore replays the records
/// it has not seen yet into a private map before every call, holding flock() on the file (shared
/// to read, exclusive to write), and appends its own records in one write before letting go of
/// the exclusive lock; so every FileStore on the path agrees on one order of operations. The log
/// only grows (each add() is a record), as PyTorch's does. Blocking calls poll the file, sleeping
/// 1 ms at first and up to 10 ms between looks.
///
/// The path must be on a filesystem where flock() excludes the processes using it (a local disk
/// or tmpfs, not every network filesystem). flock() belongs to the open file, which fork()
/// shares: construct a FileStore in each process after forking, never use one inherited.
///
/// Cleanup: with numWorkers > 0, each construction counts itself in the reserved keys
/// "__c10d_filestore_opened" (constructions so far) and "__c10d_filestore_refs" (objects alive),
/// and the destructor that brings refs to 0 once numWorkers constructions have happened unlinks
/// the file, so a finished job leaves nothing behind and the path can be used again. Those two
/// keys then count in numKeys(); with numWorkers <= 0 they are never written and the file stays.
///
/// Errors: StoreError naming the path and the system error when the file cannot be opened,
/// locked, read or written; StoreError naming the path and offset when the log is corrupt or
/// ends in a torn record (a writer died mid-write): delete the file, no job can use it any more.
/// TimeoutError and InvalidArgument as for every Store. The destructor never throws; it logs.
///
/// Threading: a mutex serialises the threads of one FileStore. Distinct FileStores on one path,
/// even in one process, open the file separately and so exclude each other through flock().
class FileStore : public Store {
 public:
  /// Opens the store at path, creating the file when absent.
  /// \param path The file: not empty, on a filesystem where flock() works (see above).
  /// \param numWorkers How many FileStores the job constructs on path, counting every process's;
  ///        > 0 turns on the cleanup above. <= 0 (the default): the file is never removed.
  /// \param timeout The default timeout of blocking calls; must be positive.
  /// \throws InvalidArgument when path is empty or timeout is not positive.
  /// \throws StoreError when the file cannot be opened; with numWorkers > 0 (which reads and
  ///         writes it here) also when it cannot be locked, read or written, or is corrupt.
  explicit FileStore(std::string path, int numWorkers = -1,
                     std::chrono::milliseconds timeout = kDefaultTimeout);
  ~FileStore() override;

  /// \return The file's path, as given to the constructor.
  const std::string& path() const { return path_; }

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
  /// \copydoc Store::queuePop(const std::string&,std::chrono::milliseconds)
  ///
  /// A blocking pop polls, as get does.
  Bytes queuePop(const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<Bytes> tryQueuePop(const std::string& key) override;
  int64_t queueLen(const std::string& key) override;

 private:
  /// Takes both locks and pops key's front value if there is one.
  std::optional<Bytes> popLocked(const std::string& key, const char* op);
  /// Polls until all keys exist; returns their values when wantValues. Throws TimeoutError.
  std::vector<Bytes> poll(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                          const char* op, bool wantValues);
  /// The numWorkers > 0 bookkeeping of the constructor and destructor.
  void registerUser();
  void unregisterUser();

  // The helpers below expect mutex_ and the file lock held.

  /// Replays records past offset_. Under a shared lock a torn last record is left unread: where
  /// flock() does not reach every writer it may be a write in progress. Under the exclusive lock
  /// it is corruption, since the record we are about to write would land after it.
  void refresh(const char* op, bool exclusive);
  /// Applies the records in data, which starts at file offset offset_, to state_, advancing
  /// offset_ past each; returns how many bytes were whole records.
  size_t replay(const uint8_t* data, size_t size, bool exclusive, const char* op);
  /// Writes encoded records at the end of the file (offset_ after an exclusive refresh) and
  /// applies them. A failed write is cut off again so no torn record stays behind. Operations
  /// that read before they write ask state_ for their records (its plan* methods), so the log
  /// holds what HashStore and the TCPStore server would have done.
  void commit(const std::vector<uint8_t>& records, const char* op);
  [[noreturn]] void corrupt(const char* op, uint64_t offset, const std::string& why) const;

  std::string path_;
  int numWorkers_;
  int fd_ = -1;
  std::mutex mutex_;
  /// The keys and what each operation does to them (store/KeyValueState.hpp), behind a pointer so
  /// that this installed header needs none of the private ones.
  std::unique_ptr<detail::KeyValueState> state_;
  uint64_t offset_ = 0;  ///< bytes of the log replayed into state_
};

}  // namespace c10d::inline v1
