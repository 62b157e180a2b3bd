#include "backends/mpi/MpiProgress.hpp"

#include <sched.h>

#include <cstdlib>
#include <cstring>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"
#include "c10d/core/Ticks.hpp"

namespace c10d::inline v1 {

// ---- MpiP2PWork ----

MpiP2PWork::MpiP2PWork(const Op& op, std::shared_ptr<detail::GroupTrace> trace, Tensor tensor,
                       std::shared_ptr<MpiBackend::Progress> progress)
    : Work(op, std::move(trace)),
      tensor_(std::move(tensor)),
      isRecv_(op.type != OpType::Send),
      progress_(std::move(progress)),
      deadline_(std::chrono::steady_clock::now() + op.timeout) {
  if (isRecv_) output_ = tensor_;
}

MpiP2PWork::~MpiP2PWork() {
  // Still posted (the group shut down first): MPI may yet write the tensor, so keep it alive.
  if (request_ != MPI_REQUEST_NULL) progress_->abandon(request_, tensor_);
}

void MpiP2PWork::complete(const MPI_Status& status) {
  if (!isRecv_) {
    finish();
    return;
  }
  int received = 0;
  MPI_Get_count(&status, MPI_BYTE, &received);
  if (static_cast<size_t>(received) != tensor_.nbytes()) {
    finishWithError(std::make_exception_ptr(BackendError(detail::concat(
        description(), " on rank ", progress_->rank, ": rank ", status.MPI_SOURCE, " sent ",
        received, " bytes, the receive tensor holds ", tensor_.nbytes()))));
    return;
  }
  setSourceRank(status.MPI_SOURCE);
  finish();
}

bool MpiP2PWork::poll() {
  MPI_Status status;
  std::memset(&status, 0, sizeof(status));
  int code = MPI_SUCCESS;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (done_) return true;
    int flag = 0;
    code = MPI_Test(&request_, &flag, &status);
    if (code == MPI_SUCCESS && !flag) return false;
    done_ = true;
  }
  // Finished outside the lock: callbacks may call back into this Work.
  try {
    mpi::check(code, "MPI_Test",
               [&] { return detail::concat(description(), " on rank ", progress_->rank); });
    complete(status);
  } catch (...) {
    finishWithError(std::current_exception());
  }
  return true;
}

bool MpiP2PWork::expireIfLate(std::chrono::steady_clock::time_point now) {
  if (now < deadline_) return false;
  MPI_Status status;
  std::memset(&status, 0, sizeof(status));
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (done_) return false;
    if (isRecv_) {
      // A receive not yet matched can be cancelled; one matched meanwhile completes normally.
      MPI_Cancel(&request_);
      MPI_Wait(&request_, &status);
      int flag = 0;
      MPI_Test_cancelled(&status, &flag);
      cancelled = flag != 0;
    } else {
      progress_->abandon(request_, tensor_);  // MPI cannot take a send back
      request_ = MPI_REQUEST_NULL;
      cancelled = true;
    }
    done_ = true;
  }
  if (!cancelled) {
    try {
      complete(status);
    } catch (...) {
      finishWithError(std::current_exception());
    }
    return false;
  }
  finishWithError(std::make_exception_ptr(
      TimeoutError(detail::concat(description(), " on rank ", progress_->rank,
                                  ": not complete after ", timeout().count(), " ms"))));
  return true;
}

void MpiP2PWork::beforeWait() {
  // Open MPI progresses transfers only inside MPI calls, so the waiter keeps testing; yielding
  // between tests lets another rank sharing the core run.
  for (unsigned spins = 0;; ++spins) {
    if (poll()) return;
    if ((spins & 63) == 0 && expireIfLate(std::chrono::steady_clock::now())) return;
    sched_yield();
  }
}

// ---- Progress ----

MpiBackend::Progress::Progress(std::string groupName, int rankInGroup, bool abortOnTimeout)
    : group(std::move(groupName)), rank(rankInGroup), abortOnTimeout_(abortOnTimeout) {
  thread_ = std::thread([this] {
    detail::nameThisThread("c10d-mpi");
    detail::blockSigpipeInThisThread();
    run();
  });
}

