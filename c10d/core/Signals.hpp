#pragma once

/// \file
/// Internal: keeping SIGPIPE from killing the process when a peer's socket closes.
///
/// How the library keeps a peer's death from killing the process through SIGPIPE, without
/// touching the process's signal dispositions (those belong to the application).
///
/// A write(2) to a socket whose peer has gone raises SIGPIPE at the writing thread, and its
/// default action ends the process with no message. Our own sockets write with MSG_NOSIGNAL;
/// libraries we drive (Gloo's pairs, libuv) use write/writev, which take no flags. So:
/// - threads the library starts block SIGPIPE for their whole life (blockSigpipeInThisThread),
///
/// \code
/// and threads created while it is blocked (Gloo's device loop) inherit that;
/// \endcode
/// - an application thread that calls into Gloo blocks it for the duration of the call
///
/// \code
/// (SigpipeGuard), consumes a SIGPIPE that the call left pending, and restores its mask.
/// \endcode
/// Blocked, the write fails with EPIPE, which the caller turns into an error naming the peer.

#include <signal.h>

#include <exception>

namespace c10d::inline v1::detail {

inline thread_local bool sigpipeBlockedForGood = false;

inline const sigset_t& sigpipeOnly() {
  static const sigset_t set = [] {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    return pipe;
  }();
  return set;
}

/// For threads the library owns (loop threads, op queues, progress threads).
inline void blockSigpipeInThisThread() {
  pthread_sigmask(SIG_BLOCK, &sigpipeOnly(), nullptr);
  sigpipeBlockedForGood = true;
}

/// Blocks SIGPIPE in the calling thread for the guard's scope. On a thread where it is already
/// blocked (ours, or an application that blocks it) the guard does nothing more.
///
/// A guard made kWhenWriting blocks nothing until the code inside it calls beforeSocketWrites()
/// (or mayHaveFailedWrites()): a collective that stays in shared memory writes no socket, and the
/// two system calls of an armed guard were a large part of a small allreduce's own cost (issue 32;
/// measured: docs/performance-history.md, "Figures that lived in code comments").
///
/// Leaving the scope of an armed guard restores the mask with one system call; a SIGPIPE pending
/// then would be delivered at once, so it is consumed first. Looking for one costs a third system
/// call, which the guard spends only where a write may have failed silently: when the scope ends
/// with an exception, or after mayHaveFailedWrites() (Gloo's asynchronous pairs keep an EPIPE to
/// themselves and fail the operation later, from a read). Gloo's synchronous pairs (the
/// small-message path) throw on EPIPE, so their success needs no look.
class SigpipeGuard {
 public:
  enum Arming { kNow, kWhenWriting };

  /// Only the outermost guard of a thread is active (inside it SIGPIPE is already blocked, or
  /// will be before the first write), so the active one is the thread's current_ for its scope.
  explicit SigpipeGuard(Arming arming = kNow) {
    if (sigpipeBlockedForGood) return;
    if (current_ != nullptr) {  // an outer guard's scope: it blocks, now if asked to
      if (arming == kNow) beforeSocketWrites();
      return;
    }
    current_ = this;
    if (arming == kNow) arm();
  }
  ~SigpipeGuard() {
    if (current_ != this) return;
    current_ = nullptr;
    if (!restore_) return;
    if (mayHaveFailedWrites_ || std::uncaught_exceptions() > exceptionsAtEntry_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE)) {
        const timespec now{0, 0};
        sigtimedwait(&sigpipeOnly(), nullptr, &now);
      }
    }
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

  /// Blocks SIGPIPE now if this thread's guard has not yet: call before anything that may write
  /// to a socket (Gloo's pairs, libuv) inside a kWhenWriting guard.
  static void beforeSocketWrites() {
    if (current_ != nullptr && !current_->armed_) current_->arm();
  }
  /// The same, and tells the guard to look for a pending SIGPIPE when it ends.
  static void mayHaveFailedWrites() {
    if (current_ == nullptr) return;
    if (!current_->armed_) current_->arm();
    current_->mayHaveFailedWrites_ = true;
  }

 private:
  void arm() {
    armed_ = true;
    exceptionsAtEntry_ = std::uncaught_exceptions();  // this scope's: nothing threw since entry
    pthread_sigmask(SIG_BLOCK, &sigpipeOnly(), &saved_);
    restore_ = !sigismember(&saved_, SIGPIPE);
  }

  static inline thread_local SigpipeGuard* current_ = nullptr;
  sigset_t saved_;
  bool armed_ = false;
  bool restore_ = false;  ///< armed, and SIGPIPE was not blocked before: the mask goes back
  bool mayHaveFailedWrites_ = false;
  int exceptionsAtEntry_ = 0;
};

}  // namespace c10d::inline v1::detail
