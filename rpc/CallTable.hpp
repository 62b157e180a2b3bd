#pragma once

// Private to rpc/: the RPC agent's outgoing calls waiting for their replies, by call id, and the
// deadline thread that fails those past their deadline.
//
// Contract: a call is in the table from add() until one of take() (its reply came), fail() (its
// peer was lost, the agent closed) or the deadline thread takes it out, so exactly one of them
// gets its Reply. take() hands the call to its caller, which completes it on its own thread;
// the calls fail() and the deadline thread take out complete on the WorkerPool given to the
// constructor, each with the error the given function makes for it, which runs on the failing
// thread, outside the table's lock.
//
// Threading: every member may be called from any thread, except startDeadlines() and
// stopDeadlines(), which one thread calls once each (the agent's create() and close()).
// stopDeadlines() is idempotent, and the destructor calls it.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "rpc/Serialization.hpp"

namespace c10d::inline v1::rpc::detail {

class WorkerPool;

class CallTable {
 public:
  // How a call ends: with error, or (error null) with the reply. The same type as
  // RpcAgent::Done, which this class cannot name (it is private there).
  using Reply = std::function<void(std::exception_ptr error, Packed* reply)>;
  struct Pending {
    Reply reply;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
    int to;
    std::string function;
  };
  // The error a call taken out by fail() or the deadline thread completes with.
  using MakeError = std::function<std::exception_ptr(const Pending&)>;

  // completions runs the replies of failed calls; it outlives the table.
  explicit CallTable(WorkerPool& completions) : completions_(completions) {}
  ~CallTable();
  CallTable(const CallTable&) = delete;
  CallTable& operator=(const CallTable&) = delete;

  // An id for the next call; ids start at 1.
  uint64_t newId() { return nextId_.fetch_add(1); }
  // Enters the call to worker `to` as id, due timeout from now. Returns the calls in flight,
  // this one included.
  size_t add(uint64_t id, Reply reply, std::chrono::milliseconds timeout, int to,
             const std::string& function);
  // The call id, out of the table; nullopt when it is not there (timed out or failed already).
  std::optional<Pending> take(uint64_t id);
  // Takes out every call `which` picks, and completes each on the pool with error(call).
  void fail(const std::function<bool(const Pending&)>& which, const MakeError& error);
  // Starts the deadline thread ("c10d-rpc-timer"): every 10 ms, it fails the calls past their
  // deadline with timedOut(call).
  void startDeadlines(MakeError timedOut);
  void stopDeadlines();
  // For graceful shutdown: waits until no call is in flight, or until deadline. Returns the calls
  // still in flight then (0: all were answered).
  size_t waitForAll(std::chrono::steady_clock::time_point deadline);

 private:
  void deadlineLoop();

  WorkerPool& completions_;
  std::mutex mutex_;
  // Notified when pending_ becomes empty (graceful shutdown waits for that); the deadline thread
  // has its own, so that completing a call wakes nobody.
  std::condition_variable drained_;
  std::condition_variable deadlineStop_;
  std::map<uint64_t, Pending> pending_;
  std::atomic<uint64_t> nextId_{1};
  MakeError timedOut_;  // set before the deadline thread starts
  std::thread deadlines_;
  bool deadlinesStopping_ = false;
};

}  // namespace c10d::inline v1::rpc::detail
