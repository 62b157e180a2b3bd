#pragma once

// Sleeping on a 32-bit word until another thread (or, with Scope::Shared, another process that
// maps the word) changes it: Linux's futex, the one primitive under every wait of the library's
// own (Work completion, op queues, shared-memory channels).

#include <atomic>
#include <chrono>
#include <cstdint>

namespace c10d::inline v1::detail {

enum class FutexScope { Process, Shared };

// Sleeps while word holds expected, for at most timeout (wakes may be spurious: recheck).
void futexWait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout,
               FutexScope scope = FutexScope::Process);
// Wakes every sleeper on word.
void futexWake(std::atomic<uint32_t>& word, FutexScope scope = FutexScope::Process);

}  // namespace c10d::inline v1::detail
