// Reduce_scatter: a ring's reducing phase; layered across hosts through their leaders.

#include "backends/gloo/algorithms/MeshAlgorithms.hpp"

namespace c10d::inline v1 {

void MeshAlgorithms::reduceScatter(void* data, size_t blockCount, size_t elementSize,
                                   ReduceFunction reduce) {
  auto* base = static_cast<uint8_t*>(data);
  if (!hierarchical_) {
    // Shift -1 so that rank r ends up owning block r.
    ringPhase(all_, base, blockCount * size_, blockCount, elementSize, -1, reduce);
    return;
  }
  // Every block into the lowest rank of each host; each of those sums its host's blocks over the
  // hosts; each block out to its rank.
  const size_t blockBytes = blockCount * elementSize;
  if (host_.size() > 1) reduceIn(host_, data, blockCount * size_, elementSize, reduce, 0);
  if (host_.me == 0) exchangeAmongLeaders(base, blockBytes, elementSize, reduce);
  if (host_.size() == 1) return;
  if (host_.me == 0) {
    for (int i = 1; i < host_.size(); ++i) {
      inPieces(blockBytes, pieceBytes(elementSize), [&](size_t offset, size_t n) {
        send(host_[i], base + host_[i] * blockBytes + offset, n);
      });
    }
  } else {
    inPieces(blockBytes, pieceBytes(elementSize), [&](size_t offset, size_t n) {
      recv(host_[0], base + rank_ * blockBytes + offset, n);
    });
  }
}

}  // namespace c10d::inline v1
