// The C API's process groups: the default group from the environment, groups over a store,
// subgroups, and the rendezvous store on its own.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "c10d/DefaultGroup.hpp"
#include "c10d/DeviceMesh.hpp"
#include "c10d/Init.hpp"
#include "c10d/Subgroups.hpp"
#include "c10d/capi/Handles.hpp"

struct c10d_device_mesh {
  c10d::DeviceMesh mesh;
};

using namespace c10d;
using namespace c10d::capi;

namespace {

InitOptions initOptionsOf(const c10d_init_options* options, const char* call) {
  InitOptions init;
  if (!checkOptions(options, call)) return init;
  if (options->backend != nullptr) init.backend = options->backend;
  if (options->init_method != nullptr) init.initMethod = options->init_method;
  init.rank = options->rank;
  init.worldSize = options->world_size;
  C10D_CHECK(options->timeout_ms >= 0, InvalidArgument, call, ": options->timeout_ms is ",
             options->timeout_ms, "; use 0 for the default or a positive value");
  init.timeout = std::chrono::milliseconds(options->timeout_ms);
  if (options->group_name != nullptr) init.groupName = options->group_name;
  return init;
}

// c10d_group_options over defaults: its backend, a positive timeout and a name where given.
ProcessGroupOptions groupOptionsOf(const c10d_group_options& options, const char* call,
                                   ProcessGroupOptions defaults) {
  C10D_CHECK(options.timeout_ms >= 0, InvalidArgument, call, ": options->timeout_ms is ",
             options.timeout_ms,
             "; use 0 for the default (a subgroup's parent's) or a positive "
             "value");
  if (options.backend != nullptr) defaults.backend = options.backend;
  if (options.timeout_ms > 0) defaults.timeout = std::chrono::milliseconds(options.timeout_ms);
  if (options.group_name != nullptr) defaults.groupName = options.group_name;
  return defaults;
}

// For a subgroup: nullopt (the parent's options, config included) unless the caller overrides
// the backend or the timeout; then the parent's backend, timeout and local rank under them.
std::optional<ProcessGroupOptions> subgroupOptionsOf(const ProcessGroup& parent,
                                                     const c10d_group_options* options,
                                                     const char* call) {
  if (!checkOptions(options, call)) return std::nullopt;
  ProcessGroupOptions inherited;
  inherited.backend = parent.backendSpec();
  inherited.timeout = parent.timeout();
  inherited.localRank = parent.localRank();
  ProcessGroupOptions sub = groupOptionsOf(*options, call, inherited);
  if (options->backend == nullptr && options->timeout_ms == 0) return std::nullopt;
  return sub;
}

}  // namespace

