#include "backends/nccl/NcclCommunicator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

#include "backends/nccl/NcclTypes.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/CudaRuntime.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1::nccl {

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
  ncclUniqueId id = exchangeUniqueId();
  C10D_NCCL(ncclCommInitRank(&comm_, size_, id, rank_), nullptr, what);
  device_ = wanted;
  createStream();
  return true;
}

ncclUniqueId Communicator::exchangeUniqueId() {
  auto what = [this] { return where(); };
  ncclUniqueId id;
  if (rank_ == 0) {
    C10D_NCCL(ncclGetUniqueId(&id), nullptr, what);
    store_->set("nccl/unique-id",
                Store::Bytes(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id + 1)));
  }
  // Every rank arrives before any enters ncclCommInitRank, which waits for the missing ones
  // forever and cannot be interrupted; here a missing rank is named at the timeout and shutdown
  // can end the wait. Rank 0 arrives after publishing the id, so the get below finds it.
  awaitEveryRank(*store_, "nccl/arrived/", rank_, size_,
                 std::chrono::steady_clock::now() + timeout_, cancelled_,
                 [this] { return detail::concat(where(), ": making the NCCL communicator"); });
  Store::Bytes bytes = store_->get("nccl/unique-id", timeout_);
  C10D_CHECK(bytes.size() == sizeof(id), BackendError, where(),
             ": the NCCL unique id in the store has ", bytes.size(), " bytes, expected ",
             sizeof(id));
  std::memcpy(&id, bytes.data(), sizeof(id));
  return id;
}

void awaitEveryRank(Store& store, const std::string& prefix, int rank, int size,
                    std::chrono::steady_clock::time_point deadline,
                    const std::atomic<bool>& cancelled, const std::function<std::string()>& what) {
  // How soon a cancel or the deadline is noticed; a store round trip per slice costs nothing
  // next to a communicator's creation.
  constexpr auto kSlice = std::chrono::milliseconds(100);
  store.setString(prefix + std::to_string(rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(prefix + std::to_string(r));
  auto started = std::chrono::steady_clock::now();
  while (true) {
    C10D_CHECK(!cancelled.load(), StateError, what(),
               ": the backend was shut down while waiting for the other ranks");
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    auto slice = std::min<std::chrono::milliseconds>(
        kSlice, std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
    try {
      store.wait(keys, slice);
      return;
    } catch (const TimeoutError&) {
    }
  }
  std::string absent;
  for (int r = 0; r < size; ++r) {
    if (store.check({keys[r]})) continue;
    absent += (absent.empty() ? "" : ", ") + std::to_string(r);
  }
  C10D_THROW(TimeoutError, what(), ": rank(s) ", absent, " did not come within ",
             std::chrono::duration_cast<std::chrono::milliseconds>(deadline - started).count(),
             " ms; every rank of a group must issue its first GPU op (each rank waits there for "
             "the others)");
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

std::string Communicator::awaitStream(std::chrono::steady_clock::time_point deadline) {
  if (comm_ == nullptr || stream_ == nullptr) return {};
  CudaDeviceGuard deviceGuard(device_);
  auto started = std::chrono::steady_clock::now();
  while (true) {
    cudaError_t state = cudaStreamQuery(stream_);
    if (state == cudaSuccess) return {};
    if (state != cudaErrorNotReady) {
      return detail::concat("its stream failed: ", cudaGetErrorString(state));
    }
    ncclResult_t asyncError = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &asyncError) == ncclSuccess && asyncError != ncclSuccess &&
        asyncError != ncclInProgress) {
      return detail::concat("NCCL reported an asynchronous error: ",
                            ncclGetErrorString(asyncError));
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return detail::concat(
          "its ops did not finish within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(now - started).count(), " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
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

}  // namespace c10d::inline v1::nccl
