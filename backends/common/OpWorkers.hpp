#pragma once

// Private to backends: the threads that run a process's queued ops nobody waits for, shared by
// every OpQueue of every group. A worker per queue was a thread per group; here a job in
// hundreds of groups has as many workers as ops it runs at once without a caller waiting, plus
// one that stays free to look.
//
// A worker looks at each client when the client asks (wake) or at the time the client gave at
// its last look, runs what the client says is due, and sleeps until the earliest next look.
// While a worker runs a client's op (which may wait for peers as long as the op's timeout), a
// second worker is started if none is left free, so that another group's op never waits for it:
// groups may issue their ops in different orders on different ranks. A worker left free beside
// another for kLinger ends.
//
// Threading: every call may come from any thread. A client is looked at and run by one worker
// at a time, which orders its looks (its state needs no lock). A child of fork() gets workers
// of its own.

#include <atomic>
#include <chrono>
#include <memory>

namespace c10d::inline v1 {

class OpWorkers {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kLinger{2};
  // Workers at most: as many groups as could each wait in an op nobody waited for at once.
  static constexpr int kMaxThreads = 1024;

  // What the workers serve: one op queue.
  class Client {
   public:
    virtual ~Client() = default;
    // One look at now: whether an op is due to run now; else *next is when the client wants its
    // next look (Clock::time_point::max(): only when it wakes the workers).
    virtual bool due(Clock::time_point now, Clock::time_point* next) = 0;
    // Runs the op due; false when none ran (another thread runs it, or none is left). Calls
    // opStarts() before the op and opEnded() after it.
    virtual bool runOne() = 0;

   private:
    friend class OpWorkers;
    std::atomic<bool> serving_{false};  // a worker looks at it or runs its op
    std::atomic<bool> leaving_{false};  // remove() was called
  };

  // The process's workers.
  static OpWorkers& instance();

  // Serves client from now on (starting the first worker: Error when the system refuses it).
  void add(const std::shared_ptr<Client>& client);
  // Serves client no more: returns once no worker looks at it or runs its op (at once when
  // called from the worker that does).
  void remove(Client* client);
  // A client has something to look at: a worker looks now. Lock-free; a system call only when
  // every worker sleeps.
  void wake();
  // Called by a client's runOne on the worker, around an op it runs (which may wait as long as
  // its timeout): a second worker starts if none is left free.
  void opStarts();
  void opEnded();

  struct State;

 private:
  explicit OpWorkers(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace c10d::inline v1
