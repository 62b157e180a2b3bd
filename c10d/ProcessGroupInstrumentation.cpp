// ProcessGroup::issue, the one path from a public operation to its backend: numbering, the
// flight recorder, C10D_DEBUG=DETAIL's check that every rank makes the same call, the op's
// traffic; and the recorder's dump on request. withErrorContext is in
// c10d/ProcessGroupInstrumentation.hpp.

#include "c10d/ProcessGroupInstrumentation.hpp"

#include <algorithm>
#include <cstring>

#include "c10d/CollectiveCheck.hpp"
#include "c10d/FlightRecorder.hpp"
#include "c10d/core/Exception.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1 {

std::shared_ptr<Work> ProcessGroup::issue(Backend& backend, Op& op, const OpTensors& tensors,
                                          uint64_t bytes) {
  if (detail::openCoalescingBlocks.load(std::memory_order_relaxed) != 0 &&
      detail::tlsCoalescingBlock != nullptr) [[unlikely]] {
    return hold(op, tensors);
  }
  detail::GroupState& s = *state_;  // one load of the pointer, not one per use
  const bool collective = op.traits().collective;
  op.seq = (collective ? s.collectives : s.pointToPoint).fetch_add(1, std::memory_order_relaxed);
  // Recorded as started before the backend can complete it: the recorder's states only move on.
  const bool checked = collective && s.debugDetail;
  s.trace->issued(op, !checked);
  if (checked) {
    if (std::shared_ptr<Work> failed = checkEveryRankMakes(op)) return failed;
    s.trace->accepted(op);
  }
  std::shared_ptr<Work> work;
  try {
    work = backend.start(op, tensors);
  } catch (const std::exception& e) {
    // A call that fails before its Work exists is recorded too.
    s.trace->failedBeforeStart(op, e.what());
    throw;
  }
  // A program's backend made a Work that knows nothing of the op yet.
  work->bind(op, s.trace);
  countTraffic(op.type, bytes);
  return work;
}

namespace {

// A Work that failed before its op started: the DETAIL check's own failure.
class FailedCheck : public Work {
 public:
  FailedCheck(const Op& op, std::shared_ptr<detail::GroupTrace> trace, std::exception_ptr error)
      : Work(op, std::move(trace)) {
    finishWithError(std::move(error));
  }
};

}  // namespace

std::shared_ptr<Work> ProcessGroup::checkEveryRankMakes(const Op& op) {
  std::vector<Tensor> all;
  // The check's own failure (a rank that never makes the call: a timeout) reaches the caller as
  // the collective's would, through its Work, named after the collective.
  auto failed = [&](const auto& error) {
    using ErrorType = std::decay_t<decltype(error)>;
    return std::make_shared<FailedCheck>(
        op, state_->trace,
        std::make_exception_ptr(ErrorType(
            detail::concat(describeNumbered(op), " in group '", state_->options.groupName,
                           "' on rank ", state_->rank,
                           ": the C10D_DEBUG=DETAIL check before it failed: ", error.what()),
            error.context())));
  };
  try {
    all = gatherCalls(op);
  } catch (const TimeoutError& e) {
    return failed(e);
  } catch (const Error& e) {
    return failed(BackendError(e.what()));
  }
  std::vector<Op> byRank;
  for (const Tensor& words : all) byRank.push_back(detail::decodeCall(words));
  std::string mismatch = detail::describeMismatch(byRank);
  if (!mismatch.empty()) {
    state_->trace->failedBeforeStart(op, "C10D_DEBUG=DETAIL: the ranks' collectives differ");
    throw InvalidArgument(
        detail::concat("C10D_DEBUG=DETAIL: rank ", state_->rank, " of group '",
                       state_->options.groupName, "': the ranks' collectives differ: ", mismatch),
        state_->trace->context(op));
  }
  return nullptr;
}

void ProcessGroup::countTraffic(OpType type, uint64_t bytes) {
  const auto slot = static_cast<size_t>(type);
  state_->trafficCalls[slot].fetch_add(1, std::memory_order_relaxed);
  state_->trafficBytes[slot].fetch_add(bytes, std::memory_order_relaxed);
}

std::vector<OpTraffic> ProcessGroup::traffic() const {
  // In name order.
  std::vector<OpTraffic> all;
  for (size_t i = 0; i < state_->trafficCalls.size(); ++i) {
    const uint64_t calls = state_->trafficCalls[i].load(std::memory_order_relaxed);
    if (calls > 0) {
      all.push_back({std::string(name(static_cast<OpType>(i))), calls,
                     state_->trafficBytes[i].load(std::memory_order_relaxed)});
    }
  }
  std::sort(all.begin(), all.end(),
            [](const OpTraffic& a, const OpTraffic& b) { return a.op < b.op; });
  return all;
}

void ProcessGroup::resetTraffic() {
  for (size_t i = 0; i < state_->trafficCalls.size(); ++i) {
    state_->trafficCalls[i].store(0, std::memory_order_relaxed);
    state_->trafficBytes[i].store(0, std::memory_order_relaxed);
  }
}

std::vector<Tensor> ProcessGroup::gatherCalls(const Op& op) {
  const uint64_t sequence = op.seq;
  const std::chrono::milliseconds timeout = op.timeout;
  const Tensor mine = detail::encodeCall(op);
  std::vector<Tensor> all;
  for (int r = 0; r < state_->size; ++r) {
    all.push_back(Tensor::empty({detail::kCallWords}, ScalarType::Int64));
  }
  if (!state_->options.storeIsShared) {
    // Over the CPU backend, as a check of collective sequence: it takes no number of its own.
    Op check = Op::on(OpType::Allgather, mine, timeout);
    check.seq = sequence;
    check.flags = Op::kCheck;
    Backend* cpu = state_->routed[static_cast<size_t>(DeviceType::CPU)];
    cpu->start(check, {.input = &mine, .outputs = &all})->wait();
    return all;
  }
  auto prefix = [&](uint64_t seq) {
    return detail::concat("detail/", state_->options.groupName, "/", seq, "/");
  };
  const auto* bytes = static_cast<const uint8_t*>(mine.data());
  std::vector<Store::Bytes> values = exchangeThroughStore(
      prefix(sequence), Store::Bytes(bytes, bytes + mine.nbytes()), timeout,
      [&](const std::string& absent) {
        return detail::concat("rank(s) ", absent, " did not make ", describeNumbered(op),
                              " of group '", state_->options.groupName, "' within ",
                              timeout.count(), " ms");
      });
  // Every rank has read the previous collective's records once all of this one's exist.
  if (sequence > 0) state_->store->deleteKey(prefix(sequence - 1) + std::to_string(state_->rank));
  for (int r = 0; r < state_->size; ++r) {
    C10D_CHECK(values[r].size() == static_cast<size_t>(all[r].nbytes()), BackendError,
               "C10D_DEBUG=DETAIL: rank ", r, "'s record of ", describeNumbered(op), " has ",
               values[r].size(), " bytes, not ", all[r].nbytes());
    std::memcpy(all[r].data(), values[r].data(), values[r].size());
  }
  return all;
}

const FlightRecorder* ProcessGroup::flightRecorder() const {
  return state_->trace->recorder();
}

std::string ProcessGroup::dumpFlightRecorder(const std::string& reason) const {
  C10D_CHECK(state_->trace->recorder() != nullptr, InvalidArgument, "process group '",
             state_->options.groupName,
             "': the flight recorder is off (C10D_FLIGHT_RECORDER_SIZE=0)");
  return state_->trace->recorder()->dump(reason);
}

}  // namespace c10d::inline v1
