// What the algorithms share: a ring's phase, paired exchanges piece by piece, and the hosts'
// leaders' pairwise step of the layered allgather and reduce_scatter.

#include <algorithm>
#include <utility>

#include "backends/gloo/algorithms/MeshAlgorithms.hpp"

namespace c10d::inline v1 {

// One phase of a ring over `count` elements cut in team.size() segments of `segment` elements.
// In step s member m sends segment (m - s + shift) to its right and receives segment
// (m - s - 1 + shift) from its left. With reduce (reduce-scatter), what arrives is folded into
// our copy of that segment, and after size-1 steps we hold the full reduction of segment
// (m + shift + 1). Without it (allgather), what arrives replaces our copy, starting from the
// segment (m + shift) we own.
void MeshAlgorithms::ringPhase(const Team& team, uint8_t* base, size_t count, size_t segment,
                               size_t elementSize, int shift, ReduceFunction reduce) {
  const int n = team.size();
  const int me = team.me;
  const int right = team[me + 1];
  const int left = team[me - 1];
  auto begin = [&](int index) {
    return std::min(count, static_cast<size_t>((index % n + n) % n) * segment);
  };
  auto length = [&](int index) { return std::min(count, begin(index) + segment) - begin(index); };
  for (int step = 0; step < n - 1; ++step) {
    int sendIndex = me - step + shift, recvIndex = me - step - 1 + shift;
    sendRecvPieces(right, base + begin(sendIndex) * elementSize, length(sendIndex), left,
                   base + begin(recvIndex) * elementSize, length(recvIndex), elementSize, reduce);
  }
}

// Sends sendCount elements from `out` to `to` while receiving recvCount elements from `from`,
// folded into `in` (reduce: in = incoming op in) or copied there, piece by piece: a piece out,
// then a piece in (each socket and channel buffers one piece each way). Each link carries
// ceil(count / piece) messages of the sender's count, which its receiver counts alike.
void MeshAlgorithms::sendRecvPieces(int to, const uint8_t* out, size_t sendCount, int from,
                                    uint8_t* in, size_t recvCount, size_t elementSize,
                                    ReduceFunction reduce) {
  const size_t piece = kMaxMessageBytes / elementSize;
  inPieces(std::max(sendCount, recvCount), piece, [&](size_t done, size_t) {
    if (done < sendCount) {
      send(to, out + done * elementSize, std::min(piece, sendCount - done) * elementSize);
    }
    if (done >= recvCount) return;
    const size_t r = std::min(piece, recvCount - done);
    if (reduce) {
      recvReduce(from, in + done * elementSize, r, elementSize, reduce, true);
    } else {
      recv(from, in + done * elementSize, r * elementSize);
    }
  });
}

// Elements [sendBegin, sendEnd) of base to peer, and [recvBegin, recvEnd) from it.
void MeshAlgorithms::exchangeRanges(int peer, uint8_t* base, size_t sendBegin, size_t sendEnd,
                                    size_t recvBegin, size_t recvEnd, size_t elementSize,
                                    ReduceFunction reduce) {
  sendRecvPieces(peer, base + sendBegin * elementSize, sendEnd - sendBegin, peer,
                 base + recvBegin * elementSize, recvEnd - recvBegin, elementSize, reduce);
}

// Among the lowest ranks of the hosts, pairwise: in step s, to the one s hosts on and from the one
// s hosts back. With reduce (reduce-scatter), each sends a host the blocks of that host's ranks
// and folds what arrives into its own host's blocks; without (allgather), each sends its own
// host's blocks and takes those of the sender's host. Blocks travel from and to their ranks'
// places in base, in pieces; both ends of a pair count the same pieces from the same layout.
void MeshAlgorithms::exchangeAmongLeaders(uint8_t* base, size_t blockBytes, size_t elementSize,
                                          ReduceFunction reduce) {
  const int me = leaders_.me;
  const size_t piece = pieceBytes(elementSize);
  const size_t perBlock = (blockBytes + piece - 1) / piece;
  // Piece k of host h's blocks, in rank order: (offset in base, bytes).
  auto pieceOf = [&](int host, size_t k) {
    const size_t offset = k % perBlock * piece;
    return std::pair<size_t, size_t>(ranksOfHost_[host][k / perBlock] * blockBytes + offset,
                                     std::min(piece, blockBytes - offset));
  };
  for (int step = 1; step < hosts_; ++step) {
    const int to = (me + step) % hosts_;
    const int from = (me - step + hosts_) % hosts_;
    const int outHost = reduce ? to : me;
    const int inHost = reduce ? me : from;
    const size_t outCount = perBlock * ranksOfHost_[outHost].size();
    const size_t inCount = perBlock * ranksOfHost_[inHost].size();
    for (size_t k = 0; k < std::max(outCount, inCount); ++k) {
      if (k < outCount) {
        auto [offset, n] = pieceOf(outHost, k);
        send(leaders_[to], base + offset, n);
      }
      if (k >= inCount) continue;
      auto [offset, n] = pieceOf(inHost, k);
      if (reduce) {
        recvReduce(leaders_[from], base + offset, n / elementSize, elementSize, reduce, false);
      } else {
        recv(leaders_[from], base + offset, n);
      }
    }
  }
}

}  // namespace c10d::inline v1
