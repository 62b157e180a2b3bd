#include "c10d/core/Futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace c10d::inline v1::detail {

void futexWait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout,
               FutexScope scope) {
  if (timeout.count() <= 0) return;
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word),
            scope == FutexScope::Process ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT, expected, &ts, nullptr,
            0);
}

void futexWake(std::atomic<uint32_t>& word, FutexScope scope) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word),
            scope == FutexScope::Process ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

}  // namespace c10d::inline v1::detail
