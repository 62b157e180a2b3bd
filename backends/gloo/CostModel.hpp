#pragma once

// Which allreduce algorithm a SyncMesh team runs, from the alpha-beta cost of its links: each
// message costs `latencyUs` plus `usPerByte` per byte, messages travel in pieces of at most
// `pieceBytes`, and an algorithm's cost is the sum over its steps (every member takes the same
// steps at once, so a step costs what one of its messages does). Pure functions: every rank that
// gives the same inputs gets the same choice.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace c10d::inline v0::cost {

struct LinkCost {
  double latencyUs = 0;  // alpha: a message's fixed cost, one way
  double usPerByte = 0;  // beta: the link's time per byte
};

enum class AllreduceAlgorithm {
  RecursiveDoubling,  // log2(p) steps, each the whole buffer: fewest messages
  HalvingDoubling,    // Rabenseifner: 2 log2(p) steps, 2(p-1)/p of the buffer in all
  Ring,               // 2(p-1) steps, 2(p-1)/p of the buffer in all: fewest bytes per message
};

// The algorithm's name as C10D_ALLREDUCE_ALGO spells it ("recursive_doubling", ...).
std::string_view algorithmName(AllreduceAlgorithm algorithm);
// The algorithm C10D_ALLREDUCE_ALGO names; nullopt for "auto" or empty.
std::optional<AllreduceAlgorithm> algorithmNamed(std::string_view name);

// Microseconds the algorithm takes for `bytes` over `members` members.
double allreduceCost(AllreduceAlgorithm algorithm, int members, size_t bytes, const LinkCost& link,
                     size_t pieceBytes);

// The cheapest algorithm; ties go to the one listed first above.
AllreduceAlgorithm cheapestAllreduce(int members, size_t bytes, const LinkCost& link,
                                     size_t pieceBytes);

// What cheapestAllreduce picks for members, size by size (powers of 4 from 4 B to 64 MiB), in
// words for the log: "recursive_doubling up to 16 KiB, halving_doubling up to 256 KiB, ring".
std::string allreduceChoices(int members, const LinkCost& link, size_t pieceBytes);

}  // namespace c10d::inline v0::cost
