#pragma once

/// \file
/// SpinGovernor, which decides whether and how long a waiting rank spins before it sleeps.
///
/// Whether a waiting rank spins, and for how long: spinning catches an answer that comes within
/// microseconds without a wake-up (tens of microseconds on virtual machines), but it holds a core
/// the peer may need. A SpinGovernor spins only while spinning pays: a wait whose spin ran out
/// before the answer came counts as a miss, and after kMissesToRest misses in a row the next
/// kRestingWaits waits sleep at once before spinning is tried again: where ranks outnumber the
/// cores without knowing it, waits that always spun made a small allreduce several times slower
/// than waits that slept (docs/performance-history.md, "Figures that lived in code comments").
///
/// Not thread-safe: one per sequence of waits that run one at a time (a SyncMesh's ops).

#include <chrono>

/// Shared memory between the ranks of one host: the fast path's transport and how its waits spin.
namespace c10d::inline v1::shm {

/// A budget that never runs out: the user said each rank has a core of its own.
inline constexpr std::chrono::nanoseconds kSpinForever = std::chrono::nanoseconds::max();

/// Decides how long each of a sequence of waits spins before it sleeps: the budget, until
/// kMissesToRest misses in a row make the next kRestingWaits waits sleep at once. Not thread-safe.
class SpinGovernor {
 public:
  static constexpr int kMissesToRest = 2;     ///< misses in a row that start a rest
  static constexpr int kRestingWaits = 1024;  ///< waits that sleep at once during a rest

  /// \param budget How long a wait spins before it sleeps; zero (the default): never spin;
  ///        kSpinForever: always spin, never rest.
  explicit SpinGovernor(std::chrono::nanoseconds budget = {}) : budget_(budget) {}

  /// The spin for the next wait: the budget, or zero while resting.
  /// Each call while resting uses up one of the rest's waits.
  /// \return How long the next wait may spin.
  std::chrono::nanoseconds next() {
    if (resting_ == 0) return budget_;
    --resting_;
    return {};
  }
  /// How a wait that spun ended: answered while spinning (hit) or after its spin ran out.
  /// \param hit true when the answer came while spinning (resets the misses), false for a miss.
  void spun(bool hit) {
    if (hit || budget_ == kSpinForever) {
      misses_ = 0;
    } else if (++misses_ == kMissesToRest) {
      misses_ = 0;
      resting_ = kRestingWaits;
    }
  }
  /// \return The budget given to the constructor.
  std::chrono::nanoseconds budget() const { return budget_; }

 private:
  std::chrono::nanoseconds budget_;
  int misses_ = 0;
  int resting_ = 0;
};

}  // namespace c10d::inline v1::shm
