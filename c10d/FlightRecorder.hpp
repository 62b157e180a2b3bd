#pragma once

// The flight recorder: each process group keeps its last N collectives (sequence number, op,
// sizes, state, timestamps), and apart from them its last N point-to-point ops, so that a hang or
// a timeout can be explained after the fact. Every rank writes its buffers as JSON when an op
// fails, on a signal, or on request, and tools/flight_report.py reads all ranks' dumps and says
// which ranks are behind, at which op, and who waits on whom.
//
// C10D_FLIGHT_RECORDER_SIZE, _DIR and _SIGNAL (c10d/core/Config.hpp) size the ring, place the dumps
// (c10d_flight_<group>_rank<R>.json, rewritten by each dump) and name the dump signal.
//
// States: "queued" (the call entered ProcessGroup), "started" (the backend accepted it and it
// is in flight), "completed" or "failed" (its Work finished; failed ones keep the error).
//
// Threading: every method may be called from any thread.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "c10d/CollectiveCheck.hpp"

namespace c10d::inline v0 {

class FlightRecorder {
 public:
  enum class State { Queued, Started, Completed, Failed };

  struct Entry {
    detail::CollectiveFingerprint call;  // call.sequence is the group's collective number
    State state = State::Queued;
    int64_t queuedUs = 0;  // microseconds since the epoch (system clock, comparable across hosts)
    int64_t startedUs = 0;
    int64_t finishedUs = 0;
    std::string error;
  };

  // A point-to-point op: its own ring and numbering, since ranks make different ones (a send
  // here is a receive there) and they must not shift the collectives' sequence numbers.
  struct PointToPointEntry {
    uint64_t number = 0;  // this rank's point-to-point ops in the group, from 0
    const char* op = "";  // "send", "recv", "recv_anysource" (a string literal)
    int peer = -1;        // -1: any source
    int tag = 0;
    ScalarType dtype = ScalarType::Float32;
    int64_t numel = 0;
    State state = State::Started;
    int64_t startedUs = 0;
    int64_t finishedUs = 0;
    std::string error;
  };

  // capacity > 0. Registers the recorder for dumpAll() and the signal.
  FlightRecorder(std::string group, int rank, int size, size_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // The call CollectiveFingerprint::of would describe, written straight into its slot: once the
  // ring has wrapped, recording allocates nothing.
  void queued(uint64_t sequence, const char* op, const Tensor* tensor, int64_t tensors,
              int64_t root, std::optional<ReduceOp> reduceOp);
  void started(uint64_t sequence);
  // error empty: completed.
  void finished(uint64_t sequence, const std::string& error);

  // A point-to-point op the backend accepted; returns its number for pointToPointFinished.
  uint64_t pointToPointStarted(const char* op, const Tensor& tensor, int peer, int tag);
  // error empty: completed.
  void pointToPointFinished(uint64_t number, const std::string& error);

  // The entries still held, oldest first.
  std::vector<Entry> entries() const;
  std::vector<PointToPointEntry> pointToPointEntries() const;
  // {"group", "rank", "size", "reason", "dumped_us", "entries": [{"seq", "op", "call",
  // "state", "queued_us", "started_us", "finished_us", "error"}], "p2p": [{"n", "op", "peer",
  // "tag", "dtype", "numel", "state", "started_us", "finished_us", "error"}]}.
  std::string toJson(const std::string& reason) const;
  // Writes toJson(reason) to the file named in the header comment; returns its path. Throws
  // Error when the file cannot be written.
  std::string dump(const std::string& reason) const;

  // Dumps every live recorder of this process (best effort: failures are logged); returns the
  // paths written.
  static std::vector<std::string> dumpAll(const std::string& reason);

 private:
  const std::string group_;
  const int rank_;
  const int size_;
  mutable std::mutex mutex_;
  std::vector<Entry> ring_;  // slot sequence % capacity
  uint64_t next_ = 0;        // one past the highest sequence recorded
  std::vector<PointToPointEntry> p2p_;  // slot number % capacity
  uint64_t nextP2P_ = 0;
};

}  // namespace c10d::inline v0
