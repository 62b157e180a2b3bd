// Barrier: dissemination.

#include "backends/gloo/algorithms/MeshAlgorithms.hpp"

namespace c10d::inline v1 {

// Dissemination: after round k every rank has heard, directly or not, from 2^(k+1) ranks.
void MeshAlgorithms::barrier() {
  uint8_t token = 0;
  for (int distance = 1; distance < size_; distance *= 2) {
    send((rank_ + distance) % size_, &token, 1);
    recv((rank_ - distance + size_) % size_, &token, 1);
  }
}

}  // namespace c10d::inline v1
