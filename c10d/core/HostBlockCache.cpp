#include "c10d/core/HostBlockCache.hpp"

#include <cstdlib>
#include <string>

#include "c10d/core/Config.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::detail {
namespace {

size_t limitFromEnvironment() {
  return static_cast<size_t>(config::Settings().integer("C10D_HOST_CACHE_MB")) << 20;
}

void* alignedAlloc(size_t rounded, size_t requested) {
  void* memory = std::aligned_alloc(HostBlockCache::kAlignment, rounded);
  C10D_CHECK(memory != nullptr, Error, "out of host memory allocating ", requested, " bytes");
  return memory;
}

}  // namespace

HostBlockCache::~HostBlockCache() {
  for (const Block& block : byAge_) std::free(block.memory);
}

HostBlockCache& HostBlockCache::process() {
  static HostBlockCache* cache = new HostBlockCache(limitFromEnvironment());
  return *cache;
}

std::shared_ptr<void> HostBlockCache::allocate(size_t bytes) {
  // malloc(0) may return null, so an empty tensor still gets one aligned unit.
  const size_t rounded =
      bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < kMinCachedBytes || limit_ == 0) {
    void* memory = alignedAlloc(rounded, bytes);
    countAllocated(rounded);
    return std::shared_ptr<void>(memory, [this, rounded](void* p) {
      countFreed(rounded);
      std::free(p);
    });
  }
  Block block{nullptr, rounded};
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = bySize_.lower_bound(rounded);
    if (it != bySize_.end() && it->first - rounded <= rounded / 8) {
      block = *it->second;
      byAge_.erase(it->second);
      bySize_.erase(it);
      cached_ -= block.bytes;
    }
  }
  if (block.memory == nullptr) block.memory = alignedAlloc(rounded, bytes);
  countAllocated(block.bytes);
  return std::shared_ptr<void>(block.memory, [this, size = block.bytes](void* p) {
    countFreed(size);
    giveBack(p, size);
  });
}

void HostBlockCache::countAllocated(size_t bytes) {
  const size_t live = live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  size_t peak = peak_.load(std::memory_order_relaxed);
  while (live > peak && !peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void HostBlockCache::giveBack(void* memory, size_t bytes) {
  std::list<Block> evicted;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (bytes > limit_) {
      evicted.push_back({memory, bytes});
    } else {
      while (cached_ + bytes > limit_) {
        const Block oldest = byAge_.front();
        auto range = bySize_.equal_range(oldest.bytes);
        for (auto it = range.first; it != range.second; ++it) {
          if (it->second == byAge_.begin()) {
            bySize_.erase(it);
            break;
          }
        }
        evicted.splice(evicted.end(), byAge_, byAge_.begin());
        cached_ -= oldest.bytes;
      }
      byAge_.push_back({memory, bytes});
      bySize_.emplace(bytes, std::prev(byAge_.end()));
      cached_ += bytes;
    }
  }
  // Freed outside the lock: munmap takes a while.
  for (const Block& block : evicted) std::free(block.memory);
}

size_t HostBlockCache::cachedBytes() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return cached_;
}

}  // namespace c10d::inline v1::detail