MpiBackend::Progress::~Progress() {
  stop();
}

void MpiBackend::Progress::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MpiBackend::Progress::track(const std::shared_ptr<MpiP2PWork>& work) {
  bool wake;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    lastPosted_ = std::chrono::steady_clock::now();
    pending_.emplace_back(work, lastPosted_);
    wake = asleep_;
    asleep_ = false;
  }
  if (wake) changed_.notify_one();
}

void MpiBackend::Progress::abandon(MPI_Request request, Tensor tensor) {
  std::lock_guard<std::mutex> guard(mutex_);
  abandoned_.emplace_back(request, std::move(tensor));
}

MpiBackend::Progress::RunningCollective::RunningCollective(Progress& progress, const Op& op)
    : progress_(progress) {
  const uint64_t now = detail::ticks();
  progress_.running_.begin();
  progress_.running_.store(op);
  progress_.runningSince_.store(now, std::memory_order_relaxed);
  progress_.started_.store(progress_.started_.load(std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
  progress_.running_.end();
}

MpiBackend::Progress::RunningCollective::~RunningCollective() {
  progress_.running_.begin();
  progress_.runningSince_.store(0, std::memory_order_relaxed);
  progress_.running_.end();
}

void MpiBackend::Progress::checkCollective() {
  uint64_t since = 0;
  uint64_t started = 0;
  std::optional<Op> op = running_.read([&] {
    since = runningSince_.load(std::memory_order_relaxed);
    started = started_.load(std::memory_order_relaxed);
  });
  if (!op || since == 0 || started == reported_) return;
  const uint64_t now = detail::ticks();
  if (now < since || std::chrono::nanoseconds(detail::ticksToNanos(now - since)) < op->timeout) {
    return;
  }
  reported_ = started;
  std::string message = detail::concat(
      "mpi backend: ", describeNumbered(*op, &group), " on rank ", rank,
      " passed its timeout; MPI cannot abandon a collective, so a rank of the group probably "
      "never called it (or called a different one)");
  if (!abortOnTimeout_) {
    C10D_LOG(Error, message, ". C10D_MPI_ABORT_ON_TIMEOUT=0: leaving the job running");
    return;
  }
  C10D_LOG(Error, message,
           ". Ending the job with MPI_Abort (C10D_MPI_ABORT_ON_TIMEOUT=0 keeps it)");
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void MpiBackend::Progress::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    auto now = std::chrono::steady_clock::now();
    // Unclaimed point-to-point ops: test the ones posted at least kClaimDelay ago.
    std::vector<std::shared_ptr<MpiP2PWork>> due;
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto work = it->first.lock();
      if (!work || work->isCompleted()) {
        it = pending_.erase(it);
      } else {
        if (it->second + kClaimDelay <= now) due.push_back(std::move(work));
        ++it;
      }
    }
    auto abandoned = std::move(abandoned_);
    abandoned_.clear();
    lock.unlock();
    for (auto& work : due) {
      if (!work->poll()) work->expireIfLate(now);
    }
    due.clear();
    for (auto it = abandoned.begin(); it != abandoned.end();) {
      int flag = 0;
      MPI_Test(&it->first, &flag, MPI_STATUS_IGNORE);
      it = flag ? abandoned.erase(it) : it + 1;
    }
    checkCollective();
    lock.lock();
    for (auto& entry : abandoned) abandoned_.push_back(std::move(entry));
    if (stopping_) break;
    bool busy = !pending_.empty() || !abandoned_.empty() || now - lastPosted_ < kIdleAfter;
    if (busy) {
      changed_.wait_for(lock, kClaimDelay);
    } else {
      asleep_ = true;
      changed_.wait_for(lock, kWatchdogTick);
      asleep_ = false;
    }
  }
}

}  // namespace c10d::inline v1
