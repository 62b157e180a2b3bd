#include "c10d/elastic/ElasticGroup.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "c10d/Init.hpp"
#include "c10d/checkpoint/State.hpp"
#include "c10d/core/Config.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/elastic/LauncherKeys.hpp"
#include "store/PrefixStore.hpp"
#include "store/Store.hpp"

namespace c10d::inline v0::elastic {
namespace {

using Clock = std::chrono::steady_clock;

// How often reform looks at the store while it waits for the old members. A death recorded by
// the launcher is seen within this; each look is one round trip per member not yet seen.
constexpr auto kPollInterval = std::chrono::milliseconds(2);

std::string idList(const std::vector<int>& ids) {
  std::string text;
  for (int id : ids) text += (text.empty() ? "" : ", ") + std::to_string(id);
  return text.empty() ? "none" : text;
}

std::vector<int> parseIds(const std::string& text) {
  std::vector<int> ids;
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    ids.push_back(std::stoi(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return ids;
}

std::string encodeIds(const std::vector<int>& ids) {
  std::string text;
  for (int id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
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
    : store_(std::move(store)), id_(id), options_(std::move(options)) {
  C10D_CHECK(store_ != nullptr, InvalidArgument, "ElasticGroup: the store is null");
  C10D_CHECK(size >= 1 && id >= 0 && id < size, InvalidArgument, "ElasticGroup: id ", id,
             " is out of range for size ", size);
  C10D_CHECK(options_.minSize >= 1 && options_.minSize <= size, InvalidArgument,
             "ElasticOptions::minSize must be in [1, ", size, "], got ", options_.minSize);
  C10D_CHECK(options_.joinTimeout.count() > 0, InvalidArgument,
             "ElasticOptions::joinTimeout must be positive, got ", options_.joinTimeout.count(),
             " ms");
  if (options_.group.backend.empty()) options_.group.backend = config::value("C10D_BACKEND");
  keys_ = "c10d/elastic/" + options_.group.groupName + "/";
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
    C10D_LOG(Warning, "elastic: rank 0 hosts the job's store (C10D_STORE_HOST=rank0), so losing "
                      "rank 0 ends the job; start it with c10drun --elastic to survive any loss");
  }
  if (options.group.localRank < 0) options.group.localRank = world.localRank;
  return std::make_unique<ElasticGroup>(connectStore(init, world), world.rank, world.worldSize,
                                        std::move(options));
}

ElasticGroup::~ElasticGroup() {
  if (group_) group_->shutdown();
}

ProcessGroup& ElasticGroup::group() const { return *sharedGroup(); }

std::shared_ptr<ProcessGroup> ElasticGroup::sharedGroup() const {
  C10D_CHECK(leftOut_.empty(), StateError, leftOut_);
  return group_;
}

int ElasticGroup::rank() const { return group().rank(); }
int ElasticGroup::size() const { return group().size(); }

void ElasticGroup::build() {
  const std::string generation = "g" + std::to_string(generation_);
  const int rank = static_cast<int>(std::find(members_.begin(), members_.end(), id_) -
                                    members_.begin());
  ProcessGroupOptions options = options_.group;
  // A name per generation: shared-memory channels and the flight recorder are per name.
  options.groupName = options_.group.groupName + "." + generation;
  group_ = std::make_shared<ProcessGroup>(
      std::make_shared<PrefixStore>(keys_ + generation + "/group", store_), rank,
      static_cast<int>(members_.size()), options);
}

bool ElasticGroup::commit(bool ok) {
  ProcessGroup& pg = group();
  int32_t vote = ok ? 1 : 0;
  try {
    pg.allreduce(Tensor::fromBlob(&vote, ScalarType::Int32, {1}),
                 AllreduceOptions{.reduceOp = ReduceOp::MIN})
        ->wait();
  } catch (const Error& e) {
    C10D_LOG(Info, "elastic: id ", id_, " could not agree on step ", step_, " in generation ",
             generation_, ": ", e.what());
    return false;
  }
  if (vote == 0) return false;
  ++step_;
  return true;
}

std::vector<int> ElasticGroup::agreeOnMembers(uint64_t next) {
  const std::string here = keys_ + "g" + std::to_string(next) + "/";
  store_->set(here + "here/" + std::to_string(id_), toBytes("1"));
  const Clock::time_point deadline = Clock::now() + options_.joinTimeout;
  std::vector<int> seen;
  std::vector<int> pending = members_;
  while (!pending.empty() && Clock::now() < deadline && !store_->check({here + "members"})) {
    std::vector<int> still;
    for (int m : pending) {
      if (store_->check({here + "here/" + std::to_string(m)})) {
        seen.push_back(m);
      } else if (!store_->check({launcherExitKey(m)})) {
        still.push_back(m);
      }
    }
    pending = std::move(still);
    if (!pending.empty()) std::this_thread::sleep_for(kPollInterval);
  }
  std::sort(seen.begin(), seen.end());
  const std::string decided =
      toString(store_->compareSet(here + "members", {}, toBytes(encodeIds(seen))));
  return parseIds(decided);
}

Reformation ElasticGroup::reform(checkpoint::State* state) {
  C10D_CHECK(leftOut_.empty(), StateError, leftOut_);
  const Clock::time_point start = Clock::now();
  // Peers still blocked on this rank fail now instead of at their timeout.
  group_->shutdown();
  const uint64_t next = generation_ + 1;
  std::vector<int> members = agreeOnMembers(next);
  std::vector<int> lost;
  for (int m : members_) {
    if (std::find(members.begin(), members.end(), m) == members.end()) lost.push_back(m);
  }
  if (std::find(members.begin(), members.end(), id_) == members.end()) {
    leftOut_ = detail::concat(
        "elastic: id ", id_, " was left out of generation ", next, " (members ", idList(members),
        "): it did not come to re-form within ElasticOptions::joinTimeout (",
        options_.joinTimeout.count(), " ms), so the others went on without it");
    group_.reset();
    C10D_THROW(StateError, leftOut_);
  }
  C10D_CHECK(static_cast<int>(members.size()) >= options_.minSize, StateError,
             "elastic: ", members.size(), " member(s) left in generation ", next, " (ids ",
             idList(members), "; lost ", idList(lost), "), fewer than ElasticOptions::minSize ",
             options_.minSize);
  generation_ = next;
  members_ = std::move(members);
  group_.reset();
  build();

  Reformation result;
  result.generation = generation_;
  result.lost = std::move(lost);
  result.members = members_;
  if (state != nullptr) {
    result.healed = heal(*state);
  } else {
    int64_t steps[2] = {step_, -step_};
    group_->allreduce(Tensor::fromBlob(steps, ScalarType::Int64, {2}),
                      AllreduceOptions{.reduceOp = ReduceOp::MAX})
        ->wait();
    C10D_CHECK(steps[0] == -steps[1], StateError, "elastic: after re-forming generation ",
               generation_, " the members are at steps ", -steps[1], " to ", steps[0],
               " (a rank died while they agreed on a step); pass reform the State to heal from "
               "a member that committed it");
  }
  result.step = step_;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  C10D_LOG(Info, "elastic: id ", id_, " re-formed generation ", generation_, " in ",
           result.seconds, " s: members ", idList(members_), ", lost ", idList(result.lost),
           ", at step ", step_, result.healed ? " (healed from a member ahead)" : "");
  return result;
}

bool ElasticGroup::heal(checkpoint::State& state) {
  ProcessGroup& pg = *group_;
  const int size = pg.size();
  Tensor mine = Tensor::fromBlob(&step_, ScalarType::Int64, {1});
  Tensor all = Tensor::empty({size}, ScalarType::Int64);
  pg.allgatherIntoTensor(all, mine)->wait();
  const int64_t* steps = all.data<int64_t>();
  const int64_t top = *std::max_element(steps, steps + size);
  if (std::all_of(steps, steps + size, [top](int64_t s) { return s == top; })) return false;
  const int source = static_cast<int>(std::find(steps, steps + size, top) - steps);
  for (const checkpoint::StateTensor& t : state.tensors()) {
    C10D_CHECK(t.slice == checkpoint::Slice::whole(t.globalShape), StateError,
               "elastic: tensor '", t.name, "' of the State is a slice (",
               t.slice.describe(), "); reform heals replicated tensors only: load sharded state "
               "from a checkpoint (c10d/checkpoint/Checkpoint.hpp)");
  }
  if (pg.rank() == source) {
    for (const auto& hook : state.saveHooks()) hook();
  }
  for (const checkpoint::StateTensor& t : state.tensors()) {
    pg.broadcast(t.local, BroadcastOptions{.rootRank = source})->wait();
  }
  const std::string valuesKey = keys_ + "g" + std::to_string(generation_) + "/heal/values";
  if (pg.rank() == source) {
    store_->set(valuesKey, toBytes(encodeValues(state.values())));
  } else {
    state.mutableValues() = decodeValues(toString(store_->get(valuesKey, pg.timeout())));
  }
  const bool behind = step_ < top;
  if (pg.rank() != source) {
    for (const auto& hook : state.loadHooks()) hook(state);
  }
  step_ = top;
  return behind;
}

}  // namespace c10d::inline v0::elastic
