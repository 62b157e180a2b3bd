#include "c10d/net/SharedMemory.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <new>
#include <string_view>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Futex.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1::shm {

std::string hostIdentity() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  std::string identity = name;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  std::getline(boot, bootId);
  identity += "/" + bootId;
  for (const char* ns : {"/proc/self/ns/pid", "/proc/self/ns/net"}) {
    char link[64] = {};
    ssize_t n = ::readlink(ns, link, sizeof(link) - 1);
    identity += "/" + std::string(link, n > 0 ? static_cast<size_t>(n) : 0);
  }
  for (char& c : identity) {
    if (c == ' ' || c == '\n') c = '_';
  }
  return identity;
}

namespace {

// CLOCK_MONOTONIC at the last tick (1-4 ms old): steady_clock's base, without reading the TSC.
std::chrono::steady_clock::time_point tickNow() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(now.tv_sec) +
                                               std::chrono::nanoseconds(now.tv_nsec));
}

}  // namespace

bool processEnded(long pid) {
  // Read into the stack: this runs every 10 ms of a busy writer's writes.
  char path[40];
  std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  // The state follows "(command)", whose command is at most 16 bytes: well inside the buffer, and
  // the fields after it hold no ')'.
  char buffer[256];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  ::close(fd);
  if (n <= 0) return true;
  const std::string_view line(buffer, static_cast<size_t>(n));
  const size_t close = line.rfind(')');
  return close == std::string_view::npos || close + 2 >= line.size() || line[close + 2] == 'Z' ||
         line[close + 2] == 'X';
}

// ---- Segment ----

namespace {

std::string errnoText(int error) {
  return detail::concat(std::strerror(error), " (errno ", error, ")");
}

uint8_t* mapShared(int fd, size_t bytes) {
  void* at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return at == MAP_FAILED ? nullptr : static_cast<uint8_t*>(at);
}

}  // namespace

Segment Segment::create(size_t bytes) {
  Segment segment;
  segment.fd_ = ::memfd_create("c10d-shm", MFD_CLOEXEC);
  if (segment.fd_ < 0) C10D_THROW(Error, "memfd_create: ", errnoText(errno));
  if (::fchmod(segment.fd_, 0600) != 0 || ::ftruncate(segment.fd_, static_cast<off_t>(bytes)) != 0)
    C10D_THROW(Error, "sizing a shared memory segment of ", bytes, " bytes: ", errnoText(errno));
  segment.data_ = mapShared(segment.fd_, bytes);
  if (segment.data_ == nullptr) C10D_THROW(Error, "mmap of ", bytes, " bytes: ", errnoText(errno));
  segment.size_ = bytes;
  return segment;
}

Segment Segment::open(long pid, int fd, size_t bytes) {
  const std::string path = detail::concat("/proc/", pid, "/fd/", fd);
  Segment segment;
  segment.fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (segment.fd_ < 0) C10D_THROW(Error, "open ", path, ": ", errnoText(errno));
  struct stat about {};
  if (::fstat(segment.fd_, &about) != 0 || static_cast<size_t>(about.st_size) != bytes) {
    C10D_THROW(Error, path, " is ", about.st_size, " bytes, not the ", bytes,
               " of a segment: another file (a reused pid or descriptor?)");
  }
  segment.data_ = mapShared(segment.fd_, bytes);
  if (segment.data_ == nullptr) C10D_THROW(Error, "mmap of ", path, ": ", errnoText(errno));
  segment.size_ = bytes;
  segment.closeDescriptor();
  return segment;
}

Segment& Segment::operator=(Segment&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(fd_, other.fd_);
  return *this;
}

Segment::~Segment() {
  if (data_ != nullptr) ::munmap(data_, size_);
  closeDescriptor();
}

void Segment::closeDescriptor() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// ---- Channel ----

namespace {

// The words live in a segment another process maps.
void futexWait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout) {
  detail::futexWait(word, expected, timeout, detail::FutexScope::Shared);
}