extern "C" {

c10d_status c10d_store_connect(const c10d_init_options* options, c10d_store** out) {
  return guarded([&] {
    const char* call = "c10d_store_connect";
    outOf(out, call);
    InitOptions init = initOptionsOf(options, call);
    *out = storeHandle(connectStore(init, detectWorld(init)));
  });
}

c10d_status c10d_group_init(const c10d_init_options* options, c10d_group** out) {
  return guarded([&] {
    const char* call = "c10d_group_init";
    outOf(out, call);
    *out = new c10d_group{initProcessGroup(initOptionsOf(options, call))};
  });
}

c10d_status c10d_group_create(c10d_store* store, int rank, int size,
                              const c10d_group_options* options, c10d_group** out) {
  return guarded([&] {
    const char* call = "c10d_group_create";
    c10d_store& s = deref(store, call, "store");
    outOf(out, call);
    ProcessGroupOptions pg;
    if (checkOptions(options, call)) pg = groupOptionsOf(*options, call, pg);
    *out = new c10d_group{std::make_shared<ProcessGroup>(s.store, rank, size, pg)};
  });
}

c10d_status c10d_group_new(c10d_group* group, const int* ranks, size_t num_ranks,
                           const c10d_group_options* options, c10d_group** out) {
  return guarded([&] {
    const char* call = "c10d_group_new";
    ProcessGroup& parent = *deref(group, call, "group").group;
    outOf(out, call);
    C10D_CHECK(ranks != nullptr || num_ranks == 0, InvalidArgument, call, ": ranks is NULL with ",
               num_ranks, " ranks");
    std::vector<int> members(ranks, ranks + num_ranks);
    *out = new c10d_group{parent.newGroup(members, subgroupOptionsOf(parent, options, call))};
  });
}

c10d_status c10d_group_split(c10d_group* group, int color, int key,
                             const c10d_group_options* options, c10d_group** out) {
  return guarded([&] {
    const char* call = "c10d_group_split";
    ProcessGroup& parent = *deref(group, call, "group").group;
    outOf(out, call);
    *out = new c10d_group{parent.split(color, key, subgroupOptionsOf(parent, options, call))};
  });
}

c10d_status c10d_group_new_subgroups(c10d_group* group, int group_size,
                                     const c10d_group_options* options, c10d_group** out) {
  return guarded([&] {
    const char* call = "c10d_group_new_subgroups";
    ProcessGroup& parent = *deref(group, call, "group").group;
    outOf(out, call);
    Subgroups made = newSubgroups(parent, group_size, subgroupOptionsOf(parent, options, call));
    *out = new c10d_group{made.mine};
  });
}

c10d_status c10d_group_new_subgroups_by_enumeration(c10d_group* group, const int* ranks,
                                                    const size_t* sizes, size_t num_subgroups,
                                                    const c10d_group_options* options,
                                                    c10d_group** out) {
  return guarded([&] {
    const char* call = "c10d_group_new_subgroups_by_enumeration";
    ProcessGroup& parent = *deref(group, call, "group").group;
    outOf(out, call);
    C10D_CHECK(num_subgroups == 0 || sizes != nullptr, InvalidArgument, call,
               ": sizes is NULL with ", num_subgroups, " subgroups");
    std::vector<std::vector<int>> lists(num_subgroups);
    size_t next = 0;
    for (size_t i = 0; i < num_subgroups; ++i) {
      C10D_CHECK(sizes[i] == 0 || ranks != nullptr, InvalidArgument, call, ": ranks is NULL");
      lists[i].assign(ranks + next, ranks + next + sizes[i]);
      next += sizes[i];
    }
    Subgroups made =
        newSubgroupsByEnumeration(parent, lists, subgroupOptionsOf(parent, options, call));
    *out = made.mine ? new c10d_group{made.mine} : nullptr;
  });
}

c10d_status c10d_group_default(c10d_group** out) {
  return guarded([&] {
    c10d_group*& slot = outOf(out, "c10d_group_default");
    slot = new c10d_group{defaultGroup()};
  });
}

c10d_status c10d_device_mesh_init(c10d_group* group, const int* shape, const char* const* names,
                                  size_t ndim, c10d_device_mesh** out) {
  return guarded([&] {
    const char* call = "c10d_device_mesh_init";
    ProcessGroup& parent = *deref(group, call, "group").group;
    outOf(out, call);
    C10D_CHECK(ndim == 0 || shape != nullptr, InvalidArgument, call, ": shape is NULL");
    std::vector<std::string> dimNames;
    for (size_t i = 0; names != nullptr && i < ndim; ++i) {
      C10D_CHECK(names[i] != nullptr, InvalidArgument, call, ": names[", i, "] is NULL");
      dimNames.emplace_back(names[i]);
    }
    *out = new c10d_device_mesh{
        initDeviceMesh(parent, std::vector<int>(shape, shape + ndim), dimNames)};
  });
}

c10d_status c10d_device_mesh_group(c10d_device_mesh* mesh, size_t dim, c10d_group** out) {
  return guarded([&] {
    const char* call = "c10d_device_mesh_group";
    const DeviceMesh& m = deref(mesh, call, "mesh").mesh;
    C10D_CHECK(dim < static_cast<size_t>(m.ndim()), InvalidArgument, call, ": dim ", dim,
               " of a mesh of ", m.ndim(), " dimensions");
    c10d_group*& slot = outOf(out, call);
    slot = new c10d_group{m.getGroup(static_cast<int>(dim))};
  });
}

c10d_status c10d_device_mesh_dim(c10d_device_mesh* mesh, const char* name, size_t* dim) {
  return guarded([&] {
    const char* call = "c10d_device_mesh_dim";
    const DeviceMesh& m = deref(mesh, call, "mesh").mesh;
    C10D_CHECK(name != nullptr, InvalidArgument, call, ": name is NULL");
    const int index = m.dimIndex(name);
    outOf(dim, call) = static_cast<size_t>(index);
  });
}

c10d_status c10d_device_mesh_coordinate(c10d_device_mesh* mesh, int* coordinate) {
  return guarded([&] {
    const char* call = "c10d_device_mesh_coordinate";
    const DeviceMesh& m = deref(mesh, call, "mesh").mesh;
    C10D_CHECK(coordinate != nullptr, InvalidArgument, call, ": coordinate is NULL");
    std::copy(m.coordinate().begin(), m.coordinate().end(), coordinate);
  });
}

void c10d_device_mesh_free(c10d_device_mesh* mesh) {
  delete mesh;
}

c10d_status c10d_group_store(c10d_group* group, c10d_store** out) {
  return guarded([&] {
    const char* call = "c10d_group_store";
    c10d_store*& slot = outOf(out, call);
    std::shared_ptr<Store> store = deref(group, call, "group").group->store();
    C10D_CHECK(store != nullptr, InvalidArgument, call,
               ": the group has no store (a non-member's handle)");
    slot = storeHandle(std::move(store));
  });
}

int c10d_group_rank(const c10d_group* group) {
  return group != nullptr ? group->group->rank() : -1;
}

int c10d_group_size(const c10d_group* group) {
  return group != nullptr ? group->group->size() : 0;
}

int c10d_group_is_member(const c10d_group* group) {
  return group != nullptr && group->group->isMember() ? 1 : 0;
}

const char* c10d_group_backend(const c10d_group* group) {
  return group != nullptr ? group->group->backendSpec().c_str() : "";
}

c10d_status c10d_group_shutdown(c10d_group* group) {
  return guarded([&] { deref(group, "c10d_group_shutdown", "group").group->shutdown(); });
}

void c10d_group_free(c10d_group* group) {
  delete group;
}

}  // extern "C"
