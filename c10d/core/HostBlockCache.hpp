#pragma once

/// \file
/// Internal: the cache that keeps freed host memory of 1 MiB and more for reuse by tensors.
///
/// Host memory for tensors of 1 MiB and more is kept for reuse after its tensor is freed.
///
/// Why: glibc serves such blocks with a fresh mmap, so every new large tensor pays a page fault
/// and the kernel's zeroing for each 4 KiB page. A received RPC tensor or a collective's scratch
/// buffer is allocated again at every step with the same size; reusing the block made the 16 MiB
/// RPC echo 40% faster on the 2-vCPU host (docs/performance.md).
///
/// \code
/// C10D_HOST_CACHE_MB   most memory kept for reuse, in MiB (default 256; 0: nothing is kept)
/// \endcode
///
/// A block is reused for a request of its size or up to 1/8 smaller. When keeping a freed block
/// would pass the limit, the blocks kept longest are freed first. Memory from the cache is
/// uninitialised, as Tensor::empty promises.
///
/// It also counts the bytes of the blocks it has handed out that are still owned (live, whether
/// they would be kept or not) and the most that were live at once since resetPeak(): what a
/// process's host tensors hold, for the memory figures of ZeRO and the reducer.
///
/// Threading: every method may be called from any thread.

#include <atomic>
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>

namespace c10d::inline v1::detail {

class HostBlockCache {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kMinCachedBytes = size_t{1} << 20;

  explicit HostBlockCache(size_t limitBytes) : limit_(limitBytes) {}
  ~HostBlockCache();
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  /// The process's cache, sized from C10D_HOST_CACHE_MB on first use. Never destroyed, so that
  /// tensors freed during static destruction can still return their blocks.
  static HostBlockCache& process();

  /// At least `bytes` (64-byte aligned); the block returns here when the last owner lets go,
  /// so the cache must outlive every block it hands out. Throws Error when memory is exhausted.
  std::shared_ptr<void> allocate(size_t bytes);

  size_t cachedBytes() const;
  size_t limitBytes() const { return limit_; }
  /// Bytes of handed-out blocks not yet given back (rounded to kAlignment), and the most at once.
  size_t liveBytes() const { return live_.load(std::memory_order_relaxed); }
  size_t peakLiveBytes() const { return peak_.load(std::memory_order_relaxed); }
  /// Starts a new peak from what is live now.
  void resetPeak() { peak_.store(liveBytes(), std::memory_order_relaxed); }

 private:
  struct Block {
    void* memory;
    size_t bytes;
  };
  void giveBack(void* memory, size_t bytes);
  void countAllocated(size_t bytes);
  void countFreed(size_t bytes) { live_.fetch_sub(bytes, std::memory_order_relaxed); }

  const size_t limit_;
  mutable std::mutex mutex_;
  size_t cached_ = 0;
  std::list<Block> byAge_;  ///< oldest first
  std::multimap<size_t, std::list<Block>::iterator> bySize_;
  std::atomic<size_t> live_{0};
  std::atomic<size_t> peak_{0};
};

}  // namespace c10d::inline v1::detail
