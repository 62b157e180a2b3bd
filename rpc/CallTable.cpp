// The RPC agent's table of calls waiting for replies, and its deadline thread (CallTable.hpp).

#include "rpc/CallTable.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "c10d/core/ThreadName.hpp"
#include "rpc/WorkerPool.hpp"

namespace c10d::inline v1::rpc::detail {

CallTable::~CallTable() {
  stopDeadlines();
}

size_t CallTable::add(uint64_t id, Reply reply, std::chrono::milliseconds timeout, int to,
                      const std::string& function) {
  std::lock_guard<std::mutex> guard(mutex_);
  pending_[id] =
      Pending{std::move(reply), std::chrono::steady_clock::now() + timeout, timeout, to, function};
  return pending_.size();
}

std::optional<CallTable::Pending> CallTable::take(uint64_t id) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return std::nullopt;
  Pending p = std::move(it->second);
  pending_.erase(it);
  if (pending_.empty()) drained_.notify_all();
  return p;
}

void CallTable::fail(const std::function<bool(const Pending&)>& which, const MakeError& error) {
  std::vector<Pending> failed;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (which(it->second)) {
        failed.push_back(std::move(it->second));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    if (pending_.empty()) drained_.notify_all();
  }
  for (Pending& call : failed) {
    std::exception_ptr e = error(call);
    completions_.post([call = std::move(call), e]() mutable { call.reply(e, nullptr); });
  }
}

void CallTable::startDeadlines(MakeError timedOut) {
  timedOut_ = std::move(timedOut);
  deadlines_ = std::thread([this] {
    c10d::detail::nameThisThread("c10d-rpc-timer");
    deadlineLoop();
  });
}

void CallTable::deadlineLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!deadlinesStopping_) {
    deadlineStop_.wait_for(lock, std::chrono::milliseconds(10));
    auto now = std::chrono::steady_clock::now();
    bool any = std::any_of(pending_.begin(), pending_.end(),
                           [&](const auto& entry) { return entry.second.deadline <= now; });
    if (!any) continue;
    lock.unlock();
    fail([now](const Pending& p) { return p.deadline <= now; }, timedOut_);
    lock.lock();
  }
}

void CallTable::stopDeadlines() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    deadlinesStopping_ = true;
  }
  deadlineStop_.notify_all();
  if (deadlines_.joinable()) deadlines_.join();
}

size_t CallTable::waitForAll(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (drained_.wait_until(lock, deadline, [&] { return pending_.empty(); })) return 0;
  return pending_.size();
}

}  // namespace c10d::inline v1::rpc::detail
