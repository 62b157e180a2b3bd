#pragma once

// Private (not installed): memory shared by processes of one host, and a one-way byte channel in
// it. A segment is an anonymous memfd: a peer maps it through /proc/<pid>/fd/<fd>, which the
// kernel allows only to processes that may trace the owner (same user, or CAP_SYS_PTRACE). It
// has no name, so nothing is left in /dev/shm when a process is killed: the kernel frees the
// memory with the last mapping.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "c10d/net/Spin.hpp"

namespace c10d::inline v1::shm {

// Equal in two processes when they are on one host for our purposes: the same kernel (boot id
// and host name), the same process ids (pid namespace: a peer's pid can be looked up) and the
// same network namespace (separate ones are separate hosts to a network, and the multi-host
// tests make their hosts of them). One word, no spaces.
std::string hostIdentity();

// Whether the process pid on this host has ended: gone, or a zombie not yet reaped.
bool processEnded(long pid);

// A pause between two looks at memory another process writes.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class Segment {
 public:
  Segment() = default;
  // A new zeroed segment of bytes, private to this user (mode 0600). Throws on failure.
  static Segment create(size_t bytes);
  // Maps the segment that process pid holds open as fd, which must be bytes long. Throws with
  // the reason (no such process, not permitted, another size) on failure.
  static Segment open(long pid, int fd, size_t bytes);
  Segment(Segment&& other) noexcept { *this = std::move(other); }
  Segment& operator=(Segment&& other) noexcept;
  ~Segment();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  // Closes the descriptor peers open the segment by; the mapping stays.
  void closeDescriptor();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

// How a wait on a channel ended.
enum class Wait { Ready, Closed, PeerEnded, TimedOut };

struct Waiting {
  std::chrono::steady_clock::time_point deadline;
  long peerPid = 0;  // the process at the other end: a wait ends when it has ended
  // How long the wait spins before it sleeps on a futex: kSpinForever never sleeps, zero spins a
  // few dozen times only. A governor, when given, is told whether the spin caught the answer.
  std::chrono::nanoseconds spinFor{0};
  SpinGovernor* governor = nullptr;
  // More ranks than cores on this host: after the spin, the wait yields the core between looks
  // for a while before it sleeps, and the peer being waited for can run.
  bool yield = false;
};

// One direction between two processes: a ring of bytes in shared memory with one writer and one
// reader. Messages are a header of up to kSlotBytes and a payload, each starting on a slot
// boundary, so every piece a reader is handed is whole elements of any dtype; a payload that fits
// beside its header, from inlineOffset on, travels in the header's slot instead. A writer blocks
// while the ring is full, a reader while it is empty, as on a socket.
class Channel {
 public:
  static constexpr size_t kSlotBytes = 64;
  // Room for the control block, on its own page so that data starts page-aligned.
  static constexpr size_t kControlBytes = 4096;
  static constexpr size_t bytesFor(size_t capacity) { return kControlBytes + capacity; }
  // Where a payload starts in its header's slot (aligned for any dtype), and whether it goes
  // there. One cache line then carries the whole message, which made small sendrecvs faster
  // (issue 32; measured: docs/performance-history.md, "Figures that lived in code comments").
  static constexpr size_t inlineOffset(size_t headerBytes) { return (headerBytes + 15) / 16 * 16; }
  static constexpr bool travelsInline(size_t headerBytes, size_t bytes) {
    return bytes > 0 && inlineOffset(headerBytes) + bytes <= kSlotBytes;
  }

  Channel() = default;
  // Initializes a channel of capacity bytes (a multiple of kSlotBytes) at `at`.
  static void initialize(uint8_t* at, size_t capacity);
  // A channel initialized at `at`; throws when there is none.
  explicit Channel(uint8_t* at);

  // Fails with PeerEnded when the reader's process has ended, looked at every 10 ms of writes.
  Wait write(const void* header, size_t headerBytes, const void* payload, size_t bytes,
             const Waiting& waiting);
  Wait readHeader(void* header, size_t headerBytes, const Waiting& waiting);
  // Without waiting, for a reader that serves several channels: tryWrite writes the whole
  // message in one publish when the ring has room for it (false: not yet; the message must fit
  // in the capacity), tryReadHeader reads the next header when one is there, and its payload
  // is then all there for readPayload (written by tryWrite), which must follow even when empty.
  bool tryWrite(const void* header, size_t headerBytes, const void* payload, size_t bytes);
  bool tryReadHeader(void* header, size_t headerBytes);
  bool closed() const { return control_->closed.load(std::memory_order_acquire) != 0; }
  // Hands consume(const uint8_t* data, size_t n) the next `bytes` of payload in place, in pieces
  // of whole slots (the last may end early), as they arrive. bytes must be what the writer
  // wrote after the header just read.
  template <typename Consume>
  Wait readPayload(size_t bytes, const Waiting& waiting, Consume&& consume) {
    if (travelsInline(headerBytes_, bytes)) {  // already here, with its header
      consume(data_ + (read_ - kSlotBytes) % capacity_ + inlineOffset(headerBytes_), bytes);
      consumed(read_);
      return Wait::Ready;
    }
    size_t left = bytes;
    size_t padded = roundUp(bytes);
    while (padded > 0) {
      size_t readable;
      if (Wait w = waitReadable(waiting, &readable); w != Wait::Ready) return w;
      const size_t offset = read_ % capacity_;
      const size_t piece = std::min({readable, padded, capacity_ - offset, kPublishBytes});
      if (left > 0) {
        const size_t n = std::min(piece, left);
        consume(data_ + offset, n);
        left -= n;
      }
      padded -= piece;
      read_ += piece;
      consumed(read_);
    }
    if (bytes == 0) consumed(read_);  // the header's slot
    return Wait::Ready;
  }

