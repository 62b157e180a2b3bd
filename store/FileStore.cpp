#include "store/FileStore.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <span>
#include <thread>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "store/KeyValueState.hpp"

namespace c10d::inline v1 {
namespace {

using Changes = detail::KeyValueState::Changes;

// Record layout: [u8 kind] [u32 LE key bytes] [u32 LE value bytes] [key] [value]. Lengths are
// little-endian whatever the host, so the file means the same to every process reading it.
constexpr uint8_t kSetRecord = 0;
constexpr uint8_t kDeleteRecord = 1;
constexpr uint8_t kQueuePushRecord = 2;  // the value goes to the back of key's queue
constexpr uint8_t kQueuePopRecord = 3;   // no value: key's front value goes
constexpr size_t kHeaderBytes = 9;

constexpr char kRefsKey[] = "__c10d_filestore_refs";
constexpr char kOpenedKey[] = "__c10d_filestore_opened";

constexpr std::chrono::milliseconds kFirstPoll{1};
constexpr std::chrono::milliseconds kMaxPoll{10};

[[noreturn]] void throwSystemError(const char* op, const char* call, const std::string& path,
                                   int err) {
  C10D_THROW(StoreError, "FileStore ", op, ": ", call, " on ", path,
             " failed: ", std::strerror(err));
}

void putU32(std::vector<uint8_t>& out, uint32_t value) {
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<uint8_t>(value >> shift));
}

uint32_t getU32(const uint8_t* data) {
  return static_cast<uint32_t>(data[0]) | static_cast<uint32_t>(data[1]) << 8 |
         static_cast<uint32_t>(data[2]) << 16 | static_cast<uint32_t>(data[3]) << 24;
}

// Callers have checked key and value against the Store limits, so the lengths fit in a u32.
void encodeRecord(std::vector<uint8_t>& out, uint8_t kind, const std::string& key,
                  std::span<const uint8_t> value = {}) {
  out.push_back(kind);
  putU32(out, static_cast<uint32_t>(key.size()));
  putU32(out, static_cast<uint32_t>(value.size()));
  out.insert(out.end(), key.begin(), key.end());
  out.insert(out.end(), value.begin(), value.end());
}

void encodeSet(std::vector<uint8_t>& out, const std::string& key, const Store::Bytes& value) {
  encodeRecord(out, kSetRecord, key, value);
}

// The records of the changes an operation decided on, in order. A change's value obeys the
// Store limits like any other (KeyValueState checks what it computes), so it fits a record.
std::vector<uint8_t> encodeChanges(const Changes& changes) {
  std::vector<uint8_t> records;
  for (const auto& change : changes) {
    if (change.value.has_value()) {
      encodeSet(records, change.key, *change.value);
    } else {
      encodeRecord(records, kDeleteRecord, change.key);
    }
  }
  return records;
}

// flock() for the span of one call; released however the call ends, so an exception cannot
// leave other processes locked out.
class FileLock {
 public:
  FileLock(int fd, bool exclusive, const std::string& path, const char* op) : fd_(fd) {
    while (::flock(fd_, exclusive ? LOCK_EX : LOCK_SH) != 0) {
      if (errno != EINTR) throwSystemError(op, "flock", path, errno);
    }
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

FileStore::FileStore(std::string path, int numWorkers, std::chrono::milliseconds timeout)
    : Store(timeout),
      path_(std::move(path)),
      numWorkers_(numWorkers),
      state_(std::make_unique<detail::KeyValueState>()) {
  C10D_CHECK(!path_.empty(), InvalidArgument, "FileStore: empty path");
  do {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) {
    C10D_THROW(StoreError, "FileStore: cannot open ", path_, ": ", std::strerror(errno));
  }
  if (numWorkers_ <= 0) return;
  try {
    registerUser();
  } catch (...) {
    // No destructor runs for a throwing constructor, and nothing was counted: just close.
    ::close(fd_);
    throw;
  }
}

FileStore::~FileStore() {
  if (numWorkers_ > 0) {
    try {
      unregisterUser();
    } catch (const std::exception& e) {
      C10D_LOG(Warning, "FileStore: cleanup of ", path_,
               " failed, the file may be left behind: ", e.what());
    }
  }
  ::close(fd_);
}

void FileStore::registerUser() {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, "open");
  refresh("open", true);
  // Two adds of 1, decided against the same contents (distinct keys) and written as one write.
  Changes changes;
  state_->planAdd(kRefsKey, 1, changes);
  state_->planAdd(kOpenedKey, 1, changes);
  commit(encodeChanges(changes), "open");
}

void FileStore::unregisterUser() {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, "close");
  refresh("close", true);
  Changes changes;
  const int64_t refs = state_->planAdd(kRefsKey, -1, changes);
  // Written even when the file goes next: a process that opened the path just before the unlink
  // still finds the count right in the file it holds.
  commit(encodeChanges(changes), "close");
  if (refs > 0 || state_->counter(kOpenedKey) < numWorkers_) return;
  // The path may name another file by now (deleted and created again by someone else); only
  // the file this store used is ours to remove.
  struct stat ours {};
  struct stat named {};
  if (::fstat(fd_, &ours) != 0 || ::stat(path_.c_str(), &named) != 0 ||
      ours.st_dev != named.st_dev || ours.st_ino != named.st_ino) {
    return;
  }
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    throwSystemError("close", "unlink", path_, errno);
  }
  C10D_LOG(Debug, "FileStore: last of ", numWorkers_, " workers gone, removed ", path_);
}

