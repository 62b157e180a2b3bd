// ProcessGroup's subgroups: newGroup and split, the store (or, without a shared store, CPU
// backend) exchanges they run over the parent group to agree on each creation and on the colors,
// and the making of the subgroup itself on every rank of the parent, members or not; and
// newSubgroups / newSubgroupsByEnumeration (Subgroups.hpp) over newGroup.

#include "c10d/Subgroups.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/ProcessGroupChecks.hpp"
#include "c10d/ProcessGroupInstrumentation.hpp"
#include "c10d/core/Exception.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1 {

std::shared_ptr<ProcessGroup> ProcessGroup::newGroup(const std::vector<int>& ranks,
                                                     std::optional<ProcessGroupOptions> options) {
  return withErrorContext("new_group", -1, [&] {
    checkUsable("new_group");
    C10D_CHECK(!ranks.empty(), InvalidArgument, "new_group: empty rank list");
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    C10D_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), InvalidArgument,
               "new_group: duplicate rank in ", detail::rankList(ranks));
    for (int r : ranks) checkRank(r, "rank", "new_group");
    const uint64_t index = state_->subgroupCounter++;
    agreeOnCreation(index, "new_group " + detail::rankList(ranks));
    return makeSubgroup(ranks, state_->options.groupName + ".sub" + std::to_string(index), options);
  });
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key,
                                                  std::optional<ProcessGroupOptions> options) {
  return withErrorContext("split", -1, [&] {
    checkUsable("split");
    const uint64_t index = state_->subgroupCounter++;
    agreeOnCreation(index, "split");
    std::string name = state_->options.groupName + ".split" + std::to_string(index);
    std::vector<std::array<int, 2>> all = exchangeColors(name, color, key);
    std::vector<std::pair<int, int>> members;  // (key, rank) of this rank's color, if it has one
    for (int r = 0; r < state_->size && color >= 0; ++r) {
      if (all[r][0] == color) members.emplace_back(all[r][1], r);
    }
    std::sort(members.begin(), members.end());
    std::vector<int> ranks;
    for (auto& [k, r] : members) ranks.push_back(r);
    return makeSubgroup(ranks, name + ".color" + std::to_string(color), options);
  });
}

