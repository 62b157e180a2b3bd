#include "c10d/elastic/ElasticGroup.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <thread>

#include "c10d/Init.hpp"
#include "c10d/checkpoint/State.hpp"
#include "c10d/core/Config.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/elastic/IdList.hpp"
#include "c10d/elastic/LauncherKeys.hpp"
#include "c10d/elastic/WatchedStore.hpp"
#include "store/PrefixStore.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1::elastic {
namespace {

using Clock = std::chrono::steady_clock;

// How often reform looks at the store while it waits for the old members. A death recorded by
// the launcher is seen within this; each look is three round trips (the generation's members,
// its arrivals, the job's ends), and one per member not yet seen when someone ended.
constexpr auto kPollInterval = std::chrono::milliseconds(2);

// How often rank 0's commit looks in the store for a restarted process asking to join: a store
// round trip every step would cost more than the commit's allreduce itself (measured:
// docs/performance-history.md, "Figures that lived in code comments"); once per this interval
// costs a clock read per step, and a newcomer waits at most this long beyond the step boundary.
constexpr auto kJoinCheckInterval = std::chrono::milliseconds(100);

int64_t toInt(const std::string& text, const std::string& key) {
  try {
    size_t used = 0;
    const int64_t value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  C10D_THROW(StateError, "elastic: store key '", key, "' holds '", text,
             "', not a number (is another program using the same keys?)");
}

// A State's values as one store value: per value, the name's and the bytes' lengths in decimal,
// then both.
std::string encodeValues(const std::map<std::string, std::string>& values) {
  std::string out;
  for (const auto& [name, bytes] : values) {
    out += std::to_string(name.size()) + ":" + std::to_string(bytes.size()) + ":" + name + bytes;
  }
  return out;
}

std::map<std::string, std::string> decodeValues(const std::string& text) {
  std::map<std::string, std::string> values;
  size_t at = 0;
  while (at < text.size()) {
    const size_t a = text.find(':', at);
    const size_t b = text.find(':', a + 1);
    C10D_CHECK(a != std::string::npos && b != std::string::npos, StateError,
               "elastic: malformed state values in the store");
    const size_t nameLength = std::stoul(text.substr(at, a - at));
    const size_t bytesLength = std::stoul(text.substr(a + 1, b - a - 1));
    C10D_CHECK(b + 1 + nameLength + bytesLength <= text.size(), StateError,
               "elastic: truncated state values in the store");
    values[text.substr(b + 1, nameLength)] = text.substr(b + 1 + nameLength, bytesLength);
    at = b + 1 + nameLength + bytesLength;
  }
  return values;
}

}  // namespace

ElasticGroup::ElasticGroup(std::shared_ptr<Store> store, int id, int size, ElasticOptions options)
    : store_(std::move(store)), id_(id), firstSize_(size), options_(std::move(options)) {
  C10D_CHECK(store_ != nullptr, InvalidArgument, "ElasticGroup: the store is null");
  C10D_CHECK(size >= 1 && id >= 0 && id < size, InvalidArgument, "ElasticGroup: id ", id,
             " is out of range for size ", size);
  C10D_CHECK(options_.minSize >= 1 && options_.minSize <= size, InvalidArgument,
             "ElasticOptions::minSize must be in [1, ", size, "], got ", options_.minSize);
  C10D_CHECK(options_.joinTimeout.count() > 0, InvalidArgument,
             "ElasticOptions::joinTimeout must be positive, got ", options_.joinTimeout.count(),
             " ms");
  if (options_.group.backend.empty()) options_.group.backend = config::value("C10D_BACKEND");
  options_.group.timeout = resolveTimeout(options_.group.timeout, "ElasticOptions::group.timeout");
  keys_ = "c10d/elastic/" + options_.group.groupName + "/";
  incarnation_ = store_->add(launcherExitsKey(id_), 0);
  if (incarnation_ > 0) {
    joining_ = true;  // a restart: the members admit it in join()
    holdsState_ = false;
    return;
  }
  for (int m = 0; m < size; ++m) memberships_.push_back({m, 0});
  for (int m = 0; m < size; ++m) members_.push_back(m);
  build();
}

std::unique_ptr<ElasticGroup> ElasticGroup::fromEnvironment(ElasticOptions options) {
  if (options.group.backend.empty()) options.group.backend = config::value("C10D_BACKEND");
  // Checked before the store, as initProcessGroup does: every rank names a bad one.
  for (const auto& [device, name] : parseBackendSpec(options.group.backend)) requireBackend(name);
  InitOptions init;
  const WorldInfo world = detectWorld(init);
  if (config::value("C10D_STORE_HOST") != "launcher") {
    C10D_LOG(Warning,
             "elastic: rank 0 hosts the job's store (C10D_STORE_HOST=rank0), so losing "
             "rank 0 ends the job; start it with c10drun --elastic to survive any loss");
  }
  if (options.group.localRank < 0) options.group.localRank = world.localRank;
  return std::make_unique<ElasticGroup>(connectStore(init, world), world.rank, world.worldSize,
                                        std::move(options));
}

ElasticGroup::~ElasticGroup() {
  if (group_) group_->shutdown();
}

ProcessGroup& ElasticGroup::group() const {
  return *sharedGroup();
}

std::shared_ptr<ProcessGroup> ElasticGroup::sharedGroup() const {
  C10D_CHECK(leftOut_.empty(), StateError, leftOut_);
  C10D_CHECK(!joining_, StateError, "elastic: id ", id_, " (incarnation ", incarnation_,
             ") is a restarted process: call join() before using the group");
  C10D_CHECK(group_ != nullptr, StateError, "elastic: id ", id_,
             " has no group: the reform into generation ", generation_,
             " failed (its error said why)");
  return group_;
}

Reformation ElasticGroup::join(checkpoint::State* state) {
  Reformation result;
  if (!joining_) {
    result.generation = generation_;
    result.members = members_;
    result.step = step_;
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string incarnation = std::to_string(incarnation_);
  store_->set(keys_ + "join/" + std::to_string(id_), toBytes(incarnation));
  store_->add(keys_ + "joins", 1);
  const std::string admitted = keys_ + "admitted/" + std::to_string(id_) + "/" + incarnation;
  std::string generation;
  // Waits in slices, and ends at once when every member of the newest generation has ended:
  // nobody is left to admit this process or to give it the state. The deadline moves with the
  // members' progress, each new generation giving them another while (a stalled member holds
  // them up to the group's timeout in a step and again in its commit, and reform waits
  // joinTimeout for it).
  const auto patience = 2 * options_.group.timeout + options_.joinTimeout;
  Clock::time_point deadline = Clock::now() + patience;
  uint64_t newest = 0;
  while (generation.empty()) {
    try {
      generation = toString(store_->get(admitted, kJoinCheckInterval));
      break;
    } catch (const TimeoutError&) {
    }
    const uint64_t seen = newest;
    while (store_->check({keys_ + "g" + std::to_string(newest + 1) + "/members"})) ++newest;
    if (newest != seen) deadline = Clock::now() + patience;
    std::vector<Member> members;
    if (newest == 0) {
      for (int m = 0; m < firstSize_; ++m) members.push_back({m, 0});
    } else {
      const std::string key = keys_ + "g" + std::to_string(newest) + "/members";
      int64_t joins = 0;
      members = parseMembers(toString(store_->get(key)), key, joins);
    }
    const bool anyAlive = std::any_of(members.begin(), members.end(),
                                      [&](const Member& m) { return !(m.id == id_ || isDead(m)); });
    C10D_CHECK(anyAlive, StateError, "elastic: id ", id_, " (incarnation ", incarnation_,
               ") asked to join, but every member of generation ", newest,
               " has ended (finished or died), so nobody is left to admit it or to give it "
               "the state: start the job again (from a checkpoint)");
    C10D_CHECK(Clock::now() < deadline, TimeoutError, "elastic: id ", id_, " (incarnation ",
               incarnation_, ") asked to join but no member admitted it within ", patience.count(),
               " ms of their last new generation: are the members calling commit, and "
               "reform when joinsPending()?");
  }
  generation_ = static_cast<uint64_t>(toInt(generation, admitted));
  const std::string membersKey = keys_ + "g" + std::to_string(generation_) + "/members";
  memberships_ = parseMembers(toString(store_->get(membersKey)), membersKey, joinsAdmitted_);
  members_.clear();
  for (const Member& m : memberships_) members_.push_back(m.id);
  joining_ = false;
  std::optional<bool> healed = buildAndHeal(state);
  if (!healed) {
    // A member died while this generation formed: re-form with the others, as a member.
    result = reform(state);
    healed = result.healed;
  }
  result.generation = generation_;
  result.joined = {id_};
  result.members = members_;
  result.healed = *healed;
  result.step = step_;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  C10D_LOG(Info, "elastic: id ", id_, " (incarnation ", incarnation_, ") joined generation ",
           generation_, " as rank ", rank(), " of ", size(), " at step ", step_, " in ",
           result.seconds, " s");
  return result;
}

int ElasticGroup::rank() const {
  return group().rank();
}
int ElasticGroup::size() const {
  return group().size();
}

void ElasticGroup::build() {
  const std::string generation = "g" + std::to_string(generation_);
  const int rank =
      static_cast<int>(std::find(members_.begin(), members_.end(), id_) - members_.begin());
  ProcessGroupOptions options = options_.group;
  // A name per generation: shared-memory channels and the flight recorder are per name.
  options.groupName = options_.group.groupName + "." + generation;
  // Waits on the store end when a member dies instead of at the group's timeout.
  auto watch = std::make_shared<EndWatch>();
  auto lost = [store = store_, memberships = memberships_, generation = generation_, watch] {
    std::string who = watch->lostAmong(*store, memberships);
    return who.empty() ? who : detail::concat(who, " in generation ", generation);
  };
  group_ = std::make_shared<ProcessGroup>(
      std::make_shared<WatchedStore>(keys_ + generation + "/group", store_, lost), rank,
      static_cast<int>(members_.size()), options);
}

std::optional<bool> ElasticGroup::buildAndHeal(checkpoint::State* state) {
  try {
    build();
    const bool healed = heal(state);
    formFailure_ = nullptr;
    sameMembersFailures_ = 0;
    return healed;
  } catch (const InvalidArgument&) {
    throw;  // the program's or the configuration's mistake: no reform mends it
  } catch (const Error& e) {
    // Most often a member died or stalled while the generation formed: the next reform goes on
    // without it. When every member comes to that reform, the failure was something else, and
    // reform throws it.
    formFailure_ = std::current_exception();
    failedMemberships_ = memberships_;
    C10D_LOG(Warning, "elastic: id ", id_, " could not form generation ", generation_, ": ",
             e.what(), "; re-forming");
    return std::nullopt;
  }
}

bool ElasticGroup::hasEnded(Store& store, const Member& m) {
  return store.add(launcherExitsKey(m.id), 0) > m.incarnation;
}

std::string ElasticGroup::EndWatch::lostAmong(Store& store, const std::vector<Member>& memberships,
                                              std::vector<int>* ended) {
  // The job's counter moves after a rank's own (recordLauncherEnd): unmoved, nobody ended.
  const int64_t ends = store.add(launcherEndsKey(), 0);
  if (ends == endsSeen_.load(std::memory_order_relaxed)) return "";
  std::string who;
  for (const Member& m : memberships) {
    if (hasEnded(store, m)) {
      if (ended != nullptr) ended->push_back(m.id);
      who += detail::concat(who.empty() ? "" : ", ", "id ", m.id, " (incarnation ", m.incarnation,
                            ")");
    }
  }
  if (who.empty()) {
    endsSeen_.store(ends, std::memory_order_relaxed);  // others' ends (a restarted process...)
    return who;
  }
  return who + " ended (its launcher recorded the end)";
}

bool ElasticGroup::commit(bool ok) {
  ProcessGroup& pg = group();
  // {every rank ok, minus whether rank 0 saw a join request}: one MIN allreduce for both.
  int32_t vote[2] = {ok ? 1 : 0, 0};
  if (pg.rank() == 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now - lastJoinCheck_ >= kJoinCheckInterval) {
      lastJoinCheck_ = now;
      try {
        if (store_->add(keys_ + "joins", 0) > joinsAdmitted_) vote[1] = -1;
      } catch (const Error& e) {
        C10D_LOG(Warning, "elastic: rank 0 could not look for join requests: ", e.what());
      }
    }
  }
  try {
    pg.allreduce(Tensor::fromBlob(vote, ScalarType::Int32, {2}),
                 AllreduceOptions{.reduceOp = ReduceOp::MIN})
        ->wait();
  } catch (const Error& e) {
    C10D_LOG(Info, "elastic: id ", id_, " could not agree on step ", step_, " in generation ",
             generation_, ": ", e.what());
    return false;
  }
  joinsPending_ = vote[1] < 0;
  if (vote[0] == 0) return false;
  ++step_;
  return true;
}

std::vector<ElasticGroup::Member> ElasticGroup::parseMembers(const std::string& text,
                                                             const std::string& key,
                                                             int64_t& joins) {
  const size_t bar = text.find('|');
  C10D_CHECK(bar != std::string::npos, StateError, "elastic: store key '", key, "' holds '", text,
             "', not a membership");
  joins = toInt(text.substr(0, bar), key);
  std::vector<Member> members;
  for (size_t at = bar + 1; at < text.size();) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(at, comma - at);
    const size_t colon = item.find(':');
    C10D_CHECK(colon != std::string::npos, StateError, "elastic: store key '", key, "' holds '",
               text, "', not a membership");
    members.push_back(
        {static_cast<int>(toInt(item.substr(0, colon), key)), toInt(item.substr(colon + 1), key)});
    at = comma + 1;
  }
  return members;
}