void futexWake(std::atomic<uint32_t>& word) {
  detail::futexWake(word, detail::FutexScope::Shared);
}

// Spinning first catches a peer that answers within microseconds without a system call; the
// clock is read between batches of spins (a pause takes 10-150 cycles by CPU: 256 of them a few
// microseconds at most, within a budget's precision; a spin without end reads it less often).
constexpr int kSpinsBeforeSleep = 64;
constexpr int kSpinsBetweenChecks = 256;
constexpr int kSpinsBetweenChecksForever = 2048;
// Sleeps end this often to look at the deadline and the peer's process, and a peer's process
// is looked at (a read of /proc) no more often than this.
constexpr std::chrono::milliseconds kCheckInterval{10};
// With more ranks than cores, a waiter yields its core between looks this long before it sleeps:
// the peer it waits for is often runnable on that core, and a futex wake-up costs tens of us.
constexpr std::chrono::milliseconds kYieldBeforeSleep{1};
// But yields that return this late, several in a row, gave the core to a process of someone
// else's, which runs its whole time slice while our ranks take turns behind it, where a sleeper
// that is woken preempts it. Then every wait of this process sleeps at once for a while before
// yielding is tried again. (A late yield between quick ones is a peer rank's own long step.)
constexpr std::chrono::microseconds kSlowYield{500};
constexpr int kSlowYieldsInARow = 3;
constexpr std::chrono::milliseconds kSleepAfterSlowYields{100};
std::atomic<int64_t> yieldAgainAtNs{0};  // steady_clock; process-wide
std::atomic<int> slowYieldsInARow{0};

bool mayYield(std::chrono::steady_clock::time_point now) {
  return now.time_since_epoch().count() >= yieldAgainAtNs.load(std::memory_order_relaxed);
}

void yieldCore(std::chrono::steady_clock::time_point now) {
  sched_yield();
  const auto after = std::chrono::steady_clock::now();
  if (after - now <= kSlowYield) {
    if (slowYieldsInARow.load(std::memory_order_relaxed) != 0) {
      slowYieldsInARow.store(0, std::memory_order_relaxed);
    }
  } else if (slowYieldsInARow.fetch_add(1, std::memory_order_relaxed) + 1 >= kSlowYieldsInARow) {
    slowYieldsInARow.store(0, std::memory_order_relaxed);
    yieldAgainAtNs.store((after + kSleepAfterSlowYields).time_since_epoch().count(),
                         std::memory_order_relaxed);
  }
}

