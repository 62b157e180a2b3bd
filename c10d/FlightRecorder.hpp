#pragma once

/// \file
/// FlightRecorder: each process group's record of its last operations, dumped as JSON to
/// explain a hang or a timeout.
///
/// The flight recorder: each process group keeps its last N collectives (the Op, its state and
/// timestamps), and apart from them its last N point-to-point ops, so that a hang or a timeout can
/// be explained after the fact. Every rank writes its buffers as JSON when an op fails, on a
/// signal, or on request, and tools/flight_report.py reads all ranks' dumps and says which ranks
/// are behind, at which op, and who waits on whom.
///
/// C10D_FLIGHT_RECORDER_SIZE, _DIR and _SIGNAL (c10d/core/Config.hpp) size the ring, place the
/// dumps (c10d_flight_\<group\>_rank\<R\>.json, rewritten by each dump) and name the dump signal.
///
/// States: "queued" (the call entered ProcessGroup), "started" (ProcessGroup handed it to its
/// backend), "completed" or "failed" (its Work finished; failed ones keep the error).
///
/// Every op of a group writes here, so recording takes no lock and allocates nothing: an entry is
/// a slot of plain words indexed by the op's number, published with release stores, its times
/// read from the cheap clock of c10d/core/Ticks.hpp and converted when a dump reads them. Only a
/// failure's message takes a lock.
///
/// Threading: every method may be called from any thread.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "c10d/Op.hpp"

namespace c10d::inline v1 {

/// A group's flight recorder: its last collectives and, in a ring of their own, its last
/// point-to-point ops, with their states and times (see the header's comment).
class FlightRecorder {
 public:
  /// Where an op is.
  enum class State : uint8_t { Queued, Started, Completed, Failed };
  /// \var State::Queued
  /// "queued": the call entered ProcessGroup.
  /// \var State::Started
  /// "started": ProcessGroup handed it to its backend.
  /// \var State::Completed
  /// "completed": its Work finished without an error.
  /// \var State::Failed
  /// "failed": its Work (or the call, before it started) failed; Entry::error says how.

  /// An entry as read: op.seq is the group's collective number (a point-to-point op's: its
  /// number among this rank's point-to-point ops of the group).
  struct Entry {
    Op op;                        ///< the op as recorded
    State state = State::Queued;  ///< its state when read
    int64_t queuedUs = 0;  ///< microseconds since the epoch (system clock, comparable across hosts)
    int64_t startedUs = 0;   ///< when it went to its backend, as queuedUs; 0 before
    int64_t finishedUs = 0;  ///< when its Work finished, as queuedUs; 0 before
    std::string error;       ///< a failed op's error; empty otherwise
  };

  /// capacity > 0. Registers the recorder for dumpAll() and the signal.
  /// \param group the group's name, in the dump and its file's name.
  /// \param rank this process's rank in the group.
  /// \param size the group's size.
  /// \param capacity the entries each ring holds.
  /// \throws InvalidArgument when capacity is 0.
  FlightRecorder(std::string group, int rank, int size, size_t capacity);
  /// Unregisters the recorder.
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  /// A collective entered ProcessGroup (state queued), went to its backend (started), its Work
  /// finished (error empty: completed). Calls for an op the ring no longer holds are ignored.
  /// An op's calls come in this order (ProcessGroup issues it, then its Work completes), so each
  /// is a few plain stores.
  /// \param op the collective; op.seq is its number.
  void queued(const Op& op);
  /// The queued collective numbered sequence went to its backend.
  /// \param sequence its number (Op::seq).
  void started(uint64_t sequence);
  /// queued and started at once.
  /// \param op the collective; op.seq is its number.
  void started(const Op& op);
  /// The Work of the collective numbered sequence finished.
  /// \param sequence its number (Op::seq).
  /// \param error its error; empty: it completed.
  void finished(uint64_t sequence, const std::string& error);
  /// finished without an error.
  /// \param sequence the collective's number (Op::seq).
  void completed(uint64_t sequence);

  /// The same for a point-to-point op, in its own ring (ranks make different ones): recorded as
  /// started, as ProcessGroup hands it to its backend.
  /// \param op the op; op.seq is its number among this rank's point-to-point ops of the group.
  void pointToPointStarted(const Op& op);
  /// The Work of the point-to-point op numbered number finished.
  /// \param number its number (Op::seq).
  /// \param error its error; empty: it completed.
  void pointToPointFinished(uint64_t number, const std::string& error);
  /// pointToPointFinished without an error.
  /// \param number the op's number (Op::seq).
  void pointToPointCompleted(uint64_t number);

  /// The entries still held, oldest first.
  /// \return The collectives' entries.
  std::vector<Entry> entries() const;
  /// The point-to-point entries still held, oldest first.
  /// \return Those entries.
  std::vector<Entry> pointToPointEntries() const;
  /// {"group", "rank", "size", "reason", "dumped_us", "entries": [{"seq", "op", "call",
  /// "state", "queued_us", "started_us", "finished_us", "error"}], "p2p": [{"n", "op", "peer",
  /// "tag", "dtype", "numel", "state", "started_us", "finished_us", "error"}]}.
  /// \param reason why the dump is made ("reason").
  /// \return The JSON text, one entry per line.
  std::string toJson(const std::string& reason) const;
  /// Writes toJson(reason) to the file named in the header comment; returns its path. Throws
  /// Error when the file cannot be written.
  /// \param reason why the dump is made.
  /// \return The path of the file written.
  std::string dump(const std::string& reason) const;

  /// Dumps every live recorder of this process (best effort: failures are logged); returns the
  /// paths written.
  /// \param reason why the dumps are made.
  /// \return The paths of the files written.
  static std::vector<std::string> dumpAll(const std::string& reason);

 private:
  struct Ring;  ///< a ring of slots, each an op written without a lock (FlightRecorder.cpp)
  void record(Ring& ring, const Op& op, State state);
  void advance(Ring& ring, uint64_t number, State to, const std::string* error);
  std::vector<Entry> read(const Ring& ring) const;

  const std::string group_;
  const int rank_;
  const int size_;
  std::unique_ptr<Ring> collectives_;
  std::unique_ptr<Ring> pointToPoint_;
  /// Failures' messages, by (ring, number): rare, so kept apart under a lock.
  mutable std::mutex errorsMutex_;
  std::map<std::pair<bool, uint64_t>, std::string> errors_;
};

}  // namespace c10d::inline v1
