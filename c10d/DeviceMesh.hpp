#pragma once

/// \file
/// DeviceMesh and initDeviceMesh: a group's ranks as an n-dimensional mesh with a group per
/// dimension.
///
/// torch.distributed's DeviceMesh and init_device_mesh: a group's ranks laid out as an
/// n-dimensional array (row-major: the last dimension varies fastest), with a group per dimension
/// for each rank (the ranks that differ from it only along that dimension), named dimensions,
/// slicing by names and each rank's coordinate. What FSDP2, tensor parallel and DTensor build on.
///
/// initDeviceMesh is collective over the parent: every rank calls it with the same shape and
/// names, in the same order relative to its other newGroup/split calls; it makes
/// size / shape[d] groups for each dimension d (newSubgroupsByEnumeration). Slicing makes no group.
///
/// Errors: InvalidArgument on every rank, before any group is made, for a shape whose product is
/// not the parent's size, a dimension under 1, names that repeat or whose count is not the
/// dimensions'; a slice by a name the mesh does not have, or by names out of the mesh's order.
/// Threading: a DeviceMesh is immutable; its groups are ProcessGroups.

#include <memory>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

/// A mesh of ranks with a ProcessGroup per dimension, as torch's DeviceMesh; made by
/// initDeviceMesh, or by slice from another mesh.
class DeviceMesh {
 public:
  /// The mesh's dimensions' sizes, names ("" for unnamed) and this rank's coordinate.
  /// \return The size of each dimension.
  const std::vector<int>& shape() const { return shape_; }
  /// \return The name of each dimension ("" for unnamed).
  const std::vector<std::string>& dimNames() const { return names_; }
  /// \return This rank's index along each dimension.
  const std::vector<int>& coordinate() const { return coordinate_; }
  /// \return The number of dimensions.
  int ndim() const { return static_cast<int>(shape_.size()); }
  /// The number of ranks in the mesh (the product of the shape).
  /// \return That number.
  int size() const;
  /// Every rank of the mesh, in row-major order: ranks of the group given to initDeviceMesh (its
  /// globalRank() maps them to the job's); 0 to size() - 1 for the mesh initDeviceMesh made, the
  /// ranks along the kept dimensions for a slice.
  /// \return Those ranks.
  const std::vector<int>& ranks() const { return ranks_; }

  /// The group of dimension dim (by index or name): this rank and those that differ from it only
  /// along dim. Throws InvalidArgument for an index out of range or an unknown name.
  /// \param dim the dimension's index, in [0, ndim()).
  /// \return That group.
  std::shared_ptr<ProcessGroup> getGroup(int dim) const;
  /// The group of the dimension called name (see getGroup(int)).
  /// \param name the dimension's name.
  /// \return That group.
  /// \throws InvalidArgument naming the mesh's names when none is name.
  std::shared_ptr<ProcessGroup> getGroup(const std::string& name) const;
  /// The index of the dimension called name. Throws InvalidArgument naming the mesh's names.
  /// \param name the dimension's name.
  /// \return Its index, in [0, ndim()).
  int dimIndex(const std::string& name) const { return indexOf(name, "dimIndex"); }
  /// This rank's index along dim: its rank in getGroup(dim).
  /// \param dim the dimension's index, in [0, ndim()).
  /// \return That index, coordinate()[dim].
  /// \throws InvalidArgument for dim out of range.
  int getLocalRank(int dim) const;
  /// This rank's index along the dimension called name: its rank in getGroup(name).
  /// \param name the dimension's name.
  /// \return That index.
  /// \throws InvalidArgument naming the mesh's names when none is name.
  int getLocalRank(const std::string& name) const;

  /// The mesh of the named dimensions only (in the mesh's order), through this rank: the ranks
  /// that share its coordinate along the other dimensions. mesh["dp"] in torch.
  /// \param names at least one of the mesh's dimension names, each once, in the mesh's order.
  /// \return The sliced mesh, which shares this mesh's groups of those dimensions.
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
/// \relates DeviceMesh
/// \param parent the group whose ranks the mesh lays out; every rank of it calls.
/// \param shape each dimension's size, at least 1, their product parent.size().
/// \param names one distinct, non-empty name per dimension, or none.
/// \return The mesh, as this rank sees it.
/// \throws InvalidArgument as the header's comment says, on every rank, before any group is made.
DeviceMesh initDeviceMesh(ProcessGroup& parent, const std::vector<int>& shape,
                          const std::vector<std::string>& names = {});

}  // namespace c10d::inline v1
