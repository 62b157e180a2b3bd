// Alltoall: pairwise exchange.

#include "backends/common/Flatten.hpp"
#include "backends/gloo/algorithms/MeshAlgorithms.hpp"

namespace c10d::inline v1 {

// Pairwise: in step s, send to rank + s and receive from rank - s, piece by piece.
void MeshAlgorithms::alltoall(const void* input, void* output, size_t blockBytes) {
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  copyBytes(out + rank_ * blockBytes, in + rank_ * blockBytes, blockBytes);
  for (int step = 1; step < size_; ++step) {
    int to = (rank_ + step) % size_;
    int from = (rank_ - step + size_) % size_;
    inPieces(blockBytes, kMaxMessageBytes, [&](size_t offset, size_t n) {
      send(to, in + to * blockBytes + offset, n);
      recv(from, out + from * blockBytes + offset, n);
    });
  }
}

}  // namespace c10d::inline v1
