#pragma once

/// \file
/// newSubgroups and newSubgroupsByEnumeration, which make several subgroups of a group at once.
///
/// torch.distributed's new_subgroups and new_subgroups_by_enumeration: several subgroups of a
/// group made in one call. Like newGroup, collective over the parent: every rank of it calls with
/// the same arguments, in the same order relative to its other newGroup/split calls.

#include <memory>
#include <optional>
#include <vector>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

/// The subgroups newSubgroups or newSubgroupsByEnumeration made, as this rank sees them.
struct Subgroups {
  /// The subgroup this rank is in; null where it is in none (newSubgroupsByEnumeration).
  std::shared_ptr<ProcessGroup> mine;
  /// Every subgroup, in order: this rank's handles to those it is not in have isMember() false.
  std::vector<std::shared_ptr<ProcessGroup>> all;
};

/// The parent's ranks cut into consecutive subgroups of groupSize: [0, groupSize),
/// [groupSize, 2 groupSize), ... Throws InvalidArgument naming both numbers when groupSize is not
/// positive or does not divide the parent's size.
/// \param parent the group to cut; each subgroup is made with its newGroup.
/// \param groupSize the ranks in each subgroup.
/// \param options every subgroup's options, as for ProcessGroup::newGroup; none: the parent's.
/// \return This rank's subgroup and every subgroup.
Subgroups newSubgroups(ProcessGroup& parent, int groupSize,
                       std::optional<ProcessGroupOptions> options = {});

/// One subgroup per list of the parent's ranks (in that order). Throws InvalidArgument naming the
/// list and rank for an empty list, a rank outside the parent or a rank in two lists. Ranks in no
/// list get mine null.
/// \param parent the group to cut; each subgroup is made with its newGroup.
/// \param ranksPerSubgroup at least one list; each subgroup's ranks of the parent, in its order.
/// \param options every subgroup's options, as for ProcessGroup::newGroup; none: the parent's.
/// \return This rank's subgroup, if any, and every subgroup.
Subgroups newSubgroupsByEnumeration(ProcessGroup& parent,
                                    const std::vector<std::vector<int>>& ranksPerSubgroup,
                                    std::optional<ProcessGroupOptions> options = {});

}  // namespace c10d::inline v1
