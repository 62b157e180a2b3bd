#include "backends/common/OpQueue.hpp"

#include <sched.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "backends/common/OpWorkers.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Futex.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1 {

namespace {

// How often the worker looks at a queue whose ops are claimed by their callers: from kFirstLook,
// doubling to kLastLook while ops flow; a look that finds nothing new puts it to sleep until an
// op wakes it. An op it finds unclaimed at two looks in a row has no caller coming for it.
constexpr std::chrono::milliseconds kFirstLook{1};
constexpr std::chrono::milliseconds kLastLook{16};

// Ops issued and not yet run, at most: an issuer beyond waits for room.
constexpr uint64_t kSlots = 1024;

// The worker's slot marker for a position whose Work was drained by abort() or close().
QueuedWork* const kDrained = reinterpret_cast<QueuedWork*>(uintptr_t{1});

}  // namespace

struct QueuedWork::QueueState : OpWorkers::Client {
  explicit QueueState(std::string queueName)
      : name(std::move(queueName)), workers(OpWorkers::instance()), slots(kSlots) {}

  const std::string name;
  OpWorkers& workers;  // the process's, looked up once (its lookup takes a lock)
  // Position p's Work is in slots[p % kSlots] from its enqueue until it runs.
  std::vector<std::atomic<QueuedWork*>> slots;
  alignas(64) std::atomic<uint64_t> tail{0};  // positions handed out
  alignas(64) std::atomic<uint64_t> head{0};  // the next position to run
  // Who runs the op at head: 0 nobody, kCaller or kWorker. A try-lock nobody waits on.
  static constexpr uint32_t kCaller = 1, kWorker = 2;
  std::atomic<uint32_t> runner{0};
  // Every wake-up bumps bell (a look at this queue now); urgent counts the wake-ups that mean
  // "an op waits for nobody but a worker" (the others only start the looks).
  alignas(64) std::atomic<uint32_t> bell{0};
  std::atomic<uint32_t> urgent{0};
  std::atomic<bool> parked{true};  // no look planned: an enqueue must wake the workers
  // The last op ran on a worker: its caller issues ops without waiting for them (async use,
  // a prefetch), so a new op starts at once; the next op its caller runs itself clears it.
  std::atomic<bool> workerRanLast{false};
  std::atomic<bool> refusing{false};  // abort() or close(): enqueues fail
  std::exception_ptr abortError;      // set once, before refusing

  // The looks' state, read and written only by the worker that looks (OpWorkers orders them).
  std::chrono::milliseconds interval = kFirstLook;
  uint32_t lastUrgent = 0;
  uint32_t lastBell = 0;
  uint64_t lastTail = 0;
  uint64_t waitingAtLastLook = UINT64_MAX;  // the position found unclaimed at the last look
  OpWorkers::Clock::time_point nextLook = OpWorkers::Clock::time_point::max();

  void wake(bool run) {
    if (run) urgent.fetch_add(1, std::memory_order_seq_cst);
    bell.fetch_add(1, std::memory_order_seq_cst);
    workers.wake();
  }
  void ring() { wake(true); }

  bool due(OpWorkers::Clock::time_point now, OpWorkers::Clock::time_point* next) override;
  bool runOne() override { return runHead(kWorker); }

  // Runs the op at head if nobody else runs one: as who (kCaller or kWorker), and only when
  // head is position (any position when position is UINT64_MAX). Whether it ran one.
  bool runHead(uint32_t who, uint64_t position = UINT64_MAX) {
    uint32_t idle = 0;
    // Sequentially consistent with abort()'s refusing, so that no op starts after it returned.
    if (!runner.compare_exchange_strong(idle, who, std::memory_order_seq_cst)) return false;
    const uint64_t h = head.load(std::memory_order_relaxed);
    if (refusing.load(std::memory_order_seq_cst) || h >= tail.load(std::memory_order_acquire) ||
        (position != UINT64_MAX && h != position)) {
      runner.store(0, std::memory_order_release);
      return false;
    }
    // The issuer stores its Work right after taking the position; abort() may have failed it.
    std::atomic<QueuedWork*>& slot = slots[h % kSlots];
    QueuedWork* work = nullptr;
    for (int spins = 0;; ++spins) {
      work = slot.load(std::memory_order_acquire);
      if (work != nullptr && slot.compare_exchange_strong(work, nullptr)) break;
      if (work == kDrained) break;
      if (spins > 64) sched_yield();
    }
    if (work == kDrained) {
      runner.store(0, std::memory_order_release);
      return false;
    }
    if (workerRanLast.load(std::memory_order_relaxed) != (who == kWorker)) {
      workerRanLast.store(who == kWorker, std::memory_order_relaxed);
    }
    std::shared_ptr<QueuedWork> self = std::move(work->self_);
    std::exception_ptr error;
    if (who == kWorker) workers.opStarts();
    try {
      work->run();
    } catch (...) {
      error = std::current_exception();
    }
    if (who == kWorker) workers.opEnded();
    // The queue moves on before the Work completes, so that a callback of the Work may issue
    // the next op and wait for it (that op then runs on the callback's thread, or the worker's).
    head.store(h + 1, std::memory_order_release);
    runner.store(0, std::memory_order_seq_cst);
    // An op behind this one was issued while this ran: its caller is not waiting at the head.
    if (tail.load(std::memory_order_seq_cst) > h + 1) ring();
    work->completeAlone(std::move(error));
    return true;
  }