  // Ends every wait on the channel, at both ends, with Wait::Closed; later writes fail alike, and
  // reads once what was written before is read.
  void close();

 private:
  // Payload goes in steps of at most this, so a reader starts on a large message before the
  // writer has finished it.
  static constexpr size_t kPublishBytes = 64 * 1024;
  static constexpr uint64_t kMagic = 0x31'6d'68'73'64'30'31'63;  // "c10dshm1"

  struct alignas(64) Control {
    uint64_t magic;
    uint64_t capacity;
    alignas(64) std::atomic<uint64_t> head;  // bytes written, by the writer
    std::atomic<uint32_t> headSignal;        // futex word: bumped at a publish the reader sleeps on
    std::atomic<uint32_t> readerSleeps;      // the reader is (about to be) in futex_wait
    alignas(64) std::atomic<uint64_t> tail;  // bytes read, by the reader
    std::atomic<uint32_t> tailSignal;  // futex word: bumped as room is freed for a sleeping writer
    std::atomic<uint32_t> writerSleeps;
    alignas(64) std::atomic<uint32_t> closed;
  };
  static_assert(sizeof(Control) <= kControlBytes);
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be address-free");

  static size_t roundUp(size_t bytes) { return (bytes + kSlotBytes - 1) / kSlotBytes * kSlotBytes; }
  // Whether the process at the other end has ended, looked at (a read of /proc) at most once
  // per 10 ms by this end, waiting or not.
  bool peerEnded(const Waiting& waiting, std::chrono::steady_clock::time_point now);
  Wait waitReadable(const Waiting& waiting, size_t* readable);
  // The writer's free room from head: from its last look at the reader's tail while that shows
  // wanted bytes, else from a fresh one. The tail's cache line then stays with the reader between
  // messages, instead of crossing to the writer at the start of each (issue 32; measured:
  // docs/performance-history.md, "Figures that lived in code comments").
  size_t room(uint64_t head, size_t wanted);
  // Waits until room(head, wanted) is not zero, and sets *writable to it.
  Wait waitWritable(uint64_t head, size_t wanted, const Waiting& waiting, size_t* writable);
  // Header and payload in the slot at head, published as one.
  void writeInline(uint64_t head, const void* header, size_t headerBytes, const void* payload,
                   size_t bytes);
  void published(uint64_t head);
  void consumed(uint64_t tail);

  Control* control_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
  // This end's last look at the other end's process.
  std::chrono::steady_clock::time_point lastPeerCheck_;
  // The reader's position: ahead of the published tail by the header just read, so that a small
  // message frees its room in one publish.
  uint64_t read_ = 0;
  size_t headerBytes_ = 0;  // of the header just read: where its payload is (travelsInline)
  // The writer's last look at control_->tail (room): never ahead of it.
  uint64_t tailSeen_ = 0;
};

// One futex word for everything that wakes a process's readers of several channels (a thread
// sleeps on one word only): writers ring it after publishing, and it costs a system call only
// while someone sleeps on it. Lives in shared memory, in the readers' segment.
class Doorbell {
 public:
  static constexpr size_t kBytes = 64;
  Doorbell() = default;
  explicit Doorbell(uint8_t* at) : words_(reinterpret_cast<Words*>(at)) {}
  void ring();
  // To sleep: arm, look once more for work (a ring after arm is not lost), then sleep until a
  // ring or the timeout, and disarm.
  uint32_t arm();
  void sleep(uint32_t armed, std::chrono::nanoseconds timeout);
  void disarm();

 private:
  struct Words {
    std::atomic<uint32_t> word;      // futex word: bumped by a ring while someone sleeps
    std::atomic<uint32_t> sleepers;  // armed and not yet disarmed
  };
  static_assert(sizeof(Words) <= kBytes);
  Words* words_ = nullptr;
};

// Copies bytes at address in process pid into into (cross-memory attach: one copy, with the
// same permission as mapping its segments). Returns "" or why it failed.
std::string readProcessMemory(long pid, uint64_t address, void* into, size_t bytes);

// Reads another process's memory on two threads: the caller's and one of its own, started on
// first use. One process_vm_readv is slow (the kernel pins and copies page by page) while the
// lender mostly waits, so large RPC echoes (rpc/transport/Lending.cpp) ran faster in halves on
// two threads (measured: docs/performance-history.md, "Figures that lived in code comments").
class SplitReader {
 public:
  ~SplitReader();
  // readProcessMemory, with copies of kSplitBytes or more split in two halves. Called from one
  // thread at a time.
  std::string read(long pid, uint64_t address, void* into, size_t bytes);

  // Splitting from 512 KiB instead gained nothing beyond noise, and costs a hand-off per copy
  // (measured: docs/performance-history.md, "Figures that lived in code comments").
  static constexpr size_t kSplitBytes = 2 << 20;

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  struct Job {
    long pid;
    uint64_t address;
    void* into;
    size_t bytes;
  };
  std::optional<Job> job_;  // under mutex_: the far half, until this reader's thread takes it
  std::optional<std::string> done_;  // under mutex_: its outcome
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace c10d::inline v1::shm