// Waits until ready() holds: spins for waiting.spinFor, yields for a while where ranks outnumber
// cores, then sleeps on signal (bumped by the other end when ready() may have changed) with
// sleeps set meanwhile so that end knows to wake it.
template <typename Ready, typename PeerEnded>
Wait waitUntil(Ready&& ready, std::atomic<uint32_t>& signal, std::atomic<uint32_t>& sleeps,
               const std::atomic<uint32_t>& closed, const Waiting& waiting, PeerEnded&& peerEnded) {
  if (ready()) return Wait::Ready;
  using Clock = std::chrono::steady_clock;
  const bool forever = waiting.spinFor == kSpinForever;
  Clock::time_point spinUntil = Clock::time_point::max(), yieldUntil = Clock::time_point::min();
  bool phasesSet = forever;  // the clock is read only once a first batch of spins found nothing
  bool reported = false;
  // A wait that spun tells its governor whether the spin caught the answer.
  auto report = [&](bool hit) {
    if (waiting.governor != nullptr && waiting.spinFor.count() > 0) waiting.governor->spun(hit);
  };
  for (bool spinning = waiting.spinFor.count() > 0;;) {
    const int spins = !spinning ? kSpinsBeforeSleep
                      : forever ? kSpinsBetweenChecksForever
                                : kSpinsBetweenChecks;
    for (int i = 0; i < spins; ++i) {
      if (ready()) {
        if (!reported) report(spinning);
        return Wait::Ready;
      }
      cpuRelax();
    }
    if (closed.load(std::memory_order_acquire) != 0) return Wait::Closed;
    const auto now = Clock::now();
    if (!phasesSet) {
      phasesSet = true;
      spinUntil = now + waiting.spinFor;
      yieldUntil = waiting.yield ? spinUntil + kYieldBeforeSleep : spinUntil;
    }
    if (now >= waiting.deadline) return Wait::TimedOut;
    if (peerEnded(now)) return Wait::PeerEnded;
    spinning = now < spinUntil;
    if (spinning) continue;
    if (!reported) {
      reported = true;
      report(false);
    }
    if (now < yieldUntil && mayYield(now)) {
      yieldCore(now);
      continue;
    }
    const uint32_t seen = signal.load(std::memory_order_seq_cst);
    sleeps.store(1, std::memory_order_seq_cst);
    // The other end publishes, then reads `sleeps`: either it sees 1 and wakes us, or we see
    // what it published here (or signal differs from seen, and the futex returns at once).
    if (!ready() && closed.load(std::memory_order_acquire) == 0) {
      futexWait(signal, seen,
                std::min<std::chrono::nanoseconds>(kCheckInterval, waiting.deadline - now));
    }
    sleeps.store(0, std::memory_order_relaxed);
  }
}

}  // namespace

void Channel::initialize(uint8_t* at, size_t capacity) {
  C10D_CHECK(capacity > 0 && capacity % kSlotBytes == 0, InvalidArgument,
             "shared memory channel capacity ", capacity, " is not a multiple of ", kSlotBytes);
  auto* control = new (at) Control{};
  control->magic = kMagic;
  control->capacity = capacity;
}

Channel::Channel(uint8_t* at)
    : control_(reinterpret_cast<Control*>(at)), data_(at + kControlBytes) {
  C10D_CHECK(control_->magic == kMagic, Error,
             "no shared memory channel where one was expected (magic ", control_->magic, ")");
  capacity_ = control_->capacity;
  read_ = control_->tail.load(std::memory_order_acquire);
  tailSeen_ = read_;
}

bool Channel::peerEnded(const Waiting& waiting, std::chrono::steady_clock::time_point now) {
  if (waiting.peerPid <= 0 || now - lastPeerCheck_ < kCheckInterval) return false;
  lastPeerCheck_ = now;
  return processEnded(waiting.peerPid);
}

Wait Channel::waitReadable(const Waiting& waiting, size_t* readable) {
  return waitUntil(
      [&] {
        *readable = control_->head.load(std::memory_order_acquire) - read_;
        return *readable > 0;
      },
      control_->headSignal, control_->readerSleeps, control_->closed, waiting,
      [&](auto now) { return peerEnded(waiting, now); });
}

size_t Channel::room(uint64_t head, size_t wanted) {
  size_t writable = capacity_ - (head - tailSeen_);
  if (writable < wanted) {
    tailSeen_ = control_->tail.load(std::memory_order_acquire);
    writable = capacity_ - (head - tailSeen_);
  }
  return writable;
}

Wait Channel::waitWritable(uint64_t head, size_t wanted, const Waiting& waiting, size_t* writable) {
  return waitUntil(
      [&] {
        *writable = room(head, wanted);
        return *writable > 0;
      },
      control_->tailSignal, control_->writerSleeps, control_->closed, waiting,
      [&](auto now) { return peerEnded(waiting, now); });
}

// The other end's signal moves only when it said it sleeps: it read the signal before saying so,
// so the bump makes its futex_wait return even if it has not started waiting yet.
void Channel::published(uint64_t head) {
  control_->head.store(head, std::memory_order_seq_cst);
  if (control_->readerSleeps.load(std::memory_order_seq_cst) != 0) {
    control_->headSignal.fetch_add(1, std::memory_order_seq_cst);
    futexWake(control_->headSignal);
  }
}