std::vector<Store::Bytes> ProcessGroup::exchangeThroughStore(
    const std::string& prefix, const Store::Bytes& mine, std::chrono::milliseconds timeout,
    const std::function<std::string(const std::string& absent)>& describeAbsent) {
  state_->store->set(prefix + std::to_string(state_->rank), mine);
  std::vector<std::string> keys;
  for (int r = 0; r < state_->size; ++r) keys.push_back(prefix + std::to_string(r));
  try {
    return state_->store->multiGet(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> absent;
    for (int r = 0; r < state_->size; ++r) {
      if (!state_->store->check({keys[r]})) absent.push_back(r);
    }
    C10D_THROW(TimeoutError, describeAbsent(detail::rankList(absent)));
  }
}

void ProcessGroup::agreeOnCreation(uint64_t index, const std::string& call) {
  // Without a shared store the backend splits its communicator collectively (MPI_Comm_split),
  // which has no way to say who is missing; nothing to record here.
  if (!state_->options.storeIsShared) return;
  // The store is the job's: the key names the group too.
  auto where = [&] {
    return detail::concat(call, " in group '", state_->options.groupName, "' (group creation #",
                          index + 1, " on this rank)");
  };
  const char* rule =
      "every rank of a group must make the same new_group and split calls in the same order; a "
      "rank that skips one shifts every later one";
  std::vector<Store::Bytes> calls = exchangeThroughStore(
      detail::concat("create/", state_->options.groupName, "/", index, "/"), toBytes(call),
      state_->options.timeout, [&](const std::string& absent) {
        return detail::concat(where(), ": rank(s) ", absent, " made no group creation #", index + 1,
                              " within ", state_->options.timeout.count(), " ms; ", rule);
      });
  for (int r = 0; r < state_->size; ++r) {
    std::string theirs = toString(calls[r]);
    C10D_CHECK(theirs == call, InvalidArgument, where(), ": rank ", r, " made ", theirs,
               " as its group creation #", index + 1, "; ", rule);
  }
}

std::vector<std::array<int, 2>> ProcessGroup::exchangeColors(const std::string& name, int color,
                                                             int key) {
  std::vector<std::array<int, 2>> all(state_->size);
  if (state_->options.storeIsShared) {
    std::string prefix = "split/" + name + "/";
    state_->store->setString(prefix + std::to_string(state_->rank),
                             std::to_string(color) + " " + std::to_string(key));
    std::vector<std::string> keys;
    for (int r = 0; r < state_->size; ++r) keys.push_back(prefix + std::to_string(r));
    std::vector<Store::Bytes> values = state_->store->multiGet(keys, state_->options.timeout);
    for (int r = 0; r < state_->size; ++r) {
      std::istringstream in(toString(values[r]));
      in >> all[r][0] >> all[r][1];
    }
    return all;
  }
  // No shared store: through the backend, as one allgather of (color, key) per rank.
  auto cpu = state_->backends.find(DeviceType::CPU);
  C10D_CHECK(cpu != state_->backends.end(), InvalidArgument, "split in group '",
             state_->options.groupName,
             "': without a shared store (MASTER_ADDR) it needs a CPU backend");
  Tensor mine = Tensor::empty({2}, ScalarType::Int32);
  static_cast<int32_t*>(mine.data())[0] = color;
  static_cast<int32_t*>(mine.data())[1] = key;
  Tensor gathered = Tensor::empty({2 * static_cast<int64_t>(state_->size)}, ScalarType::Int32);
  // A collective of this group like any other: every rank splits, so its number agrees.
  allgatherIntoTensor(gathered, mine, {.timeout = state_->options.timeout})->wait();
  for (int r = 0; r < state_->size; ++r) {
    all[r][0] = static_cast<int32_t*>(gathered.data())[2 * r];
    all[r][1] = static_cast<int32_t*>(gathered.data())[2 * r + 1];
  }
  return all;
}

std::shared_ptr<ProcessGroup> ProcessGroup::makeSubgroup(
    const std::vector<int>& memberRanks, const std::string& name,
    std::optional<ProcessGroupOptions> options) {
  // Every rank of this group gets here for every subgroup, members or not: the backends that
  // split a communicator collectively need all of them.
  std::map<std::string, std::shared_ptr<void>> fromParent;
  for (auto& [device, backend] : state_->backends) {
    // One backend may serve several device types: split it once.
    if (fromParent.count(backend->name()) == 0) {
      fromParent[backend->name()] = backend->splitForSubgroup(memberRanks);
    }
  }
  auto it = std::find(memberRanks.begin(), memberRanks.end(), state_->rank);
  if (it == memberRanks.end()) {
    return std::shared_ptr<ProcessGroup>(new ProcessGroup(NonMember{}, name));
  }
  ProcessGroupOptions subOptions = options.value_or(state_->options);
  subOptions.groupName = name;
  subOptions.storeIsShared = state_->options.storeIsShared;
  std::shared_ptr<ProcessGroup> group(
      new ProcessGroup(state_->store, static_cast<int>(it - memberRanks.begin()),
                       static_cast<int>(memberRanks.size()), subOptions, fromParent));
  for (size_t i = 0; i < memberRanks.size(); ++i) {
    group->state_->globalRanks[i] = state_->globalRanks[memberRanks[i]];
  }
  std::lock_guard<std::mutex> guard(state_->subgroupsMutex);
  std::erase_if(state_->subgroups,
                [](const std::weak_ptr<ProcessGroup>& g) { return g.expired(); });
  state_->subgroups.push_back(group);
  return group;
}

Subgroups newSubgroupsByEnumeration(ProcessGroup& parent,
                                    const std::vector<std::vector<int>>& ranksPerSubgroup,
                                    std::optional<ProcessGroupOptions> options) {
  C10D_CHECK(!ranksPerSubgroup.empty(), InvalidArgument,
             "new_subgroups_by_enumeration: no subgroups given");
  std::vector<int> listOf(parent.size(), -1);
  for (size_t i = 0; i < ranksPerSubgroup.size(); ++i) {
    const std::vector<int>& ranks = ranksPerSubgroup[i];
    C10D_CHECK(!ranks.empty(), InvalidArgument, "new_subgroups_by_enumeration: subgroup ", i,
               " has no ranks");
    for (int r : ranks) {
      C10D_CHECK(r >= 0 && r < parent.size(), InvalidArgument,
                 "new_subgroups_by_enumeration: rank ", r, " of subgroup ", i, " ",
                 detail::rankList(ranks), " is not a rank of group '", parent.groupName(),
                 "' (size ", parent.size(), ")");
      C10D_CHECK(listOf[r] < 0, InvalidArgument, "new_subgroups_by_enumeration: rank ", r,
                 " is in subgroup ", listOf[r], " ", detail::rankList(ranksPerSubgroup[listOf[r]]),
                 " and in subgroup ", i, " ", detail::rankList(ranks),
                 "; a rank may be in one subgroup only");
      listOf[r] = static_cast<int>(i);
    }
  }
  Subgroups made;
  for (const std::vector<int>& ranks : ranksPerSubgroup) {
    made.all.push_back(parent.newGroup(ranks, options));
    if (made.all.back()->isMember()) made.mine = made.all.back();
  }
  return made;
}

Subgroups newSubgroups(ProcessGroup& parent, int groupSize,
                       std::optional<ProcessGroupOptions> options) {
  C10D_CHECK(groupSize > 0 && parent.size() % groupSize == 0, InvalidArgument,
             "new_subgroups: group size ", groupSize, " does not divide the ", parent.size(),
             " ranks of group '", parent.groupName(), "'; give a positive divisor of the size");
  std::vector<std::vector<int>> lists(parent.size() / groupSize);
  for (int r = 0; r < parent.size(); ++r) lists[r / groupSize].push_back(r);
  return newSubgroupsByEnumeration(parent, lists, std::move(options));
}

}  // namespace c10d::inline v1
