#include "c10d/core/Ticks.hpp"

#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace c10d::inline v1::detail {
namespace {

using Steady = std::chrono::steady_clock;
using System = std::chrono::system_clock;

bool invariantTsc() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0x80000000, nullptr) < 0x80000007) return false;
  __get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx);
  return (edx & (1u << 8)) != 0;  // "TscInvariant": constant rate, runs in every C-state
#else
  return false;
#endif
}

}  // namespace

// Before origin() below, which reads ticks() as the library loads.
const bool tscTicks = invariantTsc();

namespace {

// Where the conversion starts: a reading of all three clocks at once.
struct Anchor {
  uint64_t ticks;
  Steady::time_point steady;
  System::time_point system;
};

Anchor now() {
  return {ticks(), Steady::now(), System::now()};
}

const Anchor& origin() {
  static const Anchor anchor = now();
  return anchor;
}

// Made at load, so the rate is measured over the process's life, not from its first dump.
[[maybe_unused]] const Anchor& loaded = origin();

// The tick rate, from the process's first reading to now.
double nanosPerTick() {
  if (!ticksAreTsc()) return 1.0;
  const Anchor& start = origin();
  Anchor end = now();
  constexpr auto kBaseline = std::chrono::milliseconds(20);
  if (end.steady - start.steady < kBaseline) {
    std::this_thread::sleep_for(kBaseline - (end.steady - start.steady));
    end = now();
  }
  return std::chrono::duration<double, std::nano>(end.steady - start.steady).count() /
         static_cast<double>(end.ticks - start.ticks);
}

}  // namespace

int64_t ticksToNanos(uint64_t elapsedTicks) {
  return static_cast<int64_t>(static_cast<double>(elapsedTicks) * nanosPerTick());
}

int64_t toSystemMicros(uint64_t t) {
  const Anchor& start = origin();
  const double sinceStart =
      (static_cast<double>(t) - static_cast<double>(start.ticks)) * nanosPerTick();
  const auto system = start.system + std::chrono::duration_cast<System::duration>(
                                         std::chrono::duration<double, std::nano>(sinceStart));
  return std::chrono::duration_cast<std::chrono::microseconds>(system.time_since_epoch()).count();
}

}  // namespace c10d::inline v1::detail
