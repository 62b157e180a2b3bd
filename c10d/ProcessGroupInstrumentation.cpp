// The parts of ProcessGroup's instrumentation that are not templates: the error context of a
// point-to-point op's Work, C10D_DEBUG=DETAIL's gathering of every rank's fingerprint of a
// collective, and the flight recorder's dump on request. The templates that wrap each operation
// (withErrorContext, checked) are in c10d/ProcessGroupInstrumentation.hpp.

#include "c10d/ProcessGroupInstrumentation.hpp"

#include <cstring>
#include <string_view>

#include "c10d/core/Exception.hpp"
#include "store/Store.hpp"

namespace c10d::inline v0 {

namespace detail {

std::string errorText(const Future& done) {
  std::exception_ptr failure = done.error();
  if (!failure) return "";
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void dumpAfterFailure(const FlightRecorder& recorder, const std::string& what,
                      const std::string& error) {
  if (error.empty()) return;
  try {
    recorder.dump(concat(what, " failed: ", error));
  } catch (const std::exception& e) {
    C10D_LOG(Warning, e.what());
  }
}

void logCompletion(const std::string& prefix, std::chrono::steady_clock::time_point start,
                   const std::string& error) {
  if (prefix.empty()) return;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  logLine(LogLevel::Info,
          concat(prefix, error.empty() ? " completed" : " failed", " in ", us / 1000.0, " ms"));
}

}  // namespace detail

uint64_t detail::payloadBytes(const char* op, const Tensor* tensor, int64_t tensors,
                              int groupSize) {
  uint64_t bytes = 0;
  for (int64_t i = 0; i < tensors; ++i) bytes += tensor[i].nbytes();
  // checked() gets one part of these ops' buffers (a rank's input or output): the size is all N.
  static constexpr std::string_view kPerPart[] = {"allgather",      "allgather_into_tensor",
                                                  "gather",         "scatter",
                                                  "reduce_scatter", "reduce_scatter_tensor"};
  for (std::string_view name : kPerPart) {
    if (name == op) return bytes * static_cast<uint64_t>(groupSize);
  }
  return bytes;
}

void ProcessGroup::countTraffic(const char* op, uint64_t bytes) {
  std::lock_guard<std::mutex> guard(trafficMutex_);
  auto it = traffic_.find(std::string_view(op));
  if (it == traffic_.end()) it = traffic_.emplace(op, OpTraffic{op, 0, 0}).first;
  it->second.calls += 1;
  it->second.bytes += bytes;
}

std::vector<OpTraffic> ProcessGroup::traffic() const {
  std::lock_guard<std::mutex> guard(trafficMutex_);
  std::vector<OpTraffic> all;
  for (const auto& [name, count] : traffic_) all.push_back(count);
  return all;
}

void ProcessGroup::resetTraffic() {
  std::lock_guard<std::mutex> guard(trafficMutex_);
  traffic_.clear();
}

std::shared_ptr<Work> ProcessGroup::instrumentPointToPoint(std::shared_ptr<Work> work,
                                                           const char* op, const Tensor& tensor,
                                                           int peer, int tag) {
  work->setErrorContext(errorContext_, op, -1, peer);
  countTraffic(op, tensor.nbytes());
  if (!recorder_ && debug_ == DebugLevel::Off) return work;
  // Numbered apart from the collectives: ranks make different point-to-point ops.
  const uint64_t number = recorder_ ? recorder_->pointToPointStarted(op, tensor, peer, tag) : 0;
  std::chrono::steady_clock::time_point start;
  std::string logPrefix;
  if (debug_ != DebugLevel::Off) {
    start = std::chrono::steady_clock::now();
    logPrefix = detail::concat("group '", options_.groupName, "' rank ", rank_, ": ", op, " ",
                               tensor.describe(),
                               peer >= 0 ? detail::concat(" peer ", peer) : " from any rank",
                               " tag ", tag, " (point-to-point #", number, ")");
  }
  work->getFuture()->addCallback([number, start, op, peer, tag, recorder = recorder_,
                                  logPrefix = std::move(logPrefix)](Future& done) {
    std::string error = detail::errorText(done);
    if (recorder) {
      recorder->pointToPointFinished(number, error);
      detail::dumpAfterFailure(
          *recorder,
          detail::concat("point-to-point #", number, " (", op, " peer ", peer, " tag ", tag, ")"),
          error);
    }
    detail::logCompletion(logPrefix, start, error);
  });
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
