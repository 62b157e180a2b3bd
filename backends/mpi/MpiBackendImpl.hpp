#pragma once

// Private to backends/mpi: the MpiBackend class behind ProcessGroup (the public header,
// backends/mpi/MpiBackend.hpp, offers newMpiProcessGroup only).

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "backends/common/QueuedBackend.hpp"
#include "backends/mpi/MpiBackend.hpp"
#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

namespace mpi {
struct Communicator;
}
class MpiWork;  // private to backends/mpi
namespace detail {
template <typename T>
class WorkPool;
}  // namespace detail

// Collectives run in issue order on the backend's own thread, or on the caller's thread when it
// waits for the op it just issued (no hand-off); point-to-point ops are posted at once
// (MPI_Isend/MPI_Irecv) on the caller's thread and completed by whoever waits, or by a
// progress thread for Works nobody waits on. Both need MPI_THREAD_MULTIPLE: the backend
// initialises MPI with it when the program has not, and refuses (BackendError) an MPI that was
// initialised with less.
//
// Timeouts: a point-to-point op that passes its timeout fails with TimeoutError (a receive is
// cancelled). MPI cannot abandon a collective: when one passes its timeout the backend logs the
// op, group, sequence number and rank, and (unless C10D_MPI_ABORT_ON_TIMEOUT=0) ends the job
// with MPI_Abort rather than hang; a caller that waits for it on another thread gets
// TimeoutError.
class MpiBackend : public QueuedBackend {
 public:
  // The job's group (fromParent null): MPI_COMM_WORLD, whose rank and size must be the group's.
  // A subgroup: the communicator its parent split off (splitForSubgroup).
  explicit MpiBackend(const BackendContext& context);
  ~MpiBackend() override;

  // MPI_Comm_split of this backend's communicator, run in issue order with the collectives.
  std::shared_ptr<void> splitForSubgroup(const std::vector<int>& ranksInParent) override;

  MPI_Comm communicator() const { return comm_; }

  // The backend's progress thread: completes point-to-point Works nobody waits on, fails those
  // past their timeout, and watches the running collective's timeout (MpiProgress.hpp).
  struct Progress;

 private:
  std::shared_ptr<QueuedWork> makeCollective(const Op& op, const OpTensors& tensors) override;
  std::shared_ptr<Work> startP2P(const Op& op, const Tensor& tensor) override;
  void stopAfterQueue() override;

  std::shared_ptr<mpi::Communicator> owned_;  // a duplicate or a split: ours alone
  MPI_Comm comm_ = MPI_COMM_NULL;
  int tagUpperBound_ = 32767;  // MPI_TAG_UB; the standard guarantees at least this
  std::shared_ptr<Progress> progress_;
  std::shared_ptr<detail::WorkPool<MpiWork>> pool_;  // the collectives' Works, for reuse
};

}  // namespace c10d::inline v1
