#pragma once

// Private to backends/mpi: point-to-point Works over MPI requests, and the thread that completes
// the ones nobody waits on and watches collectives' timeouts.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/mpi/MpiBackendImpl.hpp"
#include "backends/mpi/MpiTypes.hpp"
#include "c10d/AtomicOp.hpp"

namespace c10d::inline v1 {

// A send or receive posted with MPI_Isend/MPI_Irecv. Whoever tests its request under mutex_
// first and sees it complete finishes the Work: the caller in wait(), or the progress thread.
class MpiP2PWork : public Work {
 public:
  MpiP2PWork(const Op& op, std::shared_ptr<detail::GroupTrace> trace, Tensor tensor,
             std::shared_ptr<MpiBackend::Progress> progress);
  ~MpiP2PWork() override;

  MPI_Request* request() { return &request_; }
  // Tests the request once; true once the Work is finished (either way).
  bool poll();
  // Fails the Work with TimeoutError when its deadline has passed; true if it did.
  bool expireIfLate(std::chrono::steady_clock::time_point now);
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

 protected:
  void beforeWait() override;  // tests until complete or past the deadline

 private:
  void complete(const MPI_Status& status);
  Tensor tensor_;
  bool isRecv_;
  std::shared_ptr<MpiBackend::Progress> progress_;
  std::chrono::steady_clock::time_point deadline_;
  std::mutex mutex_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

struct MpiBackend::Progress {
  // abortOnTimeout: C10D_MPI_ABORT_ON_TIMEOUT, whether a collective past its timeout ends the
  // job (MPI cannot abandon one) or is only logged.
  Progress(std::string group, int rank, bool abortOnTimeout);
  ~Progress();  // stops the thread

  // A posted point-to-point op; the thread completes it if nobody has after kClaimDelay.
  void track(const std::shared_ptr<MpiP2PWork>& work);
  // A request whose Work timed out but that MPI could not cancel (a send): tested until done,
  // with the tensor it reads kept alive.
  void abandon(MPI_Request request, Tensor tensor);

  // Marks collective op as running for its scope, for the watchdog: no wake-up and no lock (the
  // op is copied where the watchdog reads it; see c10d/AtomicOp.hpp).
  class RunningCollective {
   public:
    RunningCollective(Progress& progress, const Op& op);
    ~RunningCollective();
    RunningCollective(const RunningCollective&) = delete;
    RunningCollective& operator=(const RunningCollective&) = delete;

   private:
    Progress& progress_;
  };

  void stop();  // joins the thread; idempotent

  const std::string group;
  const int rank;

 private:
  static constexpr std::chrono::milliseconds kClaimDelay{2};
  static constexpr std::chrono::milliseconds kIdleAfter{200};
  static constexpr std::chrono::milliseconds kWatchdogTick{500};
  void run();
  void checkCollective();

  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  bool asleep_ = false;  // in a long wait: a new op must wake it
  std::chrono::steady_clock::time_point lastPosted_;
  std::deque<std::pair<std::weak_ptr<MpiP2PWork>, std::chrono::steady_clock::time_point>> pending_;
  std::vector<std::pair<MPI_Request, Tensor>> abandoned_;
  // The running collective: its op and when it started (detail::ticks(), the cheap clock: read
  // per op; 0 while none runs), and the number of the one the watchdog reported (collectives
  // are counted as they start).
  detail::AtomicOp running_;
  std::atomic<uint64_t> runningSince_{0};
  std::atomic<uint64_t> started_{0};
  uint64_t reported_ = 0;  // the watchdog's
  bool abortOnTimeout_ = true;
  std::thread thread_;
};

}  // namespace c10d::inline v1
