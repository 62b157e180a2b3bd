#pragma once

/// \file
/// PowerSgd: PowerSGD low-rank gradient compression as a DistributedDataParallel communication
/// hook, and its options.
///
/// PowerSGD gradient compression (Vogels et al., 2019; PyTorch's powerSGD_hook) as a reducer
/// communication hook: each gradient of two or more dimensions, seen as an n x m matrix M, is sent
/// as two thin matrices P (n x r) and Q (m x r), one power iteration per step warm-started from the
/// last Q, so a bucket costs (n + m) r numbers instead of n m. What the approximation loses is kept
/// per rank (error feedback) and added to the next step's gradient. One-dimensional gradients (and
/// matrices too small to gain) are averaged uncompressed.
///
/// \code
/// c10d::PowerSgd powerSgd({.rank = 4});
/// options.commHook = powerSgd.hook();          // DataParallelOptions
/// \endcode
///
/// CPU buckets of float32 or float64; others fail the bucket with InvalidArgument. Every rank must
/// use the same options (the random start of Q is seeded the same everywhere).
///
/// Threading: the hook keeps state per bucket; the reducer runs hooks one at a time. Give each
/// reducer its own PowerSgd: two reducers sharing one would share their buckets' state.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "c10d/training/DistributedDataParallel.hpp"

namespace c10d::inline v1 {

/// PowerSGD's settings; every rank must use the same.
struct PowerSgdOptions {
  size_t rank = 1;  ///< columns of P and Q: larger approximates better and sends more
  /// The first backwards are averaged uncompressed (PyTorch's start_powerSGD_iter): error feedback
  /// works best once gradients have settled.
  uint64_t startIteration = 0;
  bool errorFeedback = true;  ///< keep what the approximation lost and add it to the next step's
  uint64_t seed = 0;  ///< of Q's random start, the same on every rank
};

/// The PowerSGD communication hook's state (Q and the error feedback per bucket) and its factory.
class PowerSgd {
 public:
  /// \param options Rank (>= 1), start iteration, error feedback and seed.
  /// \throws InvalidArgument for options.rank 0.
  explicit PowerSgd(PowerSgdOptions options = {});
  /// The hook; it shares this object's state, so it may outlive the PowerSgd object.
  /// \return A CommHook for DataParallelOptions::commHook. Once compressing, its Future is
  /// complete on return (the hook waits for its two allreduces); before startIteration it is
  /// allreduceHook's. It throws InvalidArgument (failing the bucket) unless the bucket is CPU
  /// float32 or float64.
  CommHook hook() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace c10d::inline v1