void FileStore::refresh(const char* op, bool exclusive) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throwSystemError(op, "fstat", path_, errno);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // Records are never removed under the lock, so a shorter file was truncated or rewritten by
  // something outside this protocol, and our map no longer matches it.
  C10D_CHECK(size >= offset_, StoreError, "FileStore ", op, ": ", path_, " shrank to ", size,
             " bytes, below the ", offset_, " already read; was it truncated while in use?");
  if (size == offset_) return;
  std::vector<uint8_t> data(size - offset_);
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n =
        ::pread(fd_, data.data() + got, data.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      throwSystemError(op, "pread", path_, errno);
    }
    if (n == 0) break;  // shrank since fstat; the torn-record check below judges what is left
    got += static_cast<size_t>(n);
  }
  replay(data.data(), got, exclusive, op);
  if (exclusive && got < data.size()) {
    corrupt(op, offset_, "the file ended before the size fstat reported");
  }
}

size_t FileStore::replay(const uint8_t* data, size_t size, bool exclusive, const char* op) {
  size_t pos = 0;
  while (pos < size) {
    const size_t left = size - pos;
    if (left < kHeaderBytes) {
      if (exclusive) corrupt(op, offset_, "torn record header at the end of the file");
      break;
    }
    const uint8_t* header = data + pos;
    const uint8_t kind = header[0];
    const uint32_t keyBytes = getU32(header + 1);
    const uint32_t valueBytes = getU32(header + 5);
    if (kind > kQueuePopRecord) {
      corrupt(op, offset_, "unknown record kind " + std::to_string(kind));
    }
    if (keyBytes == 0 || keyBytes > kMaxKeyBytes || valueBytes > kMaxValueBytes ||
        ((kind == kDeleteRecord || kind == kQueuePopRecord) && valueBytes != 0)) {
      corrupt(op, offset_,
              "impossible record lengths (key " + std::to_string(keyBytes) + ", value " +
                  std::to_string(valueBytes) + " bytes)");
    }
    const size_t recordBytes = kHeaderBytes + keyBytes + valueBytes;
    if (left < recordBytes) {
      if (exclusive) {
        corrupt(
            op, offset_,
            "record of " + std::to_string(recordBytes) + " bytes runs past the end of the file");
      }
      break;
    }
    const char* keyData = reinterpret_cast<const char*>(header + kHeaderBytes);
    std::string key(keyData, keyBytes);
    const uint8_t* value = header + kHeaderBytes + keyBytes;
    if (kind == kSetRecord) {
      state_->applySet(std::move(key), std::span<const uint8_t>(value, valueBytes));
    } else if (kind == kDeleteRecord) {
      state_->applyErase(key);
    } else if (kind == kQueuePushRecord) {
      state_->queuePush(key, Bytes(value, value + valueBytes));
    } else if (!state_->queuePop(key)) {  // pops are written under the lock, after a push
      corrupt(op, offset_, "a pop from the empty queue '" + key + "'");
    }
    // Advanced per record, so records replayed before a corrupt one are not replayed again.
    offset_ += recordBytes;
    pos += recordBytes;
  }
  return pos;
}

void FileStore::commit(const std::vector<uint8_t>& records, const char* op) {
  size_t written = 0;
  while (written < records.size()) {
    ssize_t n = ::pwrite(fd_, records.data() + written, records.size() - written,
                         static_cast<off_t>(offset_ + written));
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int err = n < 0 ? errno : ENOSPC;
    // Still under the exclusive lock, so no one has read the partial record yet.
    if (::ftruncate(fd_, static_cast<off_t>(offset_)) != 0) {
      C10D_LOG(Warning, "FileStore ", op, ": could not cut a failed write off ", path_,
               " at offset ", offset_, ": ", std::strerror(errno));
    }
    throwSystemError(op, "pwrite", path_, err);
  }
  replay(records.data(), records.size(), true, op);
}

void FileStore::corrupt(const char* op, uint64_t offset, const std::string& why) const {
  C10D_THROW(StoreError, "FileStore ", op, ": log ", path_, " is corrupt at offset ", offset, ": ",
             why, "; delete the file once no process uses it");
}

