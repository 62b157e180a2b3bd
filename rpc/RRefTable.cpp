#include "rpc/RRefTable.hpp"

namespace c10d::inline v1::rpc::detail {

std::shared_ptr<RRefCore> RRefTable::owned(const GlobalId& id) const {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = owned_.find(id);
  return it == owned_.end() ? nullptr : it->second.core;
}

std::shared_ptr<RRefCore> RRefTable::ownedOrMake(
    const GlobalId& id, const std::function<std::shared_ptr<RRefCore>()>& make) {
  std::lock_guard<std::mutex> guard(mutex_);
  Owned& entry = owned_[id];
  if (!entry.core) entry.core = make();
  return entry.core;
}

void RRefTable::addFork(const std::shared_ptr<RRefCore>& core, const GlobalId& fork) {
  std::lock_guard<std::mutex> guard(mutex_);
  Owned& entry = owned_[core->id()];
  if (!entry.core) entry.core = core;
  entry.forks.insert(fork);
}

std::shared_ptr<RRefCore> RRefTable::deleteFork(const GlobalId& id, const GlobalId& fork) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = owned_.find(id);
  if (it == owned_.end()) return nullptr;
  it->second.forks.erase(fork);
  if (!it->second.forks.empty()) return nullptr;
  std::shared_ptr<RRefCore> last = std::move(it->second.core);
  owned_.erase(it);
  return last;
}

void RRefTable::addPendingUser(const std::shared_ptr<RRefCore>& core) {
  std::lock_guard<std::mutex> guard(mutex_);
  pendingUsers_[core->fork()] = core;
}

std::shared_ptr<RRefCore> RRefTable::confirmUser(const GlobalId& fork) {
  std::shared_ptr<RRefCore> core;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = pendingUsers_.find(fork);
    if (it == pendingUsers_.end()) return nullptr;
    core = std::move(it->second);
    pendingUsers_.erase(it);
    core->markConfirmed();
    users_[fork] = core;
  }
  settled_.notify_all();
  return core;
}

void RRefTable::addUser(const std::shared_ptr<RRefCore>& core) {
  std::lock_guard<std::mutex> guard(mutex_);
  users_[core->fork()] = core;
}

void RRefTable::removeUser(const GlobalId& fork) {
  std::lock_guard<std::mutex> guard(mutex_);
  users_.erase(fork);
}

void RRefTable::addPendingChild(const GlobalId& fork, const std::shared_ptr<RRefCore>& core) {
  std::lock_guard<std::mutex> guard(mutex_);
  pendingChildren_[fork] = core;
}

std::shared_ptr<RRefCore> RRefTable::takePendingChild(const GlobalId& fork) {
  std::shared_ptr<RRefCore> core;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = pendingChildren_.find(fork);
    if (it == pendingChildren_.end()) return nullptr;
    core = std::move(it->second);
    pendingChildren_.erase(it);
  }
  settled_.notify_all();
  return core;
}

RRefTable::Settled RRefTable::settle(std::chrono::steady_clock::time_point deadline) {
  Settled settled;
  std::unique_lock<std::mutex> lock(mutex_);
  settled_.wait_until(lock, deadline,
                      [&] { return pendingUsers_.empty() && pendingChildren_.empty(); });
  settled.pendingUsers = pendingUsers_.size();
  settled.pendingChildren = pendingChildren_.size();
  for (auto& [fork, weak] : users_) {
    if (auto core = weak.lock()) settled.liveUsers.push_back(std::move(core));
  }
  users_.clear();
  return settled;
}

RRefTable::Contents RRefTable::clear() {
  Contents contents;
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto& [id, entry] : owned_) contents.cores.push_back(std::move(entry.core));
  for (auto& [fork, core] : pendingUsers_) contents.cores.push_back(std::move(core));
  for (auto& [fork, core] : pendingChildren_) contents.cores.push_back(std::move(core));
  owned_.clear();
  pendingUsers_.clear();
  pendingChildren_.clear();
  return contents;
}

RRefStats RRefTable::stats() const {
  std::lock_guard<std::mutex> guard(mutex_);
  RRefStats stats;
  stats.owned = owned_.size();
  for (const auto& [fork, weak] : users_) stats.users += weak.expired() ? 0 : 1;
  stats.pendingUsers = pendingUsers_.size();
  stats.pendingChildren = pendingChildren_.size();
  return stats;
}

}  // namespace c10d::inline v1::rpc::detail
