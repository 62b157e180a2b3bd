#pragma once

// Private to c10d/checkpoint (not installed): host memory for a rank's whole state at once (an
// asynchronous save's copy), asked for with transparent huge pages.
//
// Why: every first touch of a 4 KiB page costs a fault, costly in a paravirtual guest: a load that
// staged whole slices in 4 KiB pages spent nearly all its time in faults (measured:
// docs/performance-history.md, "Figures that lived in code comments"). With huge pages (THP
// "madvise", Debian's default) a 2 MiB page faults once, so even an asynchronous save's first
// copy, which makes the staging, is quick.

#include <sys/mman.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::checkpoint::detail {

inline std::shared_ptr<void> allocateStaging(size_t bytes) {
  const size_t length = bytes == 0 ? 1 : bytes;
  void* memory =
      ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  C10D_CHECK(memory != MAP_FAILED, Error, "checkpoint: cannot map ", bytes,
             " bytes of staging memory");
  ::madvise(memory, length, MADV_HUGEPAGE);  // a hint: without THP it is 4 KiB pages, as before
  return std::shared_ptr<void>(memory, [length](void* p) { ::munmap(p, length); });
}

// Offsets of 64-byte aligned pieces of the given sizes in one block, and the block's size.
inline size_t layOut(const std::vector<size_t>& sizes, std::vector<size_t>& offsets) {
  size_t at = 0;
  offsets.clear();
  for (size_t bytes : sizes) {
    offsets.push_back(at);
    at += (bytes + 63) / 64 * 64;
  }
  return at;
}

}  // namespace c10d::inline v1::checkpoint::detail
