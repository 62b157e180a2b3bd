#pragma once

// Private to rpc/: the RPC agent's pool of threads, which run incoming calls, the functions
// remote() keeps the results of, and the completions of outgoing calls (calls failed together,
// Future then-callbacks).
//
// Contract: start() once, then post() tasks; they start in the order posted, as many at a time
// as there are threads. A task that throws a std::exception is logged (naming the worker) and the
// thread goes on. stop() lets the threads run every task queued before it, then joins them; a
// task posted after it is dropped. After running a task, one idle thread polls the queue for a
// while before it sleeps (kPoolSpin, WorkerPool.cpp says why).
//
// Threading: post() and queued() may be called from any thread, tasks included. stop() may be
// called from any thread but the pool's own (it would join itself), not by two threads at once;
// it is idempotent, and the destructor calls it.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace c10d::inline v1::rpc::detail {

class WorkerPool {
 public:
  WorkerPool() = default;
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts threads threads, named "c10d-rpc-pool". worker is this agent's worker name, for the
  // log line of a task that throws.
  void start(int threads, std::string worker);
  // Queues task for a thread; drops it once stop() has been called.
  void post(std::function<void()> task);
  // Tasks waiting for a thread, read without the lock: a hint, stale as soon as it is read (a
  // response sent while others wait may join the transport's batched write).
  size_t queued() const { return queuedTasks_.load(std::memory_order_relaxed); }
  // Runs what is queued, then joins the threads.
  void stop();

 private:
  void loop();

  std::string worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
  int sleeping_ = 0;                    // threads blocked on changed_
  bool spinning_ = false;               // one idle thread polls the queue instead of sleeping
  std::atomic<size_t> queuedTasks_{0};  // tasks_.size(), readable without the mutex
};

}  // namespace c10d::inline v1::rpc::detail
