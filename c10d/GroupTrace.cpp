#include "c10d/GroupTrace.hpp"

#include "c10d/core/Logging.hpp"

namespace c10d::inline v1::detail {

GroupTrace::GroupTrace(std::string group, int rank, int size, DebugLevel debug,
                       size_t recorderCapacity)
    : group_(std::move(group)),
      rank_(rank),
      debug_(debug),
      recorder_(recorderCapacity > 0
                    ? std::make_unique<FlightRecorder>(group_, rank, size, recorderCapacity)
                    : nullptr) {}

ErrorContext GroupTrace::context(const Op& op) const {
  ErrorContext context{.op = std::string(name(op.type)), .group = group_, .rank = rank_};
  if (op.traits().collective) {
    context.sequence = static_cast<int64_t>(op.seq);
  } else if (op.peer >= 0) {
    context.peers = {op.peer};
  }
  return context;
}

std::string errorText(const std::exception_ptr& error) {
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void GroupTrace::record(const Op& op, const std::exception_ptr& error,
                        std::chrono::steady_clock::time_point started) const {
  const std::string text = errorText(error);
  const bool collective = op.traits().collective;
  if (recorder_) {
    if (collective) {
      recorder_->finished(op.seq, text);
    } else {
      recorder_->pointToPointFinished(op.seq, text);
    }
    // Every rank that sees an op fail leaves its view of the group behind (best effort).
    if (!text.empty()) {
      try {
        recorder_->dump(concat(describeNumbered(op), " failed: ", text));
      } catch (const std::exception& e) {
        C10D_LOG(Warning, e.what());
      }
    }
  }
  if (debug_ != DebugLevel::Off) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - started)
                  .count();
    logLine(LogLevel::Info,
            concat("group '", group_, "' rank ", rank_, ": ", describeNumbered(op),
                   text.empty() ? " completed" : " failed", " in ", us / 1000.0, " ms"));
  }
}

}  // namespace c10d::inline v1::detail
