#pragma once

// Private to the files of ProcessGroup (c10d/ProcessGroup*.cpp, c10d/Subgroups.cpp,
// c10d/MonitoredBarrier.cpp): the member templates that wrap its operations. withErrorContext
// puts the op, this group, this rank and the peer into an Error that leaves an operation;
// checked runs a collective under C10D_DEBUG (the DETAIL check of every rank's call, the INFO log
// line of its duration) and the flight recorder. Those files call them with lambdas of their own,
// so the definitions live here; the non-template parts are in c10d/ProcessGroupInstrumentation.cpp.

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"

namespace c10d::inline v0 {

namespace detail {

// What a recorded op does when its Work completes. Its error's text, "" when it succeeded.
std::string errorText(const Future& done);
// Every rank that sees an op fail leaves its view of the group behind (best effort: logged).
void dumpAfterFailure(const FlightRecorder& recorder, const std::string& what,
                      const std::string& error);
// C10D_DEBUG=INFO's line: "<prefix> completed in 0.123 ms"; nothing for an empty prefix.
void logCompletion(const std::string& prefix, std::chrono::steady_clock::time_point start,
                   const std::string& error);

}  // namespace detail

template <typename Body>
auto ProcessGroup::withErrorContext(const char* op, int peer, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (Error& e) {
    ErrorContext context = errorContext_ ? *errorContext_ : ErrorContext{};
    context.op = op;
    if (peer >= 0) context.peers = {peer};
    e.addContext(context);
    throw;
  }
}

template <typename Issue>
std::shared_ptr<Work> ProcessGroup::checked(const char* op, const Tensor* tensor, int64_t tensors,
                                            int64_t root, std::optional<ReduceOp> reduceOp,
                                            std::chrono::milliseconds timeout, Issue&& issue) {
  const uint64_t sequence = collectives_.fetch_add(1);
  if (debug_ == DebugLevel::Off && !recorder_) {
    std::shared_ptr<Work> work = issue();
    work->setErrorContext(errorContext_, op, static_cast<int64_t>(sequence), -1);
    countTraffic(op, tensor, tensors);
    return work;
  }
  // The recorder writes the call into its own slot; a fingerprint of our own is built only for
  // what C10D_DEBUG needs (the DETAIL check and the log line).
  if (recorder_) recorder_->queued(sequence, op, tensor, tensors, root, reduceOp);
  std::optional<detail::CollectiveFingerprint> fingerprint;
  if (debug_ != DebugLevel::Off)
    fingerprint = detail::CollectiveFingerprint::of(sequence, op, tensor, tensors, root, reduceOp);
  // A call that fails before its Work exists (bad input, the DETAIL check) is recorded too.
  auto failedBeforeStart = [&](const std::string& error) {
    if (recorder_) recorder_->finished(sequence, error);
  };
  if (debug_ == DebugLevel::Detail) {
    // Every rank's fingerprint, gathered before the collective itself can pair wrong calls.
    std::vector<Tensor> all;
    // The check's own failure (a rank that never makes the call: a timeout) reaches the caller
    // as the collective's would, through its Work, named after the collective.
    auto failed = [&](const auto& error) {
      failedBeforeStart(error.what());
      std::string call = fingerprint->describe();
      auto work = std::make_shared<Work>(call, timeout, std::vector<Tensor>{});
      using ErrorType = std::decay_t<decltype(error)>;
      work->finishWithError(std::make_exception_ptr(ErrorType(
          detail::concat(call, " in group '", options_.groupName, "' on rank ", rank_,
                         ": the C10D_DEBUG=DETAIL check before it failed: ", error.what()),
          error.context())));
      work->setErrorContext(errorContext_, op, static_cast<int64_t>(sequence), -1);
      return work;
    };
    try {
      all = gatherFingerprints(sequence, fingerprint->encode(), timeout);
    } catch (const TimeoutError& e) {
      return failed(e);
    } catch (const Error& e) {
      return failed(BackendError(e.what()));
    }
    std::vector<detail::CollectiveFingerprint> byRank;
    for (const Tensor& words : all) byRank.push_back(detail::CollectiveFingerprint::decode(words));
    std::string mismatch = detail::describeMismatch(byRank);
    if (!mismatch.empty()) {
      failedBeforeStart("C10D_DEBUG=DETAIL: the ranks' collectives differ");
      C10D_THROW(InvalidArgument, "C10D_DEBUG=DETAIL: rank ", rank_, " of group '",
                 options_.groupName, "': the ranks' collectives differ: ", mismatch);
    }
  }
  // The clock is read only for the log line.
  std::chrono::steady_clock::time_point start;
  if (debug_ != DebugLevel::Off) start = std::chrono::steady_clock::now();
  std::shared_ptr<Work> work;
  try {
    work = issue();
  } catch (const std::exception& e) {
    failedBeforeStart(e.what());
    throw;
  }
  work->setErrorContext(errorContext_, op, static_cast<int64_t>(sequence), -1);
  countTraffic(op, tensor, tensors);
  if (recorder_) recorder_->started(sequence);
  // Built only when INFO logging wants it: with C10D_DEBUG off the callback copies no strings
  // (the std::function holding it is still allocated).
  std::string logPrefix = debug_ != DebugLevel::Off
                              ? detail::concat("group '", options_.groupName, "' rank ", rank_,
                                               ": ", fingerprint->describe())
                              : std::string();
  work->getFuture()->addCompletionHook(
      [start, sequence, recorder = recorder_, logPrefix = std::move(logPrefix)](Future& done) {
        std::string error = detail::errorText(done);
        if (recorder) {
          recorder->finished(sequence, error);
          if (!error.empty()) {
            detail::dumpAfterFailure(*recorder, detail::concat("collective #", sequence), error);
          }
        }
        detail::logCompletion(logPrefix, start, error);
      });
  return work;
}

}  // namespace c10d::inline v0
