#pragma once

// A clock cheap enough to read several times per op (the flight recorder's timestamps): the CPU's
// time-stamp counter where it ticks at a constant rate on every core (x86 with an invariant TSC),
// else steady_clock's nanoseconds. A tick is converted to wall-clock time only when someone reads
// it (a flight recorder dump), by toSystemMicros. The counter is one instruction; steady_clock
// costs far more under kvm-clock (measured: docs/performance-history.md, "Figures that lived in
// code comments").

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace c10d::inline v1::detail {

// Whether ticks() reads the time-stamp counter (decided as the library loads).
extern const bool tscTicks;
inline bool ticksAreTsc() {
  return tscTicks;
}

inline uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  if (tscTicks) return __rdtsc();
#endif
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// Microseconds since the epoch (system clock, comparable across hosts) of a ticks() reading taken
// in this process. The rate is measured from the process's first reading to now, over at least
// 20 ms (the first conversion may sleep for the rest).
int64_t toSystemMicros(uint64_t ticks);
// Nanoseconds between two ticks() readings of this process (later minus earlier), at the same
// measured rate.
int64_t ticksToNanos(uint64_t elapsedTicks);

}  // namespace c10d::inline v1::detail
