// The RPC agent's pool (WorkerPool.hpp): one locked queue, and one idle thread that polls it for a
// while before it sleeps.

#include "rpc/WorkerPool.hpp"

#include <chrono>
#include <exception>
#include <utility>

#include "c10d/core/Logging.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1::rpc::detail {

namespace {

// How long an idle thread polls before it sleeps (see loop(); docs/tuning.md has the evidence).
constexpr std::chrono::microseconds kPoolSpin{100};

}  // namespace

WorkerPool::~WorkerPool() {
  stop();
}

void WorkerPool::start(int threads, std::string worker) {
  worker_ = std::move(worker);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      c10d::detail::nameThisThread("c10d-rpc-pool");
      loop();
    });
  }
}

void WorkerPool::post(std::function<void()> task) {
  bool wake;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
    queuedTasks_.store(tasks_.size(), std::memory_order_release);
    // A polling thread takes one task by itself; only the others need a sleeper woken.
    wake = sleeping_ > 0 && (!spinning_ || tasks_.size() > 1);
  }
  if (wake) changed_.notify_one();
}

void WorkerPool::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  bool justRan = false;  // polls only right after running a task, then sleeps
  while (true) {
    if (tasks_.empty() && !stopping_) {
      if (justRan && !spinning_) {
        justRan = false;
        // One idle thread polls for kPoolSpin before sleeping: calls that follow each other
        // (a client's next request, a pipeline of them) then start without waking a thread,
        // which on this kind of host costs more than a small call's own work. It yields while
        // polling, so it never holds a core another thread of the agent needs.
        spinning_ = true;
        lock.unlock();
        auto until = std::chrono::steady_clock::now() + kPoolSpin;
        while (queuedTasks_.load(std::memory_order_acquire) == 0 &&
               std::chrono::steady_clock::now() < until) {
          std::this_thread::yield();
        }
        lock.lock();
        spinning_ = false;
        continue;
      }
      ++sleeping_;
      changed_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      --sleeping_;
    }
    if (tasks_.empty()) return;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    queuedTasks_.store(tasks_.size(), std::memory_order_release);
    lock.unlock();
    try {
      task();
    } catch (const std::exception& e) {
      C10D_LOG(Error, "rpc worker '", worker_, "': ", e.what());
    }
    task = nullptr;  // what it captured goes now, not under the lock
    justRan = true;
    lock.lock();
  }
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace c10d::inline v1::rpc::detail
