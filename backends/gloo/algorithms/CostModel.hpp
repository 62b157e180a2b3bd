#pragma once

// Which algorithm a team of the mesh (MeshAlgorithms.hpp) runs for allreduce, broadcast and
// allgather, from the alpha-beta cost of its links: each message costs `latencyUs` plus `usPerByte`
// per byte, messages travel in pieces of at most `pieceBytes`, and an algorithm's cost is the sum
// over its steps (every member takes the same steps at once, so a step costs what one of its
// messages does). Pure functions: every rank that gives the same inputs gets the same choice.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "backends/gloo/transport/LinkCost.hpp"

namespace c10d::inline v1::cost {

enum class AllreduceAlgorithm {
  RecursiveDoubling,  // log2(p) steps, each the whole buffer: fewest messages
  HalvingDoubling,    // Rabenseifner: 2 log2(p) steps, 2(p-1)/p of the buffer in all
  Ring,               // 2(p-1) steps, 2(p-1)/p of the buffer in all: fewest bytes per message
};

enum class BroadcastAlgorithm {
  Binomial,          // ceil(log2 p) steps, the root sends the whole buffer to each child
  ScatterAllgather,  // van de Geijn: a binomial scatter, then a ring allgather: 2(p-1)/p of it
  Pipeline,          // a chain in pieces of pipelinePiece: the buffer once plus p-2 pieces
};

enum class AllgatherAlgorithm {
  Bruck,  // ceil(log2 p) steps, the blocks held so far doubling each step
  Ring,   // p-1 steps of one block
};

// The name the configuration spells ("recursive_doubling", "scatter_allgather", "bruck", ...).
std::string_view algorithmName(AllreduceAlgorithm algorithm);
std::string_view algorithmName(BroadcastAlgorithm algorithm);
std::string_view algorithmName(AllgatherAlgorithm algorithm);
// The algorithm of that kind a name spells; nullopt for "auto", empty or another kind's name.
template <typename Algorithm>
std::optional<Algorithm> algorithmNamed(std::string_view name);

// Microseconds the algorithm takes over `members` members. bytes: the whole buffer (allreduce,
// broadcast) or each member's block (allgather).
double cost(AllreduceAlgorithm algorithm, int members, size_t bytes, const LinkCost& link,
            size_t pieceBytes);
double cost(BroadcastAlgorithm algorithm, int members, size_t bytes, const LinkCost& link,
            size_t pieceBytes);
double cost(AllgatherAlgorithm algorithm, int members, size_t bytes, const LinkCost& link,
            size_t pieceBytes);

// The cheapest algorithm of its kind; ties go to the one listed first above. Broadcast chooses
// between the binomial tree and the pipeline only (the scatter-allgather is there to force).
template <typename Algorithm>
Algorithm cheapest(int members, size_t bytes, const LinkCost& link, size_t pieceBytes);

// What cheapest picks for members, size by size (powers of 4 from 4 B to 64 MiB), in words for
// the log: "recursive_doubling up to 16 KiB, halving_doubling up to 256 KiB, ring".
template <typename Algorithm>
std::string choices(int members, const LinkCost& link, size_t pieceBytes);

// The piece a pipelined broadcast of bytes over members sends at a time: sqrt(bytes * alpha /
// ((p-2) * beta)), which balances the p-2 pieces the chain takes to fill against each piece's
// latency, within [kMinPipelinePiece, pieceBytes]; pieceBytes where the link is free or unknown.
inline constexpr size_t kMinPipelinePiece = 16 * 1024;
size_t pipelinePiece(int members, size_t bytes, const LinkCost& link, size_t pieceBytes);

}  // namespace c10d::inline v1::cost