std::vector<FileStore::Bytes> FileStore::poll(const std::vector<std::string>& keys,
                                              std::chrono::milliseconds timeout, const char* op,
                                              bool wantValues) {
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "FileStore ", op,
             ": timeout must be positive, got ", timeout.count(), " ms");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto delay = kFirstPoll;
  std::vector<std::string> missing;
  while (true) {
    {
      // Both locks are let go between looks, so the writer we wait for can get in.
      std::lock_guard<std::mutex> guard(mutex_);
      FileLock lock(fd_, false, path_, op);
      refresh(op, false);
      missing = state_->missing(keys);
      if (missing.empty()) {
        if (!wantValues) return {};
        return state_->multiGet(keys);
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(delay, deadline - now));
    delay = std::min(delay * 2, kMaxPoll);
  }
  throw TimeoutError(detail::concat("FileStore ", op, ": key(s) ", describeKeys(missing),
                                    " not set after ", timeout.count(), " ms (file ", path_, ")"),
                     ErrorContext{.op = detail::concat("store ", op), .key = missing.front()});
}

void FileStore::set(const std::string& key, const Bytes& value) {
  detail::KeyValueState::checkSet(key, value);
  // Nothing to decide: encoded before the locks are taken, so a large value holds them less.
  std::vector<uint8_t> records;
  encodeSet(records, key, value);
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, "set");
  refresh("set", true);
  commit(records, "set");
}

FileStore::Bytes FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("get", key);
  return std::move(poll({key}, timeout, "get", true).front());
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  checkKey("add", key);
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, "add");
  refresh("add", true);
  Changes changes;
  const int64_t result = state_->planAdd(key, delta, changes);
  commit(encodeChanges(changes), "add");
  return result;
}

FileStore::Bytes FileStore::compareSet(const std::string& key, const Bytes& expected,
                                       const Bytes& desired) {
  detail::KeyValueState::checkCompareSet(key, desired);
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, "compareSet");
  refresh("compareSet", true);
  Changes changes;
  Bytes result = state_->planCompareSet(key, expected, desired, changes);
  if (!changes.empty()) commit(encodeChanges(changes), "compareSet");
  return result;
}

bool FileStore::deleteKey(const std::string& key) {
  checkKey("deleteKey", key);
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, "deleteKey");
  refresh("deleteKey", true);
  Changes changes;
  const bool existed = state_->planDeleteKey(key, changes);
  if (!changes.empty()) commit(encodeChanges(changes), "deleteKey");
  return existed;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  checkKeys("check", keys);
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, false, path_, "check");
  refresh("check", false);
  return state_->hasAll(keys);
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  checkKeys("wait", keys);
  poll(keys, timeout, "wait", false);
}

int64_t FileStore::numKeys() {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, false, path_, "numKeys");
  refresh("numKeys", false);
  return state_->numKeys();
}

std::vector<FileStore::Bytes> FileStore::multiGet(const std::vector<std::string>& keys,
                                                  std::chrono::milliseconds timeout) {
  checkKeys("multiGet", keys);
  return poll(keys, timeout, "multiGet", true);
}

void FileStore::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  detail::KeyValueState::checkMultiSet(keys, values);
  // Nothing to decide, as for set: the records, replayed in order, are the multiSet.
  std::vector<uint8_t> records;
  for (size_t i = 0; i < keys.size(); ++i) encodeSet(records, keys[i], values[i]);
  if (records.empty()) return;
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, "multiSet");
  refresh("multiSet", true);
  commit(records, "multiSet");
}

void FileStore::append(const std::string& key, const Bytes& value) {
  checkKey("append", key);
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, "append");
  refresh("append", true);
  Changes changes;
  state_->planAppend(key, value, changes);
  commit(encodeChanges(changes), "append");
}

void FileStore::queuePush(const std::string& key, const Bytes& value) {
  checkKey("queuePush", key);
  checkValue("queuePush", key, value.size());
  std::vector<uint8_t> records;
  encodeRecord(records, kQueuePushRecord, key, value);
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, "queuePush");
  refresh("queuePush", true);
  commit(records, "queuePush");
}

std::optional<FileStore::Bytes> FileStore::popLocked(const std::string& key, const char* op) {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, true, path_, op);
  refresh(op, true);
  const Bytes* front = state_->queueFront(key);
  if (front == nullptr) return std::nullopt;
  Bytes value = *front;
  std::vector<uint8_t> records;
  encodeRecord(records, kQueuePopRecord, key);
  commit(records, op);
  return value;
}

FileStore::Bytes FileStore::queuePop(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey("queuePop", key);
  C10D_CHECK(timeout.count() > 0, InvalidArgument,
             "FileStore queuePop: timeout must be positive, got ", timeout.count(), " ms");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto delay = kFirstPoll;
  while (true) {
    if (auto value = popLocked(key, "queuePop")) return std::move(*value);
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(delay, deadline - now));
    delay = std::min(delay * 2, kMaxPoll);
  }
  throw TimeoutError(detail::concat("FileStore queuePop: queue '", key, "' stayed empty for ",
                                    timeout.count(), " ms (file ", path_, ")"),
                     ErrorContext{.op = "store queuePop", .key = key});
}

std::optional<FileStore::Bytes> FileStore::tryQueuePop(const std::string& key) {
  checkKey("tryQueuePop", key);
  return popLocked(key, "tryQueuePop");
}

int64_t FileStore::queueLen(const std::string& key) {
  checkKey("queueLen", key);
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, false, path_, "queueLen");
  refresh("queueLen", false);
  return state_->queueLen(key);
}

}  // namespace c10d::inline v1
