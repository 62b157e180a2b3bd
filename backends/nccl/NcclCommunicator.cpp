#include "backends/nccl/NcclCommunicator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/nccl/NcclTypes.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/CudaRuntime.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "store/Store.hpp"

namespace c10d::inline v0::nccl {

Communicator::Communicator(const BackendContext& context)
    : store_(context.store),
      rank_(context.rank),
      size_(context.size),
      timeout_(context.timeout),
      group_(context.groupName),
      localRank_(context.localRank) {}

std::string Communicator::where() const {
  return detail::concat("nccl backend of group '", group_, "' rank ", rank_);
}

// The device a group without tensors (barrier) uses: the local rank's, as launchers assign
// them. Not the group rank: in a subgroup it says nothing about this host's GPUs.
int Communicator::defaultDevice() const {
  int count = cudaDeviceCount();
  C10D_CHECK(count > 0, BackendError, where(), ": no CUDA device is visible to this process");
  if (localRank_ >= 0) return localRank_ % count;
  C10D_CHECK(count == 1, InvalidArgument, where(), ": ", count,
             " CUDA devices are visible and nothing says which is this process's: launch with "
             "c10drun, torchrun, mpirun or srun (they set the local rank), set LOCAL_RANK or "
             "ProcessGroupOptions::localRank, or run a collective on a CUDA tensor first");
  return 0;
}

bool Communicator::ensure(int onDevice) {
  int wanted = onDevice < 0 ? (device_ >= 0 ? device_ : defaultDevice()) : onDevice;
  C10D_CHECK(brokenBy_.empty(), BackendError, where(), ": the communicator was aborted (",
             brokenBy_, "); create a new process group to continue");
  if (comm_ != nullptr) {
    C10D_CHECK(wanted == device_, InvalidArgument, where(),
               ": its communicator is on cuda:", device_, ", a tensor is on cuda:", wanted,
               "; one group serves one device");
    return false;
  }
  auto what = [this] { return where(); };
  CudaDeviceGuard guard(wanted);
  ncclUniqueId id;
  if (rank_ == 0) {
    C10D_NCCL(ncclGetUniqueId(&id), nullptr, what);
    store_->set("nccl/unique-id",
                Store::Bytes(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id + 1)));
  }
  Store::Bytes bytes = store_->get("nccl/unique-id", timeout_);
  C10D_CHECK(bytes.size() == sizeof(id), BackendError, where(),
             ": the NCCL unique id in the store has ", bytes.size(), " bytes, expected ",
             sizeof(id));
  std::memcpy(&id, bytes.data(), sizeof(id));
  C10D_NCCL(ncclCommInitRank(&comm_, size_, id, rank_), nullptr, what);
  device_ = wanted;
  createStream();
  return true;
}

void Communicator::adopt(const Split& fromParent) {
  comm_ = fromParent.comm;
  device_ = fromParent.device;
  createStream();
}

void Communicator::createStream() {
  CudaDeviceGuard guard(device_);
  C10D_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), [this] { return where(); });
}

std::shared_ptr<Split> Communicator::split(const std::vector<int>& ranksInParent) {
  // A parent that never made its communicator has nothing to split: the subgroup makes its own
  // from a unique id when it first needs one (every rank is in the same state, as ops are
  // issued in the same order everywhere).
  if (comm_ == nullptr) return nullptr;
  auto position = std::find(ranksInParent.begin(), ranksInParent.end(), rank_);
  bool member = position != ranksInParent.end();
  int color =
      member ? *std::min_element(ranksInParent.begin(), ranksInParent.end()) : NCCL_SPLIT_NOCOLOR;
  int key = member ? static_cast<int>(position - ranksInParent.begin()) : 0;
  ncclComm_t child = nullptr;
  CudaDeviceGuard deviceGuard(device_);
  C10D_NCCL(ncclCommSplit(comm_, color, key, &child, nullptr), comm_,
            [&] { return detail::concat(where(), ": ncclCommSplit for a subgroup"); });
  if (!member) return nullptr;
  return std::make_shared<Split>(Split{child, device_});
}

void Communicator::abort(const std::string& reason) {
  if (brokenBy_.empty()) brokenBy_ = reason;
  C10D_LOG(Error, where(), ": ", reason, "; aborting the communicator");
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
}

void Communicator::destroy() {
  if (comm_ != nullptr) {
    CudaDeviceGuard deviceGuard(device_);
    ncclResult_t status = ncclCommDestroy(comm_);
    if (status != ncclSuccess) {
      C10D_LOG(Warning, where(), ": ncclCommDestroy failed: ", ncclGetErrorString(status));
    }
    comm_ = nullptr;
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

}  // namespace c10d::inline v0::nccl
