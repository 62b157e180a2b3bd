#pragma once

/// \file
/// ElasticGroup: a process group that re-forms without the ranks it lost, and admits restarts.
///
/// A process group that survives the loss of ranks: the survivors agree through the job's store
/// on who is left, tear the broken group down and build a new one, without restarting.
///
/// \code
/// auto elastic = c10d::elastic::ElasticGroup::fromEnvironment();   // under c10drun --elastic
/// c10d::checkpoint::State state;                   // what the ranks replicate
/// ddp.addToState(state, "model.");
/// elastic->join(&state);                           // a restarted process: admitted, healed
/// while (elastic->step() < steps) {
///   bool ok = true;
///   try { ok = trainStep(elastic->group()); } catch (const c10d::Error&) { ok = false; }
///   if (elastic->commit(ok)) {
///     optimizer.step();
///     if (elastic->joinsPending()) elastic->reform(&state);   // grow at the step boundary
///     continue;
///   }
///   elastic->reform(&state);                        // shrink, then heal from a survivor
/// }
/// \endcode
///
/// Identity: each process has an id, its rank in the first generation (RANK), kept for its life,
/// and an incarnation: how many processes of that id ended before it (c10drun --max-restarts
/// starts a failed rank again; c10d/elastic/LauncherKeys.hpp). A generation is one membership:
/// generation 0 is every id; each reform makes the next, whose ranks are its members' ids in
/// increasing order.
///
/// Rejoining: a process whose incarnation is above 0 is a restart. Its constructor builds no
/// group; join() asks to be admitted and waits. On the members, commit() notices the request
/// (rank 0 looks in the store at most every kJoinCheckInterval) and joinsPending() turns true
/// on every member at once; their next reform admits the newcomer, and healing (5) gives it the
/// state. A request that arrives during a reform for a loss is admitted by that reform.
///
/// Re-forming (reform), on every survivor:
///  1. The old group is shut down: its Gloo pairs, shared-memory channels and queued ops go, and
///     peers still blocked on this rank fail at once (and so re-form too).
///  2. The survivor writes that it is here for the next generation, then waits until every member
///     of the old one is here, known dead (c10drun records each rank's end in the store:
///     c10d/elastic/LauncherKeys.hpp), or the wait (ElasticOptions::joinTimeout) is over.
///  3. The first survivor done proposes the members it saw, and the live processes that asked to
///     join, with one compare-and-set; everyone takes that proposal. A rank left out (stalled past
///     the wait, or cut off) throws StateError when it comes back: the new group's keys are under
///     the new generation, so it never meets the new group.
///  4. Fewer members than ElasticOptions::minSize: every survivor throws StateError naming the
///     lost ids. Otherwise the new group is built over the store under the new generation.
///  5. With a State: the members agree on the highest committed step, and a member at it
///     broadcasts every tensor and value of the State to those behind (see commit).
///
/// Commit: commit(ok) is one 4-byte allreduce (MIN of every rank's ok). It returns true when every
/// rank's step succeeded; a failure of the allreduce itself returns false. A rank can see true
/// where another saw the allreduce fail (a rank died mid-way); the steps it then applied come to
/// the others through reform's healing (5), so that every member leaves reform at the same step.
///
/// Needs a store that outlives the ranks: c10drun hosts it (C10D_STORE_HOST=launcher). Over a
/// store rank 0 hosts, losing rank 0 loses the store, and every survivor fails with StoreError.
///
/// Threading: one thread drives an ElasticGroup; other threads may use group() between reforms.
/// Groups derived from an old group (newGroup, split, the reducer's) are not re-derived: build
/// them again from group() after a reform.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {
class Store;
namespace checkpoint {
class State;
}
}  // namespace c10d::inline v1