bool ElasticGroup::isDead(const Member& m) {
  return hasEnded(*store_, m);
}

std::vector<ElasticGroup::Member> ElasticGroup::agreeOnMembers(uint64_t next) {
  const std::string here = keys_ + "g" + std::to_string(next) + "/";
  // Arrivals go into one key, " <id>" each: a look reads who came in one request.
  const std::string arrivedKey = here + "arrived";
  store_->append(arrivedKey, toBytes(" " + std::to_string(id_)));
  const Clock::time_point deadline = Clock::now() + options_.joinTimeout;
  std::vector<Member> seen;
  std::vector<Member> pending = memberships_;
  EndWatch ends;
  while (!pending.empty() && Clock::now() < deadline && !store_->check({here + "members"})) {
    std::vector<bool> arrived(firstSize_);  // by id
    std::istringstream ids(toString(store_->get(arrivedKey)));
    for (int id; ids >> id;) {
      if (id >= 0 && id < firstSize_) arrived[id] = true;
    }
    // Members that ended: one request while nobody in the job ends.
    std::vector<int> ended;
    ends.lostAmong(*store_, pending, &ended);
    std::vector<Member> still;
    for (const Member& m : pending) {
      if (arrived[m.id]) {
        seen.push_back(m);
      } else if (std::find(ended.begin(), ended.end(), m.id) == ended.end()) {
        still.push_back(m);
      }
    }
    pending = std::move(still);
    if (!pending.empty()) std::this_thread::sleep_for(kPollInterval);
  }
  // Restarted processes that asked to join and are still alive. The count first: a request
  // counted is then always found below (join() writes its key before it counts). Looked for
  // only when requests came since the last generation's.
  const int64_t joins = store_->add(keys_ + "joins", 0);
  for (int id = 0; id < firstSize_ && joins > joinsAdmitted_; ++id) {
    const bool member =
        std::any_of(seen.begin(), seen.end(), [id](const Member& m) { return m.id == id; });
    const std::string key = keys_ + "join/" + std::to_string(id);
    if (member || !store_->check({key})) continue;
    const Member asking{id, toInt(toString(store_->get(key)), key)};
    if (!isDead(asking)) seen.push_back(asking);
  }
  std::sort(seen.begin(), seen.end(), [](const Member& a, const Member& b) { return a.id < b.id; });
  std::string proposal = std::to_string(joins) + "|";
  for (size_t i = 0; i < seen.size(); ++i) {
    proposal +=
        (i ? "," : "") + std::to_string(seen[i].id) + ":" + std::to_string(seen[i].incarnation);
  }
  const std::string membersKey = here + "members";
  const std::vector<Member> members = parseMembers(
      toString(store_->compareSet(membersKey, {}, toBytes(proposal))), membersKey, joinsAdmitted_);
  // Every member tells the newcomers (the same value each time), so that none waits on a
  // proposer that died after proposing.
  for (const Member& m : members) {
    if (std::find(memberships_.begin(), memberships_.end(), m) == memberships_.end()) {
      store_->set(keys_ + "admitted/" + std::to_string(m.id) + "/" + std::to_string(m.incarnation),
                  toBytes(std::to_string(next)));
    }
  }
  return members;
}

