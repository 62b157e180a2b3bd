// Allgather: a ring and Bruck's; layered across hosts through their leaders.

#include <algorithm>
#include <utility>

#include "backends/gloo/algorithms/MeshAlgorithms.hpp"

namespace c10d::inline v1 {

void MeshAlgorithms::allgather(void* output, size_t bytes) {
  auto* base = static_cast<uint8_t*>(output);
  if (!hierarchical_) {
    if (choose(forced_.allgather, all_, bytes, cost::AllgatherAlgorithm::Ring) ==
        cost::AllgatherAlgorithm::Bruck) {
      bruckAllgather(base, bytes);
    } else {
      ringPhase(all_, base, bytes * size_, bytes, 1, 0, nullptr);
    }
    return;
  }
  // Every block into the lowest rank of its host, among those a host's blocks at a time, and the
  // whole output out to every rank of each host.
  if (host_.size() > 1) {
    for (int i = 1; i < host_.size(); ++i) {
      if (host_.me != 0 && host_.me != i) continue;
      inPieces(bytes, kMaxMessageBytes, [&](size_t offset, size_t n) {
        uint8_t* block = base + host_[i] * bytes + offset;
        host_.me == 0 ? recv(host_[i], block, n) : send(host_[0], block, n);
      });
    }
  }
  if (host_.me == 0) exchangeAmongLeaders(base, bytes, 1, nullptr);
  if (host_.size() > 1) broadcastIn(host_, output, bytes * size_, 0);
}

// Bruck: in the step at distance d, the blocks held so far ([rank, rank + d), at most p - d of
// them) go to rank - d, and blocks [rank + d, rank + 2d) come from rank + d: ceil(log2 p) steps
// where a ring takes p - 1. Block indices wrap, so a step's blocks are two runs of the output at
// most; both ends of a link see the same blocks, so the same pieces, and pieces out and in
// alternate across the runs (sending one run after the other left each link idle for a block).
void MeshAlgorithms::bruckAllgather(uint8_t* base, size_t bytes) {
  const int p = size_;
  const size_t piece = kMaxMessageBytes;
  for (int distance = 1; distance < p; distance *= 2) {
    const int count = std::min(distance, p - distance);
    // The blocks from `first` as two runs: up to the output's end, then on from block 0.
    struct Runs {
      size_t offset[2], length[2], pieces[2];
      size_t total() const { return pieces[0] + pieces[1]; }
      std::pair<size_t, size_t> pieceAt(size_t k, size_t piece) const {  // (offset, bytes)
        const int run = k < pieces[0] ? 0 : 1;
        const size_t done = (run == 0 ? k : k - pieces[0]) * piece;
        return {offset[run] + done, std::min(piece, length[run] - done)};
      }
    };
    auto runsFrom = [&](int first) {
      const size_t head = static_cast<size_t>(std::min(count, p - first));
      Runs runs{{first * bytes, 0}, {head * bytes, (count - head) * bytes}, {0, 0}};
      for (int r = 0; r < 2; ++r) runs.pieces[r] = (runs.length[r] + piece - 1) / piece;
      return runs;
    };
    const Runs out = runsFrom(rank_), in = runsFrom((rank_ + distance) % p);
    const int to = (rank_ - distance + p) % p, from = (rank_ + distance) % p;
    for (size_t k = 0; k < std::max(out.total(), in.total()); ++k) {
      if (k < out.total()) {
        const auto [offset, n] = out.pieceAt(k, piece);
        send(to, base + offset, n);
      }
      if (k < in.total()) {
        const auto [offset, n] = in.pieceAt(k, piece);
        recv(from, base + offset, n);
      }
    }
  }
}

}  // namespace c10d::inline v1