void Channel::consumed(uint64_t tail) {
  control_->tail.store(tail, std::memory_order_seq_cst);
  if (control_->writerSleeps.load(std::memory_order_seq_cst) != 0) {
    control_->tailSignal.fetch_add(1, std::memory_order_seq_cst);
    futexWake(control_->tailSignal);
  }
}

Wait Channel::write(const void* header, size_t headerBytes, const void* payload, size_t bytes,
                    const Waiting& waiting) {
  if (control_->closed.load(std::memory_order_acquire) != 0) return Wait::Closed;
  // A write into free room never waits, so it would never notice a reader that died: a writer
  // that only sends (a broadcast's root) must fail soon, as on a socket (EPIPE). The kernel's
  // tick clock is enough to space those looks 10 ms apart, and far cheaper than steady_clock (a
  // write is a small op's hot path; issue 32; measured: docs/performance-history.md, "Figures
  // that lived in code comments").
  if (peerEnded(waiting, tickNow())) return Wait::PeerEnded;
  uint64_t head = control_->head.load(std::memory_order_relaxed);
  if (travelsInline(headerBytes, bytes)) {
    size_t writable;
    if (Wait w = waitWritable(head, kSlotBytes, waiting, &writable); w != Wait::Ready) return w;
    writeInline(head, header, headerBytes, payload, bytes);
    return Wait::Ready;
  }
  size_t left = bytes;
  size_t padded = roundUp(bytes);
  size_t writable;
  if (Wait w = waitWritable(head, kSlotBytes + std::min(padded, kPublishBytes), waiting, &writable);
      w != Wait::Ready) {
    return w;
  }
  std::memcpy(data_ + head % capacity_, header, headerBytes);  // a slot never wraps
  head += kSlotBytes;
  const auto* from = static_cast<const uint8_t*>(payload);
  // A small message goes out with its header in one publish.
  if (padded + kSlotBytes <= writable && padded <= kPublishBytes) {
    for (size_t done = 0; done < bytes;) {
      const size_t offset = (head + done) % capacity_;
      const size_t n = std::min(bytes - done, capacity_ - offset);
      std::memcpy(data_ + offset, from + done, n);
      done += n;
    }
    published(head + padded);
    return Wait::Ready;
  }
  // A large one's header goes out alone first: holding it back for the payload's first piece
  // cost allreduce bandwidth (measured: docs/performance-history.md, "Figures that lived in
  // code comments").
  published(head);
  while (padded > 0) {
    if (Wait w = waitWritable(head, std::min(padded, kPublishBytes), waiting, &writable);
        w != Wait::Ready) {
      return w;
    }
    const size_t offset = head % capacity_;
    const size_t piece = std::min({writable, padded, capacity_ - offset, kPublishBytes});
    if (left > 0) {
      const size_t n = std::min(piece, left);
      std::memcpy(data_ + offset, from, n);
      from += n;
      left -= n;
    }
    padded -= piece;
    head += piece;
    published(head);
  }
  return Wait::Ready;
}

Wait Channel::readHeader(void* header, size_t headerBytes, const Waiting& waiting) {
  // A closed channel still hands out what was written before, as a socket does.
  size_t readable;
  if (Wait w = waitReadable(waiting, &readable); w != Wait::Ready) return w;
  std::memcpy(header, data_ + read_ % capacity_, headerBytes);
  headerBytes_ = headerBytes;
  read_ += kSlotBytes;  // published with the payload
  return Wait::Ready;
}

void Channel::writeInline(uint64_t head, const void* header, size_t headerBytes,
                          const void* payload, size_t bytes) {
  uint8_t* slot = data_ + head % capacity_;  // a slot never wraps
  std::memcpy(slot, header, headerBytes);
  std::memcpy(slot + inlineOffset(headerBytes), payload, bytes);
  published(head + kSlotBytes);
}

