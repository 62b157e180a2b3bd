#include "backends/nccl/NcclWatchdog.hpp"

#include <nccl.h>

#include "c10d/core/Cuda.hpp"
#include "c10d/core/CudaRuntime.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1 {

// ---- NcclWork ----

NcclWork::NcclWork(const Op& op, std::shared_ptr<detail::GroupTrace> trace,
                   std::vector<Tensor> outputs, std::vector<Tensor> keepAlive, cudaEvent_t done,
                   bool blockingWait)
    : Work(op, std::move(trace)),
      keepAlive_(std::move(keepAlive)),
      done_(done),
      blockingWait_(blockingWait),
      deadline_(std::chrono::steady_clock::now() + op.timeout) {
  outputs_ = std::move(outputs);
}

NcclWork::~NcclWork() {
  if (done_ != nullptr) cudaEventDestroy(done_);
}

void NcclWork::wait(std::chrono::milliseconds timeout) {
  if (!blockingWait_ && !isCompleted()) {
    // Later work on the caller's stream runs after the op; the host does not wait.
    C10D_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(currentCudaStream()), done_, 0),
              [&] { return description(); });
    return;
  }
  Work::wait(timeout);
}

bool NcclWork::ready(std::exception_ptr& error) {
  cudaError_t status = cudaEventQuery(done_);
  if (status == cudaErrorNotReady) return false;
  keepAlive_.clear();
  if (status != cudaSuccess) {
    error = std::make_exception_ptr(
        BackendError(detail::concat(description(), ": CUDA reports ", cudaGetErrorName(status),
                                    " (", cudaGetErrorString(status), ")")));
  }
  return true;
}

void NcclWork::complete(const std::exception_ptr& error) {
  if (error) {
    finishWithError(error);
  } else {
    finish();
  }
}

// ---- Watchdog ----

namespace nccl {

Watchdog::Watchdog(std::mutex& mutex, Communicator& communicator)
    : mutex_(mutex), communicator_(communicator) {}

void Watchdog::start() {
  thread_ = std::thread([this] {
    detail::nameThisThread("c10d-nccl-wdog");
    detail::blockSigpipeInThisThread();
    watch();
  });
}

void Watchdog::track(const std::shared_ptr<NcclWork>& work) {
  inflight_.push_back(work);
  changed_.notify_one();
}

bool Watchdog::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_) return false;
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  return true;
}

void Watchdog::abortLocked(const std::string& reason, const std::shared_ptr<NcclWork>& late,
                           Finished& finished) {
  communicator_.abort(reason);
  for (auto& work : inflight_) {
    std::string message = detail::concat(work->description(), " on rank ", communicator_.rank(),
                                         ": ", reason, "; the communicator was aborted");
    if (work == late) {
      finished.emplace_back(work, std::make_exception_ptr(TimeoutError(message)));
    } else {
      finished.emplace_back(work, std::make_exception_ptr(BackendError(message)));
    }
  }
  inflight_.clear();
}

// Moves the leading in-flight Works whose events fired into finished.
void Watchdog::collectReadyLocked(Finished& finished) {
  std::exception_ptr error;
  while (!inflight_.empty() && inflight_.front()->ready(error)) {
    finished.emplace_back(std::move(inflight_.front()), error);
    inflight_.pop_front();
    error = nullptr;
  }
}

void Watchdog::drainLocked(Finished& finished) {
  collectReadyLocked(finished);
  for (auto& work : inflight_) {
    finished.emplace_back(work, std::make_exception_ptr(StateError(detail::concat(
                                    work->description(), " on rank ", communicator_.rank(),
                                    ": the backend shut down before it finished"))));
  }
  inflight_.clear();
}

void Watchdog::abortPendingLocked(const std::string& reason, Finished& finished) {
  collectReadyLocked(finished);
  abortLocked(reason, nullptr, finished);
}

void Watchdog::completeAll(Finished& finished) {
  for (auto& [work, error] : finished) work->complete(error);
  finished.clear();
}

void Watchdog::watch() {
  Finished finished;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    changed_.wait_for(lock, std::chrono::milliseconds(inflight_.empty() ? 500 : 1));
    ncclComm_t comm = communicator_.comm();
    if (comm == nullptr) continue;
    {
      CudaDeviceGuard guard(communicator_.device());
      collectReadyLocked(finished);
      ncclResult_t asyncError = ncclSuccess;
      if (ncclCommGetAsyncError(comm, &asyncError) == ncclSuccess && asyncError != ncclSuccess &&
          asyncError != ncclInProgress) {
        abortLocked(
            detail::concat("NCCL reported an asynchronous error: ", ncclGetErrorString(asyncError)),
            nullptr, finished);
      } else {
        auto now = std::chrono::steady_clock::now();
        for (auto& work : inflight_) {
          if (now >= work->deadline()) {
            auto late = work;
            abortLocked(detail::concat(late->description(), " timed out after ",
                                       late->timeout().count(), " ms"),
                        late, finished);
            break;
          }
        }
      }
    }
    if (finished.empty()) continue;
    lock.unlock();
    completeAll(finished);
    lock.lock();
  }
}

}  // namespace nccl

}  // namespace c10d::inline v1
