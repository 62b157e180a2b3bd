// The parts of ProcessGroup's instrumentation that are not templates: the error context of a
// point-to-point op's Work, C10D_DEBUG=DETAIL's gathering of every rank's fingerprint of a
// collective, and the flight recorder's dump on request. The templates that wrap each operation
// (withErrorContext, checked) are in c10d/ProcessGroupInstrumentation.hpp.

#include "c10d/ProcessGroupInstrumentation.hpp"

#include <cstring>

#include "c10d/core/Exception.hpp"
#include "store/Store.hpp"

namespace c10d::inline v0 {

std::shared_ptr<Work> ProcessGroup::withErrorContext(std::shared_ptr<Work> work, const char* op,
                                                     int peer) {
  work->setErrorContext(errorContext_, op, -1, peer);
  return work;
}

std::vector<Tensor> ProcessGroup::gatherFingerprints(uint64_t sequence, const Tensor& mine,
                                                     std::chrono::milliseconds timeout) {
  const int64_t words = detail::CollectiveFingerprint::kWords;
  std::vector<Tensor> all;
  for (int r = 0; r < size_; ++r) all.push_back(Tensor::empty({words}, ScalarType::Int64));
  if (!options_.storeIsShared) {
    backend(DeviceType::CPU)->allgather(all, mine, {.timeout = timeout})->wait();
    return all;
  }
  auto prefix = [&](uint64_t seq) {
    return detail::concat("detail/", options_.groupName, "/", seq, "/");
  };
  const auto* bytes = static_cast<const uint8_t*>(mine.data());
  std::vector<Store::Bytes> values =
      exchangeThroughStore(prefix(sequence), Store::Bytes(bytes, bytes + mine.nbytes()), timeout,
                           [&](const std::string& absent) {
                             return detail::concat("rank(s) ", absent, " did not make collective #",
                                                   sequence + 1, " of group '", options_.groupName,
                                                   "' within ", timeout.count(), " ms");
                           });
  // Every rank has read the previous collective's records once all of this one's exist.
  if (sequence > 0) store_->deleteKey(prefix(sequence - 1) + std::to_string(rank_));
  for (int r = 0; r < size_; ++r) {
    C10D_CHECK(values[r].size() == static_cast<size_t>(all[r].nbytes()), BackendError,
               "C10D_DEBUG=DETAIL: rank ", r, "'s record of collective #", sequence + 1, " has ",
               values[r].size(), " bytes, not ", all[r].nbytes());
    std::memcpy(all[r].data(), values[r].data(), values[r].size());
  }
  return all;
}

std::string ProcessGroup::dumpFlightRecorder(const std::string& reason) const {
  C10D_CHECK(recorder_ != nullptr, InvalidArgument, "process group '", options_.groupName,
             "': the flight recorder is off (C10D_FLIGHT_RECORDER_SIZE=0)");
  return recorder_->dump(reason);
}

}  // namespace c10d::inline v0