/// Elastic training: groups that survive the loss of ranks and admit restarted processes
/// (ElasticGroup), redundant copies of sharded state (ShardCopies), and the store keys through
/// which c10drun reports how ranks ended.
namespace c10d::inline v1::elastic {

/// How an ElasticGroup forms its groups and re-forms them.
struct ElasticOptions {
  /// Of every generation's group. The group name also names the store keys of this ElasticGroup.
  /// An empty backend: C10D_BACKEND, else gloo. A zero timeout: C10D_TIMEOUT, as
  /// initProcessGroup. The timeout is also how long a stalled rank (stopped, or cut off) holds the
  /// others before they re-form without it.
  ProcessGroupOptions group = [] {
    ProcessGroupOptions options;
    options.backend.clear();
    options.timeout = std::chrono::milliseconds(0);
    return options;
  }();
  /// Fewer members than this after a loss: reform throws StateError on every survivor.
  int minSize = 1;
  /// How long reform waits for a member that is neither here nor known dead (a stalled rank, or
  /// one without a launcher that records deaths).
  std::chrono::milliseconds joinTimeout = std::chrono::seconds(10);
};

/// What a reform changed.
struct Reformation {
  uint64_t generation = 0;   ///< the generation this rank is in now
  std::vector<int> lost;     ///< ids of the old generation not in the new one
  std::vector<int> joined;   ///< ids of restarted processes admitted
  std::vector<int> members;  ///< ids of the new generation, by new rank
  int64_t step = 0;          ///< the committed step every member is at now
  bool healed = false;       ///< this rank received state from a member ahead of it
  double seconds = 0;        ///< reform's own time on this rank
};

/// A process group over the job's store that survives the loss of ranks and admits restarted
/// processes; see the file's overview for identity, rejoining, re-forming and commit.
class ElasticGroup {
 public:
  /// Generation 0 over store: id is this process's rank among size (a restarted process: no group
  /// until join). Throws as ProcessGroup's constructor does; InvalidArgument for minSize outside
  /// [1, size].
  /// \param store the job's store; it must outlive the ranks (see the file's overview).
  /// \param id this process's rank in generation 0, in [0, size).
  /// \param size the number of ids (generation 0's size), at least 1.
  /// \param options groups' options, minSize and joinTimeout.
  /// \throws InvalidArgument also for a null store, an id out of range, or a joinTimeout that is
  ///         not positive.
  ElasticGroup(std::shared_ptr<Store> store, int id, int size, ElasticOptions options = {});
  /// Rank, size and store from the environment, as initProcessGroup (backend: C10D_BACKEND).
  /// \param options as for the constructor; a localRank below 0 is taken from the environment.
  /// \return The ElasticGroup of this process.
  /// \throws InvalidArgument for an unknown backend or a bad environment (as detectWorld and
  ///         connectStore); TimeoutError when the store does not answer; what the constructor
  ///         throws.
  static std::unique_ptr<ElasticGroup> fromEnvironment(ElasticOptions options = {});
  ~ElasticGroup();
  ElasticGroup(const ElasticGroup&) = delete;
  ElasticGroup& operator=(const ElasticGroup&) = delete;

  /// This generation's group. Throws StateError after a reform this rank was left out of.
  /// \return The group; valid until the next reform.
  /// \throws StateError also on a restarted process before join(), and after a reform that
  ///         failed to build the group.
  ProcessGroup& group() const;
  /// group() as a shared pointer, for code that keeps it.
  /// \return This generation's group.
  /// \throws StateError as group() does.
  std::shared_ptr<ProcessGroup> sharedGroup() const;
  /// \return This process's id: its rank in generation 0, kept for its life.
  int id() const { return id_; }
  /// \return This process's rank in this generation's group.
  /// \throws StateError as group() does.
  int rank() const;
  /// \return The number of members of this generation.
  /// \throws StateError as group() does.
  int size() const;
  /// \return This generation's number: 0 for the first, higher for each later one (a reform
  ///         that has to try again skips numbers).
  uint64_t generation() const { return generation_; }
  /// \return The ids of this generation's members, by rank (in increasing order).
  const std::vector<int>& members() const { return members_; }
  /// Steps this rank committed (commit returned true), or the step healing brought it to.
  /// \return That count.
  int64_t step() const { return step_; }
  /// This process's incarnation (0: one of the first; n: started again after n ends of its id).
  /// \return That number.
  int64_t incarnation() const { return incarnation_; }

  /// A restarted process: asks the members to admit it, waits until they do (at their next step
  /// boundary; TimeoutError after twice the group's timeout plus joinTimeout with no new
  /// generation formed), builds the group and receives the state.
  /// Every other process: returns at once. Call it once, before the first step.
  /// \param state the replicated State to receive from a member (as reform heals); a restarted
  ///        process needs one (with nullptr, it is behind and fails with StateError).
  /// \return What this process joined: generation, members, step, and this id in joined; on
  ///         a process that is no restart, the current generation, members and step.
  /// \throws TimeoutError when no member admits it in time; StateError when every member has
  ///         ended; what reform throws.
  Reformation join(checkpoint::State* state = nullptr);
  /// True on every member, from the commit that saw it, when a restarted process asks to join:
  /// the program calls reform at that step boundary.
  /// \return Whether the latest commit() whose allreduce succeeded carried a join request. Rank 0
  ///         looks at most every kJoinCheckInterval, and a commit in between carries none (false
  ///         again): check it after each commit. False after a reform.
  bool joinsPending() const { return joinsPending_; }