Reformation ElasticGroup::reform(checkpoint::State* state) {
  C10D_CHECK(leftOut_.empty(), StateError, leftOut_);
  const Clock::time_point start = Clock::now();
  const std::vector<Member> before = memberships_;
  std::optional<bool> healed;
  // Again when a member dies while a generation is built or healed: the next one goes on
  // without it.
  while (!healed) {
    // Peers still blocked on this rank fail now instead of at their timeout; groups made from
    // this one say why when used.
    const uint64_t next = generation_ + 1;
    if (group_) {
      group_->retire(detail::concat("c10d::elastic re-formed it into generation ", next,
                                    "; use ElasticGroup::group() and make subgroups from it "
                                    "again"));
    }
    const std::vector<Member> memberships = agreeOnMembers(next);
    // The same members failed to form a generation three times in a row: no loss explains it
    // (a member that stalled and came back in time explains one failure; under chaos, two).
    if (formFailure_ && memberships == failedMemberships_ && ++sameMembersFailures_ >= 3) {
      std::exception_ptr failure = formFailure_;
      formFailure_ = nullptr;
      sameMembersFailures_ = 0;
      std::rethrow_exception(failure);
    }
    if (memberships != failedMemberships_) sameMembersFailures_ = 0;
    std::vector<int> members;
    for (const Member& m : memberships) members.push_back(m.id);
    if (std::find(memberships.begin(), memberships.end(), Member{id_, incarnation_}) ==
        memberships.end()) {
      leftOut_ = detail::concat(
          "elastic: id ", id_, " was left out of generation ", next, " (members ", idList(members),
          "): it did not come to re-form within ElasticOptions::joinTimeout (",
          options_.joinTimeout.count(), " ms), so the others went on without it");
      group_.reset();
      C10D_THROW(StateError, leftOut_);
    }
    if (static_cast<int>(members.size()) < options_.minSize) {
      C10D_THROW(StateError, "elastic: ", members.size(), " member(s) left in generation ", next,
                 " (ids ", idList(members), "; lost ", idList(idsNotIn(before, memberships)),
                 "), fewer than ElasticOptions::minSize ", options_.minSize);
    }
    generation_ = next;
    memberships_ = memberships;
    members_ = std::move(members);
    joinsPending_ = false;
    group_.reset();
    healed = buildAndHeal(state);
  }

  Reformation result;
  result.generation = generation_;
  result.lost = idsNotIn(before, memberships_);
  result.joined = idsNotIn(memberships_, before);
  result.members = members_;
  result.healed = *healed;
  result.step = step_;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  C10D_LOG(Info, "elastic: id ", id_, " re-formed generation ", generation_, " in ", result.seconds,
           " s: members ", idList(members_), ", lost ", idList(result.lost), ", joined ",
           idList(result.joined), ", at step ", step_,
           result.healed ? " (healed from a member ahead)" : "");
  return result;
}

