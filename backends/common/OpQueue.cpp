#include "backends/common/OpQueue.hpp"

#include <sys/prctl.h>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v0 {

namespace {

// How long the worker leaves a new operation to its caller. A blocking call (op, then wait)
// runs the op on the caller's thread, which saves two thread hand-offs (about 10 us on a loaded
// host, more than a small MPI collective costs). Most callers wait within a few microseconds,
// but on an oversubscribed host one is descheduled for tens of them often enough that 20 us
// lost half the iterations to the worker. The grace adapts: while callers claim their ops it is
// long; once the worker had to take one (its caller was not waiting: async use), new ops start
// on the worker at once until a caller claims one again. The grace counts from when the worker
// first sees the op, so that enqueueing reads no clock.
constexpr std::chrono::microseconds kBlockingCallerGrace{200};
constexpr std::chrono::microseconds kAsyncCallerGrace{0};

// Waking the worker for every op of a blocking caller (to time its grace) cost more than the
// grace saved: on a host with no idle core the woken worker preempts a rank busy in an MPI
// call. While callers claim their ops, the worker instead looks at the queue once per
// kPollInterval (so an op nobody waits for starts within about a millisecond), and after
// kPollingSpell without a new op it sleeps until woken.
constexpr std::chrono::milliseconds kPollInterval{1};
constexpr std::chrono::milliseconds kPollingSpell{200};

}  // namespace

struct QueuedWork::QueueState {
  std::string name;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::shared_ptr<QueuedWork>> pending;
  bool running = false;  // an operation is executing (on any thread)
  bool stopping = false;
  // The worker blocks without a deadline: only then does enqueue() need to wake it.
  bool workerIdle = false;
  std::chrono::microseconds callerGrace = kBlockingCallerGrace;
  // Counts enqueues: the worker tells a busy queue from an idle one by it, so that enqueue()
  // reads no clock (the worker times the grace from when it first sees an op instead).
  uint64_t enqueues = 0;
  std::exception_ptr abortError;

  // Runs work outside the lock; mutex is held on entry and on return, unless relock is false (a
  // caller that ran its own op is done with the queue). The queue moves on before the Work
  // completes, so a callback of the Work may issue the next op and wait for it (that op then
  // runs on the callback's thread, or on the worker).
  void execute(std::unique_lock<std::mutex>& lock, const std::shared_ptr<QueuedWork>& work,
               bool relock = true) {
    running = true;
    lock.unlock();
    std::function<void(QueuedWork&)> run = std::move(work->run_);
    std::exception_ptr error;
    try {
      run(*work);
    } catch (...) {
      error = std::current_exception();
    }
    run = nullptr;  // drop captured tensors before waking waiters
    lock.lock();
    running = false;
    // Only the worker waits for running to clear, and only while something is pending.
    if (!pending.empty()) changed.notify_all();
    lock.unlock();
    if (error) {
      work->finishWithError(error);
    } else {
      work->finish();
    }
    if (relock) lock.lock();
  }
};

QueuedWork::QueuedWork(Describe describe, std::chrono::milliseconds timeout,
                       std::vector<Tensor> outputs, std::function<void(QueuedWork&)> run)
    : Work(std::move(describe), timeout, std::move(outputs)), run_(std::move(run)) {}

void QueuedWork::beforeWait() {
  std::shared_ptr<QueueState> state = queue_;
  if (!state) return;
  std::unique_lock<std::mutex> lock(state->mutex);
  if (state->running || state->pending.empty() || state->pending.front().get() != this) return;
  std::shared_ptr<QueuedWork> self = state->pending.front();
  state->pending.pop_front();
  state->callerGrace = kBlockingCallerGrace;
  state->execute(lock, self, /*relock=*/false);
}

OpQueue::OpQueue(std::string name) : state_(std::make_shared<QueuedWork::QueueState>()) {
  state_->name = std::move(name);
  worker_ = std::thread([state = state_] {
    detail::nameThisThread("c10d-ops");
    detail::blockSigpipeInThisThread();
    // Timed waits of a few microseconds; the default 50 us slack would stretch the grace.
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    using Clock = std::chrono::steady_clock;
    uint64_t enqueuesSeen = 0;
    Clock::time_point lastEnqueueSeen;
    std::unique_lock<std::mutex> lock(state->mutex);
    while (!state->stopping) {
      const Clock::time_point now = Clock::now();
      if (state->enqueues != enqueuesSeen) {
        enqueuesSeen = state->enqueues;
        lastEnqueueSeen = now;
      }
      if (state->running || state->pending.empty()) {
        if (state->callerGrace == kBlockingCallerGrace && now - lastEnqueueSeen < kPollingSpell) {
          state->changed.wait_for(lock, kPollInterval);
        } else {
          state->workerIdle = true;
          state->changed.wait(lock);
          state->workerIdle = false;
        }
        continue;
      }
      QueuedWork& front = *state->pending.front();
      if (front.firstSeen_ == Clock::time_point{}) front.firstSeen_ = now;
      auto claimBy = front.firstSeen_ + state->callerGrace;
      if (now < claimBy) {
        // Its caller may still run it; look again afterwards (or when woken).
        state->changed.wait_until(lock, claimBy);
        continue;
      }
      state->callerGrace = kAsyncCallerGrace;
      std::shared_ptr<QueuedWork> work = state->pending.front();
      state->pending.pop_front();
      state->execute(lock, work);
    }
  });
}

OpQueue::~OpQueue() {
  close();
}

void OpQueue::close() {
  abort(std::make_exception_ptr(
      StateError(detail::concat(state_->name, ": backend shut down before the operation ran"))));
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    state_->stopping = true;
  }
  state_->changed.notify_all();
  std::lock_guard<std::mutex> joining(joinMutex_);
  if (worker_.joinable()) worker_.join();
}

void OpQueue::enqueue(const std::shared_ptr<QueuedWork>& work) {
  std::exception_ptr error;
  bool wake = false;
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    if (state_->abortError) {
      error = state_->abortError;
    } else {
      work->queue_ = state_;
      ++state_->enqueues;
      state_->pending.push_back(work);
      // A polling worker finds a blocking caller's op by itself; an async caller's must start now.
      wake = state_->workerIdle || state_->callerGrace == kAsyncCallerGrace;
    }
  }
  if (error) {
    work->run_ = nullptr;
    work->finishWithError(detail::copyError(error));  // its own: the Work fills its context in
    return;
  }
  if (wake) state_->changed.notify_all();
}

void OpQueue::abort(std::exception_ptr error) {
  std::deque<std::shared_ptr<QueuedWork>> dropped;
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    if (!state_->abortError) state_->abortError = error;
    dropped.swap(state_->pending);
  }
  for (auto& work : dropped) {
    work->run_ = nullptr;
    work->finishWithError(detail::copyError(error));  // each its own: each fills its context in
  }
}

}  // namespace c10d::inline v0
