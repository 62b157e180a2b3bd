#include "c10d/backends/common/OpQueue.hpp"

#include "c10d/Exception.hpp"

namespace c10d {

struct QueuedWork::QueueState {
  std::string name;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::shared_ptr<QueuedWork>> pending;
  bool running = false;  // an operation is executing (on any thread)
  bool stopping = false;
  std::exception_ptr abortError;

  // Runs work outside the lock; mutex is held on entry and on return.
  void execute(std::unique_lock<std::mutex>& lock, const std::shared_ptr<QueuedWork>& work) {
    running = true;
    lock.unlock();
    std::function<void()> run = std::move(work->run_);
    try {
      run();
      run = nullptr;  // drop captured tensors before waking waiters
      work->finish();
    } catch (...) {
      run = nullptr;
      work->finishWithError(std::current_exception());
    }
    lock.lock();
    running = false;
    changed.notify_all();
  }
};

QueuedWork::QueuedWork(Describe describe, std::chrono::milliseconds timeout,
                       std::vector<Tensor> outputs, std::function<void()> run)
    : Work(std::move(describe), timeout, std::move(outputs)), run_(std::move(run)) {}

void QueuedWork::beforeWait() {
  std::shared_ptr<QueueState> state = queue_;
  if (!state) return;
  std::unique_lock<std::mutex> lock(state->mutex);
  if (state->running || state->pending.empty() || state->pending.front().get() != this) return;
  std::shared_ptr<QueuedWork> self = state->pending.front();
  state->pending.pop_front();
  state->execute(lock, self);
}

OpQueue::OpQueue(std::string name) : state_(std::make_shared<QueuedWork::QueueState>()) {
  state_->name = std::move(name);
  worker_ = std::thread([state = state_] {
    std::unique_lock<std::mutex> lock(state->mutex);
    while (true) {
      state->changed.wait(
          lock, [&] { return state->stopping || (!state->running && !state->pending.empty()); });
      if (state->stopping) return;
      std::shared_ptr<QueuedWork> work = state->pending.front();
      state->pending.pop_front();
      state->execute(lock, work);
    }
  });
}

OpQueue::~OpQueue() {
  abort(std::make_exception_ptr(
      BackendError(detail::concat(state_->name, ": backend shut down before the operation ran"))));
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    state_->stopping = true;
  }
  state_->changed.notify_all();
  worker_.join();
}

void OpQueue::enqueue(const std::shared_ptr<QueuedWork>& work) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    if (state_->abortError) {
      error = state_->abortError;
    } else {
      work->queue_ = state_;
      state_->pending.push_back(work);
    }
  }
  if (error) {
    work->run_ = nullptr;
    work->finishWithError(error);
    return;
  }
  state_->changed.notify_all();
}

void OpQueue::abort(std::exception_ptr error) {
  std::deque<std::shared_ptr<QueuedWork>> dropped;
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    if (!state_->abortError) state_->abortError = error;
    dropped.swap(state_->pending);
  }
  for (auto& work : dropped) {
    work->run_ = nullptr;
    work->finishWithError(error);
  }
}

}  // namespace c10d