std::vector<int> ElasticGroup::idsNotIn(const std::vector<Member>& these,
                                        const std::vector<Member>& those) {
  std::vector<int> ids;
  for (const Member& m : these) {
    if (std::find(those.begin(), those.end(), m) == those.end()) ids.push_back(m.id);
  }
  return ids;
}

bool ElasticGroup::heal(checkpoint::State* given) {
  ProcessGroup& pg = *group_;
  const int size = pg.size();
  // {committed step, whether this process holds the state} of every member. A newcomer holds
  // none until it is healed.
  int64_t mine[2] = {step_, holdsState_ ? 1 : 0};
  Tensor all = Tensor::empty({2 * size}, ScalarType::Int64);
  pg.allgatherIntoTensor(all, Tensor::fromBlob(mine, ScalarType::Int64, {2}))->wait();
  const int64_t* at = all.data<int64_t>();
  int source = -1;
  int64_t top = 0, low = INT64_MAX;
  bool anyBehind = false;
  for (int r = 0; r < size; ++r) {
    if (at[2 * r + 1] != 0 && (source < 0 || at[2 * r] > top)) {
      source = r;
      top = at[2 * r];
    }
  }
  // Every member sees the same, so all of them throw here, or none.
  C10D_CHECK(source >= 0, StateError, "elastic: no member of generation ", generation_, " (ids ",
             idList(members_),
             ") holds the state: every process that had it ended "
             "while the newcomers joined; start the job again from a checkpoint");
  for (int r = 0; r < size; ++r) {
    low = std::min(low, at[2 * r]);
    anyBehind = anyBehind || at[2 * r] != top || at[2 * r + 1] == 0;
  }
  if (!anyBehind) return false;
  C10D_CHECK(given != nullptr, StateError, "elastic: in generation ", generation_,
             " the members are at steps ", low, " to ", top,
             " (a newcomer, or a rank that died while they agreed on a step); pass reform and "
             "join the State to heal from a member at the highest step");
  checkpoint::State& state = *given;
  for (const checkpoint::StateTensor& t : state.tensors()) {
    C10D_CHECK(t.slice == checkpoint::Slice::whole(t.globalShape), StateError, "elastic: tensor '",
               t.name, "' of the State is a slice (", t.slice.describe(),
               "); reform heals replicated tensors only: pass sharded ones to "
               "elastic::ShardCopies (c10d/elastic/ShardCopies.hpp) or load them from a "
               "checkpoint");
  }
  if (pg.rank() == source) {
    for (const auto& hook : state.saveHooks()) hook();
  }
  for (const checkpoint::StateTensor& t : state.tensors()) {
    pg.broadcast(t.local, BroadcastOptions{.rootRank = source})->wait();
  }
  // Through the generation's store, whose waits end if the source dies before it writes.
  const std::string valuesKey = "heal/values";
  if (pg.rank() == source) {
    pg.store()->set(valuesKey, toBytes(encodeValues(state.values())));
  } else {
    state.mutableValues() = decodeValues(toString(pg.store()->get(valuesKey, pg.timeout())));
  }
  const bool behind = step_ < top || !holdsState_;
  if (pg.rank() != source) {
    for (const auto& hook : state.loadHooks()) hook(state);
  }
  step_ = top;
  holdsState_ = true;
  return behind;
}

}  // namespace c10d::inline v1::elastic