  /// The step agreement: true when every rank passed ok == true and the allreduce succeeded
  /// (then step() grows by one); false otherwise, and the program reforms before the next try.
  /// The same allreduce carries whether a restarted process asks to join (joinsPending).
  /// \param ok whether this rank's step succeeded.
  /// \return Whether every rank's step succeeded and the allreduce did: the step is committed.
  /// \throws StateError as group() does; a failed allreduce returns false instead.
  bool commit(bool ok = true);

  /// Re-forms the group from the members still alive (see above); heals state when given. Throws
  /// StateError when this rank was left out or fewer than minSize remain (naming the lost ids),
  /// StoreError when the store is gone.
  /// \param state the replicated State (whole tensors only) to heal members behind from one at
  ///        the highest committed step; nullptr when the program keeps none.
  /// \return What changed: the new generation, ids lost and joined, members, step.
  /// \throws StateError also when members are at different steps and state is nullptr or holds
  ///         a sliced tensor (ShardCopies restores those). Healing's errors first re-form: they
  ///         are thrown once the same members failed to form a generation three times.
  Reformation reform(checkpoint::State* state = nullptr);

 private:
  struct Member {
    int id;
    int64_t incarnation;
    bool operator==(const Member&) const = default;
  };
  std::vector<Member> agreeOnMembers(uint64_t next);
  bool isDead(const Member& m);
  /// Whether the launcher recorded the end of m's process.
  static bool hasEnded(Store& store, const Member& m);
  /// Which of some members the launchers recorded as ended, looked for in one store request
  /// (launcherEndsKey) while nobody in the job ends, and member by member only when someone
  /// did since the last look. Thread-safe.
  class EndWatch {
   public:
    /// "id 2 (incarnation 0), ... ended (...)" for those of memberships that ended; empty when
    /// none did. ended, when given, gets those members' ids.
    std::string lostAmong(Store& store, const std::vector<Member>& memberships,
                          std::vector<int>* ended = nullptr);

   private:
    std::atomic<int64_t> endsSeen_{-1};  ///< the job's ends counter when a look found nobody
  };
  static std::vector<int> idsNotIn(const std::vector<Member>& these,
                                   const std::vector<Member>& those);
  void build();
  /// build() and heal(); heal's answer, or nullopt when either failed (the caller re-forms,
  /// which throws the failure if every member comes again: then it was no loss).
  std::optional<bool> buildAndHeal(checkpoint::State* state);
  /// Brings every member to the highest committed step: the State from the first member at it.
  /// True when this rank was behind.
  bool heal(checkpoint::State* state);
  /// A generation's membership as agreeOnMembers writes it: "J|id:incarnation,..." where J is
  /// the join requests counted when it was decided.
  static std::vector<Member> parseMembers(const std::string& text, const std::string& key,
                                          int64_t& joins);

  std::shared_ptr<Store> store_;
  const int id_;
  const int firstSize_;  ///< ids are [0, firstSize_)
  int64_t incarnation_ = 0;
  ElasticOptions options_;
  std::string keys_;  ///< "c10d/elastic/<group name>/"
  uint64_t generation_ = 0;
  std::vector<Member> memberships_;  ///< by rank
  std::vector<int> members_;         ///< their ids
  int64_t joinsAdmitted_ = 0;        ///< join requests counted when the last generation was decided
  bool joinsPending_ = false;
  bool joining_ = false;  ///< a restarted process before join()
  std::chrono::steady_clock::time_point lastJoinCheck_{};
  std::shared_ptr<ProcessGroup> group_;
  int64_t step_ = 0;
  /// false on a restarted process until healing gave it the state
  bool holdsState_ = true;
  std::string leftOut_;             ///< why this rank is no member any more; empty while it is
  std::exception_ptr formFailure_;  ///< why the last generation did not form, if it did not
  std::vector<Member> failedMemberships_;  ///< of that generation
  int sameMembersFailures_ = 0;            ///< generations of those members that failed in a row
};

}  // namespace c10d::inline v1::elastic
