#pragma once

// What a message over a link costs (alpha-beta): SyncMesh::attachSockets measures it, the
// algorithms' cost model (algorithms/CostModel.hpp) prices with it.

namespace c10d::inline v1::cost {

struct LinkCost {
  double latencyUs = 0;  // alpha: a message's fixed cost, one way
  double usPerByte = 0;  // beta: the link's time per byte
};

}  // namespace c10d::inline v1::cost