  // Fails every op not yet started, with a copy of abortError each (every Work fills its own
  // context into its error). refusing is set: nothing starts or joins after this.
  void drain() {
    const uint64_t end = tail.load(std::memory_order_seq_cst);
    for (uint64_t p = head.load(std::memory_order_seq_cst); p < end; ++p) {
      // nullptr: its issuer has not stored it yet (it then finds the mark and fails it itself),
      // or a runner took it.
      QueuedWork* taken = slots[p % kSlots].exchange(kDrained, std::memory_order_acq_rel);
      if (taken != nullptr && taken != kDrained) {
        std::shared_ptr<QueuedWork> self = std::move(taken->self_);
        taken->complete(detail::copyError(abortError));
      }
    }
  }
};

bool QueuedWork::QueueState::due(OpWorkers::Clock::time_point now,
                                 OpWorkers::Clock::time_point* next) {
  const uint32_t asked = urgent.load(std::memory_order_acquire);
  const uint32_t rung = bell.load(std::memory_order_acquire);
  const uint64_t h = head.load(std::memory_order_acquire);
  const uint64_t t = tail.load(std::memory_order_acquire);
  // Only a wake-up of this queue or its own time makes a look (a look for another queue does
  // not count as one of the two that find an op unclaimed).
  if (rung == lastBell && now < nextLook) {
    *next = nextLook;
    return false;
  }
  lastBell = rung;
  parked.store(false, std::memory_order_relaxed);
  if (h < t && runner.load(std::memory_order_acquire) != 0) {
    // A caller runs the head op: it rings when done if an op came behind it (runHead), so the
    // next look can wait the longest interval (a collective that waits for slow peers for
    // seconds cost a wake-up per millisecond per process before). Not parked: the caller's next
    // op makes no system call to wake a worker.
    lastUrgent = asked;
    waitingAtLastLook = UINT64_MAX;
    nextLook = now + kLastLook;
    *next = nextLook;
    return false;
  }
  if (h < t && (asked != lastUrgent || h == waitingAtLastLook)) {
    lastUrgent = asked;
    waitingAtLastLook = UINT64_MAX;
    interval = kFirstLook;
    // A caller may run the head op now, and rings when it is done.
    nextLook = now;
    return true;
  }
  lastUrgent = asked;
  waitingAtLastLook = h < t ? h : UINT64_MAX;
  const bool flowing = h < t || t != lastTail;
  if (t != lastTail) interval = std::min(interval * 2, kLastLook);
  lastTail = t;
  if (flowing) {
    nextLook = now + interval;
  } else {
    nextLook = OpWorkers::Clock::time_point::max();
    parked.store(true, std::memory_order_seq_cst);
    // An op came while parking: look again.
    if (tail.load(std::memory_order_seq_cst) != t || bell.load(std::memory_order_seq_cst) != rung) {
      parked.store(false, std::memory_order_relaxed);
      nextLook = now;
    }
  }
  *next = nextLook;
  return false;
}

QueuedWork::QueuedWork(const Op& op, std::shared_ptr<detail::GroupTrace> trace,
                       const OpTensors& tensors)
    : Work(op, std::move(trace)) {
  rebind(op);
  capture(tensors);
}

QueuedWork::QueuedWork(std::shared_ptr<detail::GroupTrace> trace) : Work(Op{}, std::move(trace)) {}

void QueuedWork::rebind(const Op& op) {
  Work::rebind(op);
  inPlace_ = op.traits().inPlace;
}

void QueuedWork::capture(const OpTensors& tensors) {
  // Most ops: one tensor, written in place.
  if (inPlace_ && tensors.input != nullptr && tensors.inputs == nullptr) {
    output_ = *tensors.input;
    return;
  }
  if (tensors.input != nullptr) (inPlace_ ? output_ : input_) = *tensors.input;
  if (tensors.inputs != nullptr) (inPlace_ ? outputs_ : inputs_) = *tensors.inputs;
  if (tensors.output != nullptr) output_ = *tensors.output;
  if (tensors.outputs != nullptr) outputs_ = *tensors.outputs;
  if (tensors.inputSplits != nullptr) inputSplits_ = *tensors.inputSplits;
  if (tensors.outputSplits != nullptr) outputSplits_ = *tensors.outputSplits;
}

