#include "c10d/DeviceMesh.hpp"

#include <algorithm>
#include <set>

#include "c10d/ProcessGroupChecks.hpp"
#include "c10d/Subgroups.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {
namespace {

// Row-major strides: the last dimension varies fastest.
std::vector<int> stridesOf(const std::vector<int>& shape) {
  std::vector<int> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

std::string shapeText(const std::vector<int>& shape) {
  return detail::rankList(shape);
}

}  // namespace

int DeviceMesh::size() const {
  int n = 1;
  for (int s : shape_) n *= s;
  return n;
}

void DeviceMesh::checkDim(int dim, const char* op) const {
  C10D_CHECK(dim >= 0 && dim < ndim(), InvalidArgument, "DeviceMesh::", op, ": dimension ", dim,
             " of a ", ndim(), "-dimensional mesh ", shapeText(shape_));
}

int DeviceMesh::indexOf(const std::string& name, const char* op) const {
  auto at = std::find(names_.begin(), names_.end(), name);
  if (name.empty() || at == names_.end()) {
    std::string known;
    for (const std::string& n : names_)
      known += detail::concat(known.empty() ? "" : ", ", "'", n, "'");
    C10D_THROW(InvalidArgument, "DeviceMesh::", op, ": no dimension named '", name,
               "' (the mesh's: ", known, ")");
  }
  return static_cast<int>(at - names_.begin());
}

std::shared_ptr<ProcessGroup> DeviceMesh::getGroup(int dim) const {
  checkDim(dim, "getGroup");
  return groups_[dim];
}

std::shared_ptr<ProcessGroup> DeviceMesh::getGroup(const std::string& name) const {
  return groups_[indexOf(name, "getGroup")];
}

int DeviceMesh::getLocalRank(int dim) const {
  checkDim(dim, "getLocalRank");
  return coordinate_[dim];
}

int DeviceMesh::getLocalRank(const std::string& name) const {
  return coordinate_[indexOf(name, "getLocalRank")];
}

DeviceMesh DeviceMesh::slice(const std::vector<std::string>& names) const {
  C10D_CHECK(!names.empty(), InvalidArgument, "DeviceMesh::slice: no dimension named");
  std::vector<int> dims;
  for (const std::string& name : names) {
    const int d = indexOf(name, "slice");
    C10D_CHECK(dims.empty() || d > dims.back(), InvalidArgument, "DeviceMesh::slice: '", name,
               "' comes before '", names_[dims.back()],
               "' in the mesh (or twice); name the dimensions in the mesh's order");
    dims.push_back(d);
  }
  DeviceMesh sub;
  for (int d : dims) {
    sub.shape_.push_back(shape_[d]);
    sub.names_.push_back(names_[d]);
    sub.coordinate_.push_back(coordinate_[d]);
    sub.groups_.push_back(groups_[d]);
  }
  // The ranks that share this rank's coordinate along the other dimensions, row-major.
  const std::vector<int> strides = stridesOf(shape_);
  for (int k = 0; k < sub.size(); ++k) {
    std::vector<int> coordinate = coordinate_;
    for (int i = static_cast<int>(dims.size()) - 1, rest = k; i >= 0; --i) {
      coordinate[dims[i]] = rest % sub.shape_[i];
      rest /= sub.shape_[i];
    }
    int index = 0;
    for (int d = 0; d < ndim(); ++d) index += coordinate[d] * strides[d];
    sub.ranks_.push_back(ranks_[index]);
  }
  return sub;
}

DeviceMesh initDeviceMesh(ProcessGroup& parent, const std::vector<int>& shape,
                          const std::vector<std::string>& names) {
  C10D_CHECK(!shape.empty(), InvalidArgument, "init_device_mesh: the mesh shape is empty");
  int64_t product = 1;
  for (int s : shape) {
    C10D_CHECK(s >= 1, InvalidArgument, "init_device_mesh: mesh shape ", shapeText(shape),
               " has a dimension of ", s);
    product *= s;
    C10D_CHECK(product <= parent.size(), InvalidArgument, "init_device_mesh: mesh shape ",
               shapeText(shape), " has more ranks than group '", parent.groupName(), "' (",
               parent.size(), ")");
  }
  C10D_CHECK(product == parent.size(), InvalidArgument, "init_device_mesh: mesh shape ",
             shapeText(shape), " makes ", product, " ranks; group '", parent.groupName(), "' has ",
             parent.size());
  C10D_CHECK(names.empty() || names.size() == shape.size(), InvalidArgument,
             "init_device_mesh: ", names.size(), " names for ", shape.size(), " dimensions");
  std::set<std::string> seen;
  for (const std::string& name : names) {
    C10D_CHECK(!name.empty(), InvalidArgument, "init_device_mesh: an empty dimension name");
    C10D_CHECK(seen.insert(name).second, InvalidArgument, "init_device_mesh: dimension name '",
               name, "' repeats; each dimension needs a name of its own");
  }

  DeviceMesh mesh;
  mesh.shape_ = shape;
  mesh.names_ = names.empty() ? std::vector<std::string>(shape.size()) : names;
  const std::vector<int> strides = stridesOf(shape);
  const int n = parent.size();
  for (int r = 0; r < n; ++r) mesh.ranks_.push_back(r);
  for (size_t d = 0; d < shape.size(); ++d) {
    mesh.coordinate_.push_back(parent.rank() / strides[d] % shape[d]);
  }
  // For each dimension, one list per line along it: from each rank whose coordinate there is 0.
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<std::vector<int>> lines;
    for (int base = 0; base < n; ++base) {
      if (base / strides[d] % shape[d] != 0) continue;
      std::vector<int>& line = lines.emplace_back();
      for (int i = 0; i < shape[d]; ++i) line.push_back(base + i * strides[d]);
    }
    mesh.groups_.push_back(newSubgroupsByEnumeration(parent, lines).mine);
  }
  return mesh;
}

}  // namespace c10d::inline v1
