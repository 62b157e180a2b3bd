#pragma once

// Private to the library: a backend's Works, kept for reuse. A blocking op's Work is made once
// and then handed out again for every later op: acquire() takes an idle one (made by make() when
// none is idle) and rebinds it to the op; when the last holder drops it, its tensors are released
// (Work::recycle), and when the last weak reference is gone too, it goes back to the pool. The
// handle is a std::shared_ptr whose control block is built in the Work itself (Work::handle_),
// so a blocking op allocates nothing, and nothing of the Work is built or torn down per op but
// what the op sets.
//
// The idle Works are a lock-free stack (a tagged head against ABA, and a bit that close() sets
// so that nothing joins a closed pool). A pool keeps every Work it made until it is closed (as
// many as were ever in flight at once), so that a Work a pop is reading is never freed. Each
// Work holds its pool (set once, when it is made); the backend closes the pool as it goes, which
// frees the idle Works, and frees the others as they come back: the last one frees the pool.
//
// Threading: acquire and the handles' release may run on any threads at once, and close beside
// releases; close must not race an acquire (it frees the idle Works a pop may be reading).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "c10d/Work.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::detail {

template <typename T>
class WorkPool {
 public:
  WorkPool() = default;
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // A Work for op: an idle one, or make() (a new T*). self is this pool's owner.
  template <typename Make>
  static std::shared_ptr<T> acquire(const std::shared_ptr<WorkPool>& self, const Op& op,
                                    Make&& make) {
    T* work = self->pop();
    if (work == nullptr) {
      work = make();
      // The stack's head packs a pointer in 48 bits (user space on x86-64 and arm64 without a
      // hint for higher addresses).
      if (reinterpret_cast<uintptr_t>(work) > kPointerMask) {
        delete work;
        C10D_THROW(Error, "a pooled Work was allocated above 2^48, where the pool cannot keep it");
      }
      work->pool_ = self;
    }
    work->rebind(op);
    return std::shared_ptr<T>(work, Release{}, InWork<T>{work});
  }

  // The owner is done with the pool: its idle Works are freed now, the others as they come back.
  void close() {
    uint64_t head = head_.load(std::memory_order_acquire);
    while (!head_.compare_exchange_weak(head, kClosed, std::memory_order_acq_rel)) {
    }
    // The Works taken hold the pool, which the caller holds too.
    for (T* work = pointerOf(head); work != nullptr;) {
      T* next = static_cast<T*>(work->poolNext_);
      delete work;
      work = next;
    }
  }

 private:
  // The last holder is gone: the op's tensors go at once.
  struct Release {
    void operator()(T* work) const noexcept { work->recycle(); }
  };
  // The control block's memory is the Work's own; once the control block is destroyed (no
  // holder and no weak reference left), the Work is idle.
  template <typename U>
  struct InWork {
    using value_type = U;
    T* work;
    InWork(T* w) : work(w) {}  // NOLINT: made from the Work
    template <typename V>
    InWork(const InWork<V>& other) : work(other.work) {}  // NOLINT: rebinding, as allocators do
    U* allocate(size_t n) {
      static_assert(alignof(U) <= alignof(std::max_align_t));
      if (n * sizeof(U) > sizeof(work->handle_)) {
        return static_cast<U*>(::operator new(n * sizeof(U)));
      }
      return reinterpret_cast<U*>(work->handle_);
    }
    void deallocate(U* block, size_t n) noexcept {
      if (n * sizeof(U) > sizeof(work->handle_)) {
        ::operator delete(block);
      }
      giveBack(work);
    }
    template <typename V>
    bool operator==(const InWork<V>& other) const {
      return work == other.work;
    }
  };

  // Nothing of the pool is touched after the work is freed: it may have held the last reference.
  static void giveBack(T* work) {
    auto* pool = static_cast<WorkPool*>(work->pool_.get());
    if (!pool->push(work)) delete work;
  }

  static constexpr uint64_t kPointerBits = 48;
  static constexpr uint64_t kPointerMask = (uint64_t{1} << kPointerBits) - 1;
  static constexpr uint64_t kClosed = uint64_t{1} << kPointerBits;
  static constexpr uint64_t kTagUnit = kClosed << 1;
  static T* pointerOf(uint64_t head) { return reinterpret_cast<T*>(head & kPointerMask); }
  static uint64_t headOf(T* work, uint64_t previous) {
    return ((previous & ~(kClosed | kPointerMask)) + kTagUnit) | (previous & kClosed) |
           reinterpret_cast<uint64_t>(work);
  }

  T* pop() {
    uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      T* top = pointerOf(head);
      if (top == nullptr) return nullptr;
      // top stays allocated (Works are freed only once the pool is closed, and nothing pops
      // then): reading its link is safe, and a stale one fails the exchange (the tag moved).
      T* next = static_cast<T*>(top->poolNext_);
      if (head_.compare_exchange_weak(head, headOf(next, head), std::memory_order_acquire)) {
        return top;
      }
    }
  }
  // False once the pool is closed.
  bool push(T* work) {
    uint64_t head = head_.load(std::memory_order_relaxed);
    do {
      if (head & kClosed) return false;
      work->poolNext_ = pointerOf(head);
    } while (!head_.compare_exchange_weak(head, headOf(work, head), std::memory_order_release,
                                          std::memory_order_relaxed));
    return true;
  }

  std::atomic<uint64_t> head_{0};
};

}  // namespace c10d::inline v1::detail