void QueuedWork::recycle() {
  input_.reset();
  if (!inputs_.empty()) inputs_.clear();
  inputSplits_.clear();
  outputSplits_.clear();
  Work::recycle();
}

OpTensors QueuedWork::tensors() const {
  OpTensors t;
  if (inPlace_) {
    if (output_.defined()) t.input = &output_;
    if (op().type == OpType::AllreduceCoalesced) t.inputs = &outputs_;
  } else {
    if (input_.defined()) t.input = &input_;
    if (output_.defined()) t.output = &output_;
    if (!inputs_.empty() || op().type == OpType::Scatter || op().type == OpType::ReduceScatter ||
        op().type == OpType::Alltoall) {
      t.inputs = &inputs_;
    }
    if (!outputs_.empty() || op().type == OpType::Allgather || op().type == OpType::Gather ||
        op().type == OpType::Alltoall) {
      t.outputs = &outputs_;
    }
  }
  if (op().type == OpType::AlltoallBase) {
    t.inputSplits = &inputSplits_;
    t.outputSplits = &outputSplits_;
  }
  return t;
}

void QueuedWork::beforeWait() {
  QueueState* state = queue_.get();
  if (state == nullptr) return;
  if (state->head.load(std::memory_order_acquire) == position_ &&
      state->runHead(QueueState::kCaller, position_)) {
    return;
  }
  // Ops ahead of this one wait for nobody but the worker (or another thread runs one now, and
  // rings when it is done).
  state->ring();
}

void QueuedWork::startAsync() const {
  QueueState* state = queue_.get();
  if (state != nullptr && state->head.load(std::memory_order_acquire) <= position_) state->ring();
}

OpQueue::OpQueue(std::string name)
    : state_(std::make_shared<QueuedWork::QueueState>(std::move(name))) {
  state_->workers.add(state_);
}

OpQueue::~OpQueue() {
  close();
}

void OpQueue::enqueue(const std::shared_ptr<QueuedWork>& work) {
  QueuedWork::QueueState& state = *state_;
  if (state.refusing.load(std::memory_order_seq_cst)) {
    work->complete(detail::copyError(state.abortError));
    return;
  }
  if (work->queue_ != state_) work->queue_ = state_;  // a pooled Work has it from its last op
  work->self_ = work;
  const uint64_t position = state.tail.fetch_add(1, std::memory_order_seq_cst);
  work->position_ = position;
  // A full queue: the worker must make room.
  while (position - state.head.load(std::memory_order_acquire) >= kSlots &&
         !state.refusing.load(std::memory_order_acquire)) {
    state.ring();
    sched_yield();
  }
  std::atomic<QueuedWork*>& slot = state.slots[position % kSlots];
  QueuedWork* empty = nullptr;
  bool stored = slot.compare_exchange_strong(empty, work.get(), std::memory_order_seq_cst);
  // Refused meanwhile: whoever takes the Work out of its slot first fails it (abort() marks
  // the slots it drained, so a Work stored after it finds the mark).
  if (!stored || state.refusing.load(std::memory_order_seq_cst)) {
    if (!stored || slot.exchange(kDrained, std::memory_order_acq_rel) == work.get()) {
      std::shared_ptr<QueuedWork> self = std::move(work->self_);
      work->complete(detail::copyError(state.abortError));
    }
    return;
  }
  // Behind an op still waiting to start, whose caller does not wait for it, or after one the
  // worker had to run: the worker runs it now. With the worker asleep until woken: it starts its
  // looks.
  if (position != state.head.load(std::memory_order_seq_cst) ||
      state.workerRanLast.load(std::memory_order_relaxed)) {
    state.ring();
  } else if (state.parked.load(std::memory_order_seq_cst)) {
    state.wake(false);
  }
}

void OpQueue::abort(std::exception_ptr error) {
  QueuedWork::QueueState& state = *state_;
  {
    static std::mutex settingError;  // abort() and close() may race: the first error stays
    std::lock_guard<std::mutex> guard(settingError);
    if (!state.refusing.load(std::memory_order_relaxed)) {
      state.abortError = std::move(error);
      state.refusing.store(true, std::memory_order_seq_cst);
    }
  }
  state.drain();
}

void OpQueue::close() {
  abort(std::make_exception_ptr(
      StateError(detail::concat(state_->name, ": backend shut down before the operation ran"))));
  if (!removed_.exchange(true)) state_->workers.remove(state_.get());
  // An op a caller runs on its own thread ends too before this returns.
  while (state_->runner.load(std::memory_order_seq_cst) != 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace c10d::inline v1
