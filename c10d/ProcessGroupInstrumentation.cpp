// The parts of ProcessGroup's instrumentation that are not templates: the error context of a
// point-to-point op's Work, C10D_DEBUG=DETAIL's gathering of every rank's fingerprint of a
// collective, and the flight recorder's dump on request. The templates that wrap each operation
// (withErrorContext, checked) are in c10d/ProcessGroupInstrumentation.hpp.

#include "c10d/ProcessGroupInstrumentation.hpp"

#include <cstring>
#include <iterator>

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

namespace {

// The ops a group counts, each with whether checked() hands it one part of the op's buffer (a
// rank's input or output) rather than the whole: its size is then all N parts.
struct TrafficOp {
  const char* name;
  bool perPart;
};
constexpr TrafficOp kTrafficOps[] = {
    {"allgather", true},       {"allgather_into_tensor", true},
    {"allreduce", false},      {"allreduce_coalesced", false},
    {"alltoall", false},       {"alltoall_base", false},
    {"barrier", false},        {"broadcast", false},
    {"gather", true},          {"recv", false},
    {"recv_anysource", false}, {"reduce", false},
    {"reduce_scatter", true},  {"reduce_scatter_tensor", true},
    {"scatter", true},         {"send", false},
    {"unknown", false},
};

// The slot of op: the same literal is one pointer in this library, so the comparison that
// matches is usually the first one made for it; names compare only for a literal of another TU.
size_t trafficSlot(const char* op) {
  for (size_t i = 0; i + 1 < std::size(kTrafficOps); ++i) {
    if (kTrafficOps[i].name == op) return i;
  }
  for (size_t i = 0; i + 1 < std::size(kTrafficOps); ++i) {
    if (std::strcmp(kTrafficOps[i].name, op) == 0) return i;
  }
  return std::size(kTrafficOps) - 1;
}

}  // namespace

void ProcessGroup::countTraffic(const char* op, const Tensor* tensor, int64_t tensors) {
  static_assert(std::size(kTrafficOps) == kTrafficSlots);
  const size_t slot = trafficSlot(op);
  uint64_t bytes = 0;
  for (int64_t i = 0; i < tensors; ++i) bytes += tensor[i].nbytes();
  if (kTrafficOps[slot].perPart) bytes *= static_cast<uint64_t>(size_);
  trafficCalls_[slot].fetch_add(1, std::memory_order_relaxed);
  trafficBytes_[slot].fetch_add(bytes, std::memory_order_relaxed);
}

std::vector<OpTraffic> ProcessGroup::traffic() const {
  std::vector<OpTraffic> all;
  for (size_t i = 0; i < kTrafficSlots; ++i) {
    const uint64_t calls = trafficCalls_[i].load(std::memory_order_relaxed);
    if (calls > 0) {
      all.push_back({kTrafficOps[i].name, calls, trafficBytes_[i].load(std::memory_order_relaxed)});
    }
  }
  return all;
}

void ProcessGroup::resetTraffic() {
  for (size_t i = 0; i < kTrafficSlots; ++i) {
    trafficCalls_[i].store(0, std::memory_order_relaxed);
    trafficBytes_[i].store(0, std::memory_order_relaxed);
  }
}

std::shared_ptr<Work> ProcessGroup::instrumentPointToPoint(std::shared_ptr<Work> work,
                                                           const char* op, const Tensor& tensor,
                                                           int peer, int tag) {
  work->setErrorContext(errorContext_, op, -1, peer);
  countTraffic(op, &tensor, 1);
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
  work->getFuture()->addCompletionHook([number, start, op, peer, tag, recorder = recorder_,
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
