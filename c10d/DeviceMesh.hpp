#pragma once

// torch.distributed's DeviceMesh and init_device_mesh: a group's ranks laid out as an
// n-dimensional array (row-major: the last dimension varies fastest), with a group per dimension
// for each rank (the ranks that differ from it only along that dimension), named dimensions,
// slicing by names and each rank's coordinate. What FSDP2, tensor parallel and DTensor build on.
//
// initDeviceMesh is collective over the parent: every rank calls it with the same shape and
// names, in the same order relative to its other newGroup/split calls; it makes
// size / shape[d] groups for each dimension d (newSubgroupsByEnumeration). Slicing makes no group.
//
// Errors: InvalidArgument on every rank, before any group is made, for a shape whose product is
// not the parent's size, a dimension under 1, names that repeat or whose count is not the
// dimensions'; a slice by a name the mesh does not have, or by names out of the mesh's order.
// Threading: a DeviceMesh is immutable; its groups are ProcessGroups.

#include <memory>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

class DeviceMesh {
 public:
  /// The mesh's dimensions' sizes, names ("" for unnamed) and this rank's coordinate.
  const std::vector<int>& shape() const { return shape_; }
  const std::vector<std::string>& dimNames() const { return names_; }
  const std::vector<int>& coordinate() const { return coordinate_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  /// The number of ranks in the mesh (the product of the shape).
  int size() const;
  /// Every rank of the mesh, in row-major order (global ranks of the parent group).
  const std::vector<int>& ranks() const { return ranks_; }

  /// The group of dimension dim (by index or name): this rank and those that differ from it only
  /// along dim. Throws InvalidArgument for an index out of range or an unknown name.
  std::shared_ptr<ProcessGroup> getGroup(int dim) const;
  std::shared_ptr<ProcessGroup> getGroup(const std::string& name) const;
  /// The index of the dimension called name. Throws InvalidArgument naming the mesh's names.
  int dimIndex(const std::string& name) const { return indexOf(name, "dimIndex"); }
  /// This rank's index along dim: its rank in getGroup(dim).
  int getLocalRank(int dim) const;
  int getLocalRank(const std::string& name) const;

  /// The mesh of the named dimensions only (in the mesh's order), through this rank: the ranks
  /// that share its coordinate along the other dimensions. mesh["dp"] in torch.
  DeviceMesh slice(const std::vector<std::string>& names) const;

 private:
  friend DeviceMesh initDeviceMesh(ProcessGroup&, const std::vector<int>&,
                                   const std::vector<std::string>&);
  int indexOf(const std::string& name, const char* op) const;
  void checkDim(int dim, const char* op) const;

  std::vector<int> shape_;
  std::vector<std::string> names_;
  std::vector<int> coordinate_;
  std::vector<int> ranks_;
  std::vector<std::shared_ptr<ProcessGroup>> groups_;  ///< one per dimension
};

/// The mesh of parent's ranks with shape (row-major) and names (empty: unnamed dimensions).
DeviceMesh initDeviceMesh(ProcessGroup& parent, const std::vector<int>& shape,
                          const std::vector<std::string>& names = {});

}  // namespace c10d::inline v1
