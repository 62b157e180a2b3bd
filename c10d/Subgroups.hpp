#pragma once

// torch.distributed's new_subgroups and new_subgroups_by_enumeration: several subgroups of a
// group made in one call. Like newGroup, collective over the parent: every rank of it calls with
// the same arguments, in the same order relative to its other newGroup/split calls.

#include <memory>
#include <optional>
#include <vector>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

struct Subgroups {
  /// The subgroup this rank is in; null where it is in none (newSubgroupsByEnumeration).
  std::shared_ptr<ProcessGroup> mine;
  /// Every subgroup, in order: this rank's handles to those it is not in have isMember() false.
  std::vector<std::shared_ptr<ProcessGroup>> all;
};

/// The parent's ranks cut into consecutive subgroups of groupSize: [0, groupSize),
/// [groupSize, 2 groupSize), ... Throws InvalidArgument naming both numbers when groupSize is not
/// positive or does not divide the parent's size.
Subgroups newSubgroups(ProcessGroup& parent, int groupSize,
                       std::optional<ProcessGroupOptions> options = {});

/// One subgroup per list of the parent's ranks (in that order). Throws InvalidArgument naming the
/// list and rank for an empty list, a rank outside the parent or a rank in two lists. Ranks in no
/// list get mine null.
Subgroups newSubgroupsByEnumeration(ProcessGroup& parent,
                                    const std::vector<std::vector<int>>& ranksPerSubgroup,
                                    std::optional<ProcessGroupOptions> options = {});

}  // namespace c10d::inline v1