bool Channel::tryWrite(const void* header, size_t headerBytes, const void* payload, size_t bytes) {
  const uint64_t head = control_->head.load(std::memory_order_relaxed);
  if (travelsInline(headerBytes, bytes)) {
    if (room(head, kSlotBytes) < kSlotBytes) return false;
    writeInline(head, header, headerBytes, payload, bytes);
    return true;
  }
  const size_t need = kSlotBytes + roundUp(bytes);
  if (need > room(head, need)) return false;
  std::memcpy(data_ + head % capacity_, header, headerBytes);  // a slot never wraps
  const auto* from = static_cast<const uint8_t*>(payload);
  for (size_t done = 0; done < bytes;) {
    const size_t offset = (head + kSlotBytes + done) % capacity_;
    const size_t n = std::min(bytes - done, capacity_ - offset);
    std::memcpy(data_ + offset, from + done, n);
    done += n;
  }
  published(head + need);
  return true;
}

bool Channel::tryReadHeader(void* header, size_t headerBytes) {
  if (control_->head.load(std::memory_order_acquire) == read_) return false;
  std::memcpy(header, data_ + read_ % capacity_, headerBytes);
  headerBytes_ = headerBytes;
  read_ += kSlotBytes;
  return true;
}

void Channel::close() {
  control_->closed.store(1, std::memory_order_seq_cst);
  control_->headSignal.fetch_add(1, std::memory_order_seq_cst);
  control_->tailSignal.fetch_add(1, std::memory_order_seq_cst);
  futexWake(control_->headSignal);
  futexWake(control_->tailSignal);
}

// ---- Doorbell ----

void Doorbell::ring() {
  if (words_->sleepers.load(std::memory_order_seq_cst) == 0) return;
  words_->word.fetch_add(1, std::memory_order_seq_cst);
  futexWake(words_->word);
}

uint32_t Doorbell::arm() {
  words_->sleepers.fetch_add(1, std::memory_order_seq_cst);
  return words_->word.load(std::memory_order_seq_cst);
}

void Doorbell::sleep(uint32_t armed, std::chrono::nanoseconds timeout) {
  futexWait(words_->word, armed, timeout);
}

void Doorbell::disarm() {
  words_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

std::string readProcessMemory(long pid, uint64_t address, void* into, size_t bytes) {
  auto* to = static_cast<uint8_t*>(into);
  while (bytes > 0) {
    struct iovec local {
      to, bytes
    };
    struct iovec remote {
      reinterpret_cast<void*>(address), bytes
    };
    const ssize_t n = ::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
    if (n <= 0) {
      return detail::concat("process_vm_readv of ", bytes, " bytes from process ", pid, ": ",
                            n == 0 ? std::string("nothing read") : errnoText(errno));
    }
    to += n;
    address += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return "";
}

// ---- SplitReader ----

SplitReader::~SplitReader() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string SplitReader::read(long pid, uint64_t address, void* into, size_t bytes) {
  if (bytes < kSplitBytes) return readProcessMemory(pid, address, into, bytes);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  const size_t near = bytes / 2 / 4096 * 4096;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    job_ = Job{pid, address + near, static_cast<uint8_t*>(into) + near, bytes - near};
    done_.reset();
  }
  changed_.notify_all();
  std::string failed = readProcessMemory(pid, address, into, near);
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return done_.has_value(); });
  return failed.empty() ? *done_ : failed;
}

void SplitReader::loop() {
  detail::nameThisThread("c10d-shm-read");
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || job_.has_value(); });
    if (stopping_) return;
    Job job = *job_;
    job_.reset();
    lock.unlock();
    std::string failed = readProcessMemory(job.pid, job.address, job.into, job.bytes);
    lock.lock();
    done_ = std::move(failed);
    changed_.notify_all();
  }
}

}  // namespace c10d::inline v1::shm
