#include "backends/common/OpWorkers.hpp"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Futex.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1 {

namespace {
// The client a worker serves now (remove() from inside its op must not wait for itself).
thread_local OpWorkers::Client* servingNow = nullptr;
}  // namespace

struct OpWorkers::State : std::enable_shared_from_this<State> {
  std::mutex mutex;  // guards clients, threads and free
  std::vector<std::shared_ptr<Client>> clients;
  int threads = 0;
  int free = 0;                      // workers not running an op
  std::atomic<uint64_t> version{0};  // clients changed
  alignas(64) std::atomic<uint32_t> bell{0};
  std::atomic<int> sleepers{0};

  // mutex held. False when the system refused the thread (its reason in *why).
  bool startWorker(std::string* why = nullptr) {
    try {
      std::thread([self = shared_from_this()] { self->work(); }).detach();
    } catch (const std::system_error& e) {
      if (why != nullptr) *why = e.what();
      return false;
    }
    ++threads;
    ++free;
    return true;
  }

  void work();
  // Looks at client (served by this worker), running what is due; whether an op ran. *next:
  // the client's next look.
  bool serve(Client& client, Clock::time_point* next);
};

bool OpWorkers::State::serve(Client& client, Clock::time_point* next) {
  if (client.serving_.exchange(true, std::memory_order_acq_rel)) return false;
  bool ran = false;
  if (!client.leaving_.load(std::memory_order_acquire)) {
    for (Clock::time_point now = Clock::now(); client.due(now, next); now = Clock::now()) {
      servingNow = &client;
      const bool one = client.runOne();
      servingNow = nullptr;
      if (!one) break;
      ran = true;
    }
  }
  client.serving_.store(false, std::memory_order_release);
  return ran;
}

void OpWorkers::State::work() {
  detail::nameThisThread("c10d-ops");
  detail::blockSigpipeInThisThread();
  std::vector<std::shared_ptr<Client>> mine;
  uint64_t seen = UINT64_MAX;
  Clock::time_point freeSince = Clock::now();
  for (;;) {
    const uint32_t rung = bell.load(std::memory_order_seq_cst);
    if (version.load(std::memory_order_acquire) != seen) {
      std::lock_guard<std::mutex> guard(mutex);
      mine = clients;
      seen = version.load(std::memory_order_relaxed);
    }
    Clock::time_point next = Clock::time_point::max();
    bool ran = false;
    for (auto& client : mine) {
      Clock::time_point wanted = Clock::time_point::max();
      ran = serve(*client, &wanted) || ran;
      next = std::min(next, wanted);
    }
    const Clock::time_point now = Clock::now();
    if (ran) {
      freeSince = now;
      continue;
    }
    if (now - freeSince >= kLinger) {
      std::lock_guard<std::mutex> guard(mutex);
      if (free > 1) {  // another worker is free to look: this one ends
        --free;
        --threads;
        return;
      }
      freeSince = now;
    }
    // Clients removed meanwhile go with this worker's copy.
    if (version.load(std::memory_order_acquire) != seen) continue;
    const Clock::time_point until = std::min(next, now + kLinger);
    if (until <= now) continue;
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (bell.load(std::memory_order_seq_cst) == rung) {
      detail::futexWait(bell, rung, until - now);
    }
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

OpWorkers& OpWorkers::instance() {
  static std::mutex made;
  static OpWorkers* workers = nullptr;
  static pid_t pid = 0;
  std::lock_guard<std::mutex> guard(made);
  // Never destroyed (a group may outlive static destructors); after fork() the parent's
  // workers are not in this process.
  if (workers == nullptr || pid != ::getpid()) {
    workers = new OpWorkers(std::make_shared<State>());
    pid = ::getpid();
  }
  return *workers;
}

void OpWorkers::add(const std::shared_ptr<Client>& client) {
  std::lock_guard<std::mutex> guard(state_->mutex);
  state_->clients.push_back(client);
  state_->version.fetch_add(1, std::memory_order_release);
  std::string why;
  C10D_CHECK(state_->threads > 0 || state_->startWorker(&why), Error,
             "cannot start the process's op worker thread: ", why);
  wake();
}

void OpWorkers::remove(Client* client) {
  client->leaving_.store(true, std::memory_order_seq_cst);
  if (servingNow != client) {
    while (client->serving_.load(std::memory_order_acquire)) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  std::lock_guard<std::mutex> guard(state_->mutex);
  std::erase_if(state_->clients,
                [&](const std::shared_ptr<Client>& c) { return c.get() == client; });
  state_->version.fetch_add(1, std::memory_order_release);
  wake();
}

void OpWorkers::opStarts() {
  std::lock_guard<std::mutex> guard(state_->mutex);
  // This worker may wait in the op: another stays free to look (if the system refuses the
  // thread, the queues that need one wait for this op, or for their callers).
  if (--state_->free == 0 && state_->threads < kMaxThreads) state_->startWorker();
}

void OpWorkers::opEnded() {
  std::lock_guard<std::mutex> guard(state_->mutex);
  ++state_->free;
}

void OpWorkers::wake() {
  state_->bell.fetch_add(1, std::memory_order_seq_cst);
  if (state_->sleepers.load(std::memory_order_seq_cst) > 0) detail::futexWake(state_->bell);
}

}  // namespace c10d::inline v1
