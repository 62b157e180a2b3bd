#pragma once

// Private to rpc/: one worker's table of remote references, the state behind the protocol of
// RRefContext.cpp. The owner's side: each value it owns and the forks users hold of it. The
// user's side: forks the owner has confirmed, forks it has not yet (pending users), and forks
// sent on to another worker that has not yet accepted them (pending children). No messages: the
// protocol decides when an entry changes, the table keeps the entries consistent.
//
// Threading: every member may be called from any thread; one mutex guards the table. Cores that
// leave it are returned to the caller, never destroyed under that mutex, since the last handle's
// destructor sends a message (RRefCore::~RRefCore).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "rpc/RRef.hpp"
#include "rpc/RpcAgent.hpp"

namespace c10d::inline v1::rpc::detail {

class RRefTable {
 public:
  // ---- owner ----
  // The core of owned value id; null when no user holds a fork of it (or it never existed).
  std::shared_ptr<RRefCore> owned(const GlobalId& id) const;
  // The same, made by make() (without a value yet) when there is none.
  std::shared_ptr<RRefCore> ownedOrMake(const GlobalId& id,
                                        const std::function<std::shared_ptr<RRefCore>()>& make);
  // A user now holds fork of core's value: the value stays until that fork is deleted.
  void addFork(const std::shared_ptr<RRefCore>& core, const GlobalId& fork);
  // Fork of value id is gone. When it was the last one the entry goes, and its core is returned
  // for the caller to release; otherwise null.
  std::shared_ptr<RRefCore> deleteFork(const GlobalId& id, const GlobalId& fork);

  // ---- user ----
  // A fork this worker holds whose owner has not confirmed it yet: kept alive until it does.
  void addPendingUser(const std::shared_ptr<RRefCore>& core);
  // The owner confirmed fork: it moves among the users (held weakly from now on). Returns the
  // core, which may be the last handle: the caller releases it after any lock of its own.
  std::shared_ptr<RRefCore> confirmUser(const GlobalId& fork);
  // A fork the owner sent itself, confirmed on arrival.
  void addUser(const std::shared_ptr<RRefCore>& core);
  void removeUser(const GlobalId& fork);
  // This worker sent core on as fork: kept alive until the receiver accepts it.
  void addPendingChild(const GlobalId& fork, const std::shared_ptr<RRefCore>& core);
  // The receiver accepted fork: the core, null when fork was not pending.
  std::shared_ptr<RRefCore> takePendingChild(const GlobalId& fork);

  // ---- shutdown ----
  struct Settled {
    size_t pendingUsers = 0;     // still unconfirmed at the deadline
    size_t pendingChildren = 0;  // still not accepted at the deadline
    // The user forks still alive here, which the table forgets: the caller deletes them.
    std::vector<std::shared_ptr<RRefCore>> liveUsers;
  };
  // Waits until no fork is pending or deadline passes.
  Settled settle(std::chrono::steady_clock::time_point deadline);
  // Empties the table and hands its cores to the caller, which releases them after the agent's
  // threads have stopped: references to values owned here die with the agent.
  struct Contents {
    std::vector<std::shared_ptr<RRefCore>> cores;
  };
  Contents clear();

  RRefStats stats() const;

 private:
  // A value this worker owns and the forks users hold of it. In the table only while some user
  // holds a fork; handles on this worker keep the core alive by themselves.
  struct Owned {
    std::shared_ptr<RRefCore> core;
    std::set<GlobalId> forks;
  };

  mutable std::mutex mutex_;
  std::condition_variable settled_;  // pendingUsers_ or pendingChildren_ shrank
  std::map<GlobalId, Owned> owned_;
  std::map<GlobalId, std::shared_ptr<RRefCore>> pendingUsers_;
  std::map<GlobalId, std::weak_ptr<RRefCore>> users_;
  std::map<GlobalId, std::shared_ptr<RRefCore>> pendingChildren_;
};

}  // namespace c10d::inline v1::rpc::detail
