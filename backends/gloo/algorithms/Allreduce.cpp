// Allreduce: recursive doubling, a ring, and Rabenseifner's halving-doubling; layered across
// hosts as a reduce within each host, an allreduce among their leaders, and a broadcast back.

#include <utility>

#include "backends/gloo/algorithms/MeshAlgorithms.hpp"

namespace c10d::inline v1 {

void MeshAlgorithms::allreduce(void* data, size_t count, size_t elementSize,
                               ReduceFunction reduce) {
  if (!hierarchical_) {
    allreduceIn(all_, data, count, elementSize, reduce);
    return;
  }
  // Into the lowest rank of each host, among those, and back out: every rank ends with the
  // bits its host's lowest rank computed, which are the same on every host.
  if (host_.size() > 1) reduceIn(host_, data, count, elementSize, reduce, 0);
  if (host_.me == 0) allreduceIn(leaders_, data, count, elementSize, reduce);
  if (host_.size() > 1) broadcastIn(host_, data, count * elementSize, 0);
}

void MeshAlgorithms::allreduceIn(const Team& team, void* data, size_t count, size_t elementSize,
                                 ReduceFunction reduce) {
  if (team.size() < 2) return;
  const size_t bytes = count * elementSize;
  switch (choose(forced_.allreduce, team, bytes,
                 bytes > kMaxMessageBytes ? cost::AllreduceAlgorithm::Ring
                                          : cost::AllreduceAlgorithm::RecursiveDoubling)) {
    case cost::AllreduceAlgorithm::Ring:
      ringAllreduce(team, data, count, elementSize, reduce);
      return;
    case cost::AllreduceAlgorithm::HalvingDoubling:
      halvingDoublingAllreduce(team, data, count, elementSize, reduce);
      return;
    case cost::AllreduceAlgorithm::RecursiveDoubling:
      // Chosen over a message's limit only when forced: then piece by piece.
      inPieces(count, kMaxMessageBytes / elementSize, [&](size_t offset, size_t n) {
        recursiveDoublingAllreduce(team, static_cast<uint8_t*>(data) + offset * elementSize, n,
                                   elementSize, reduce);
      });
      return;
  }
}

// Recursive doubling among the largest power of two p' <= size; the size - p' members above it
// first fold their data into a partner below and get the result back at the end. Partners
// combine each other's data in the same order, so every member ends with identical bits.
void MeshAlgorithms::recursiveDoublingAllreduce(const Team& team, void* data, size_t count,
                                                size_t elementSize, ReduceFunction reduce) {
  const size_t bytes = count * elementSize;
  const int me = team.me;
  int pow2 = 1;
  while (pow2 * 2 <= team.size()) pow2 *= 2;
  const int extra = team.size() - pow2;
  if (me >= pow2) {
    send(team[me - pow2], data, bytes);
    recv(team[me - pow2], data, bytes);
    return;
  }
  if (me < extra) recvReduce(team[me + pow2], data, count, elementSize, reduce, false);
  for (int distance = 1; distance < pow2; distance *= 2) {
    int partner = me ^ distance;
    send(team[partner], data, bytes);
    // The lower member's data goes first on both sides.
    recvReduce(team[partner], data, count, elementSize, reduce, partner < me);
  }
  if (me < extra) send(team[me + pow2], data, bytes);
}

void MeshAlgorithms::ringAllreduce(const Team& team, void* data, size_t count, size_t elementSize,
                                   ReduceFunction reduce) {
  auto* base = static_cast<uint8_t*>(data);
  const size_t segment = (count + team.size() - 1) / team.size();
  // Each segment's final value is computed once, by its owner, and then copied: identical bits
  // on every member.
  ringPhase(team, base, count, segment, elementSize, 0, reduce);
  ringPhase(team, base, count, segment, elementSize, 1, nullptr);
}

// Rabenseifner's allreduce: a reduce-scatter by recursive halving, then an allgather by recursive
// doubling over the same partners in reverse. 2 log2(p) messages, and each member sends 2(p-1)/p
// of the buffer as in a ring (recursive doubling sends log2(p) times all of it). Members above
// the largest power of two fold into a partner below first and get the result at the end. Each
// element's final value is computed by one member and copied: identical bits on every member.
void MeshAlgorithms::halvingDoublingAllreduce(const Team& team, void* data, size_t count,
                                              size_t elementSize, ReduceFunction reduce) {
  auto* base = static_cast<uint8_t*>(data);
  const int me = team.me;
  int pow2 = 1;
  while (pow2 * 2 <= team.size()) pow2 *= 2;
  const int extra = team.size() - pow2;
  if (me >= pow2) {
    exchangeRanges(team[me - pow2], base, 0, count, 0, 0, elementSize, nullptr);
    exchangeRanges(team[me - pow2], base, 0, 0, 0, count, elementSize, nullptr);
    return;
  }
  if (me < extra) exchangeRanges(team[me + pow2], base, 0, 0, 0, count, elementSize, reduce);
  // Partners at distance d share every choice made at the larger distances, so the same range.
  size_t begin = 0, end = count;
  std::pair<size_t, size_t> wider[64];  // the range before each halving: no allocation per op
  int depth = 0;
  for (int distance = pow2 / 2; distance >= 1; distance /= 2) {
    const size_t middle = begin + (end - begin) / 2;
    const bool lowerHalf = (me & distance) == 0;
    const size_t keepBegin = lowerHalf ? begin : middle, keepEnd = lowerHalf ? middle : end;
    const size_t giveBegin = lowerHalf ? middle : begin, giveEnd = lowerHalf ? end : middle;
    exchangeRanges(team[me ^ distance], base, giveBegin, giveEnd, keepBegin, keepEnd, elementSize,
                   reduce);
    wider[depth++] = {begin, end};
    begin = keepBegin;
    end = keepEnd;
  }
  for (int distance = 1; distance < pow2; distance *= 2) {
    const auto [outerBegin, outerEnd] = wider[--depth];
    // We own [begin, end), one half of the outer range; the partner owns the other half.
    const size_t otherBegin = begin == outerBegin ? end : outerBegin;
    const size_t otherEnd = begin == outerBegin ? outerEnd : begin;
    exchangeRanges(team[me ^ distance], base, begin, end, otherBegin, otherEnd, elementSize,
                   nullptr);
    begin = outerBegin;
    end = outerEnd;
  }
  if (me < extra) exchangeRanges(team[me + pow2], base, 0, count, 0, 0, elementSize, nullptr);
}

}  // namespace c10d::inline v1
