#pragma once

// Private to the library (never installed): what every Work of a process group reports to as it
// completes, and what ProcessGroup reports to as it issues ops. It keeps the group's identity for
// errors (op, group, rank, sequence number, peer in Error::context()), its flight recorder, and
// C10D_DEBUG's log line of each op's duration. A group's backends get it at creation
// (BackendContext::trace) and hand it to their Works; a Work keeps it alive, so its description
// and error context outlive the group.
//
// Threading: every method may be called from any thread.

#include <chrono>
#include <exception>
#include <memory>
#include <string>

#include "c10d/CollectiveCheck.hpp"
#include "c10d/FlightRecorder.hpp"
#include "c10d/Op.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::detail {

class GroupTrace {
 public:
  // recorderCapacity 0: no flight recorder.
  GroupTrace(std::string group, int rank, int size, DebugLevel debug, size_t recorderCapacity);

  const std::string& group() const { return group_; }
  int rank() const { return rank_; }
  DebugLevel debug() const { return debug_; }
  // Null when C10D_FLIGHT_RECORDER_SIZE is 0.
  FlightRecorder* recorder() const { return recorder_.get(); }
  // Whether a Work must note when it started (for C10D_DEBUG's log line).
  bool timesOps() const { return debug_ != DebugLevel::Off; }

  // The fields of an error of op: op's name, the group, this rank, and the collective's number
  // or the point-to-point op's peer.
  ErrorContext context(const Op& op) const;

  // ProcessGroup, issuing op: it entered (started: it goes to its backend at once, with nothing
  // to wait for before; else queued), and later goes to its backend (accepted).
  void issued(const Op& op, bool started) const {
    if (!recorder_) return;
    if (!op.traits().collective) {
      recorder_->pointToPointStarted(op);
    } else if (started) {
      recorder_->started(op);
    } else {
      recorder_->queued(op);
    }
  }
  void accepted(const Op& op) const {
    if (recorder_) recorder_->started(op.seq);
  }
  // An op that failed before any Work existed (bad input, the DETAIL check, a backend's
  // refusal).
  void failedBeforeStart(const Op& op, const std::string& error) const {
    if (!recorder_) return;
    if (op.traits().collective) {
      recorder_->finished(op.seq, error);
    } else {
      recorder_->pointToPointFinished(op.seq, error);
    }
  }
  // op's Work completes (error null: it succeeded), before any wait on it returns: the recorder
  // notes it, a failure dumps the recorder, and C10D_DEBUG logs its duration since started.
  void finished(const Op& op, const std::exception_ptr& error,
                std::chrono::steady_clock::time_point started) const {
    // An op run on behalf of another (Op::flags) is recorded as that one.
    if (op.flags != 0) return;
    if (!error && debug_ == DebugLevel::Off) {
      if (!recorder_) return;
      if (op.traits().collective) {
        recorder_->completed(op.seq);
      } else {
        recorder_->pointToPointCompleted(op.seq);
      }
      return;
    }
    if (recorder_ || debug_ != DebugLevel::Off) record(op, error, started);
  }

 private:
  void record(const Op& op, const std::exception_ptr& error,
              std::chrono::steady_clock::time_point started) const;

  const std::string group_;
  const int rank_;
  const DebugLevel debug_;
  const std::unique_ptr<FlightRecorder> recorder_;
};

// The message of error, "" for none.
std::string errorText(const std::exception_ptr& error);

}  // namespace c10d::inline v1::detail
