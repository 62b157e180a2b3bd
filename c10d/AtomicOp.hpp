#pragma once

// Private to the library: an Op (c10d/Op.hpp) that one thread writes while others may read it,
// held as relaxed atomic words. The writer brackets its writes with begin/end, which make the
// version odd while it writes; a reader's copy is consistent when the version was even and the
// same before and after it (a seqlock). The flight recorder's slots and the MPI backend's
// running collective use it: recording an op takes no lock.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

#include "c10d/Op.hpp"

namespace c10d::inline v1::detail {

class AtomicOp {
 public:
  static_assert(std::is_trivially_copyable_v<Op>);
  static constexpr size_t kWords = (sizeof(Op) + 7) / 8;
  static constexpr size_t kFixedWords = offsetof(Op, dims) / 8;

  // The writer (one thread at a time): begin(), store() and writes of its own fields, end().
  void begin() {
    version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  // Stores op's words up to its last size (an Op's sizes come last; those past ndim read 0).
  void store(const Op& op) {
    static_assert(sizeof(Op) == kWords * 8 && offsetof(Op, dims) + sizeof(Op::dims) == sizeof(Op));
    const auto* bytes = reinterpret_cast<const unsigned char*>(&op);
    uint64_t fixed[kFixedWords];
    std::memcpy(fixed, bytes, sizeof(fixed));
#pragma GCC unroll 16
    for (size_t i = 0; i < kFixedWords; ++i) words_[i].store(fixed[i], std::memory_order_relaxed);
    const int ndim = op.ndim < Op::kMaxDims ? op.ndim : Op::kMaxDims;
    for (int d = 0; d < ndim; ++d) {
      words_[kFixedWords + d].store(static_cast<uint64_t>(op.dims[d]), std::memory_order_relaxed);
    }
  }
  void end() {
    version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // A reader: read(fn) copies the Op and runs fn() (the reader's loads of other fields of the
  // same writer) between the version checks; nullopt when a write overlapped (after retries).
  template <typename Fn>
  std::optional<Op> read(Fn&& fn) const {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const uint64_t before = version_.load(std::memory_order_acquire);
      if (before & 1) continue;
      uint64_t words[kWords];
      for (size_t i = 0; i < kWords; ++i) words[i] = words_[i].load(std::memory_order_relaxed);
      fn();
      std::atomic_thread_fence(std::memory_order_acquire);
      if (version_.load(std::memory_order_relaxed) != before) continue;
      Op op;
      std::memcpy(static_cast<void*>(&op), words, kFixedWords * 8);
      const int ndim = std::clamp<int>(op.ndim, 0, Op::kMaxDims);
      for (int d = 0; d < ndim; ++d) op.dims[d] = static_cast<int64_t>(words[kFixedWords + d]);
      return op;
    }
    return std::nullopt;
  }

 private:
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> words_[kWords] = {};
};

}  // namespace c10d::inline v1::detail
