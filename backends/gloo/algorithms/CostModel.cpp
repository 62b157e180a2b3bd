#include "backends/gloo/algorithms/CostModel.hpp"

#include <algorithm>
#include <cmath>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::cost {
namespace {

// Every algorithm of a kind (kAll), and those cheapest chooses among (kAuto), in the order ties
// go.
template <typename Algorithm>
struct Kind;
template <>
struct Kind<AllreduceAlgorithm> {
  static constexpr AllreduceAlgorithm kAll[] = {AllreduceAlgorithm::RecursiveDoubling,
                                                AllreduceAlgorithm::HalvingDoubling,
                                                AllreduceAlgorithm::Ring};
  static constexpr auto& kAuto = kAll;
};
template <>
struct Kind<BroadcastAlgorithm> {
  static constexpr BroadcastAlgorithm kAll[] = {BroadcastAlgorithm::Binomial,
                                                BroadcastAlgorithm::ScatterAllgather,
                                                BroadcastAlgorithm::Pipeline};
  // Not the scatter-allgather: where the model priced it lowest it ran slowest, as its ring makes
  // each rank wait on its neighbour while a tree's or chain's one-way flow overlaps calls
  // (measured: docs/performance-history.md, "Broadcast and allgather across hosts; unshaped
  // hosts against raw Open MPI").
  static constexpr BroadcastAlgorithm kAuto[] = {BroadcastAlgorithm::Binomial,
                                                 BroadcastAlgorithm::Pipeline};
};
template <>
struct Kind<AllgatherAlgorithm> {
  static constexpr AllgatherAlgorithm kAll[] = {AllgatherAlgorithm::Bruck,
                                                AllgatherAlgorithm::Ring};
  static constexpr auto& kAuto = kAll;
};

// One message of `bytes`, cut into pieces that each pay the latency.
double message(double bytes, const LinkCost& link, size_t pieceBytes) {
  const double pieces = std::max(1.0, std::ceil(bytes / static_cast<double>(pieceBytes)));
  return pieces * link.latencyUs + bytes * link.usPerByte;
}

// The smallest power of two >= members, and its log2.
std::pair<int, int> powerAbove(int members) {
  int pow2 = 1, steps = 0;
  while (pow2 < members) {
    pow2 *= 2;
    ++steps;
  }
  return {pow2, steps};
}

std::string sizeText(size_t bytes) {
  if (bytes >= (size_t{1} << 20)) return detail::concat(bytes >> 20, " MiB");
  if (bytes >= 1024) return detail::concat(bytes >> 10, " KiB");
  return detail::concat(bytes, " B");
}

}  // namespace

std::string_view algorithmName(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::RecursiveDoubling:
      return "recursive_doubling";
    case AllreduceAlgorithm::HalvingDoubling:
      return "halving_doubling";
    case AllreduceAlgorithm::Ring:
      return "ring";
  }
  return "?";
}

std::string_view algorithmName(BroadcastAlgorithm algorithm) {
  switch (algorithm) {
    case BroadcastAlgorithm::Binomial:
      return "binomial";
    case BroadcastAlgorithm::ScatterAllgather:
      return "scatter_allgather";
    case BroadcastAlgorithm::Pipeline:
      return "pipeline";
  }
  return "?";
}

std::string_view algorithmName(AllgatherAlgorithm algorithm) {
  switch (algorithm) {
    case AllgatherAlgorithm::Bruck:
      return "bruck";
    case AllgatherAlgorithm::Ring:
      return "ring";
  }
  return "?";
}

template <typename Algorithm>
std::optional<Algorithm> algorithmNamed(std::string_view name) {
  for (Algorithm algorithm : Kind<Algorithm>::kAll) {
    if (algorithmName(algorithm) == name) return algorithm;
  }
  return std::nullopt;
}

double cost(AllreduceAlgorithm algorithm, int members, size_t bytes, const LinkCost& link,
            size_t pieceBytes) {
  if (members < 2) return 0;
  const double n = static_cast<double>(bytes);
  int pow2 = 1, steps = 0;
  while (pow2 * 2 <= members) {
    pow2 *= 2;
    ++steps;
  }
  // Members above the power of two fold in first and get the result back at the end.
  const double fold = members > pow2 ? 2 * message(n, link, pieceBytes) : 0;
  switch (algorithm) {
    case AllreduceAlgorithm::RecursiveDoubling:
      return fold + steps * message(n, link, pieceBytes);
    case AllreduceAlgorithm::HalvingDoubling: {
      double total = fold;
      double part = n;
      for (int s = 0; s < steps; ++s) {
        part /= 2;
        total += 2 * message(part, link, pieceBytes);  // once halving, once doubling back
      }
      return total;
    }
    case AllreduceAlgorithm::Ring:
      return 2.0 * (members - 1) * message(n / members, link, pieceBytes);
  }
  return 0;
}

double cost(BroadcastAlgorithm algorithm, int members, size_t bytes, const LinkCost& link,
            size_t pieceBytes) {
  if (members < 2) return 0;
  const double n = static_cast<double>(bytes);
  const auto [pow2, steps] = powerAbove(members);
  switch (algorithm) {
    case BroadcastAlgorithm::Binomial:
      // The root sends all of it to each of its children in turn (a piece at a time).
      return steps * message(n, link, pieceBytes);
    case BroadcastAlgorithm::ScatterAllgather: {
      const size_t segment = (bytes + members - 1) / members;
      auto upTo = [&](int index) { return std::min(static_cast<size_t>(index) * segment, bytes); };
      double total = 0;
      // The root's sends: to the child `mask` on, the segments of that child's subtree.
      for (int mask = pow2 / 2; mask >= 1; mask /= 2) {
        if (mask < members) {
          total += message(static_cast<double>(upTo(std::min(2 * mask, members)) - upTo(mask)),
                           link, pieceBytes);
        }
      }
      return total + (members - 1) * message(static_cast<double>(segment), link, pieceBytes);
    }
    case BroadcastAlgorithm::Pipeline: {
      const size_t piece = std::min(pipelinePiece(members, bytes, link, pieceBytes), bytes);
      const double pieces = std::ceil(n / static_cast<double>(std::max<size_t>(piece, 1)));
      return (pieces + members - 2) * message(static_cast<double>(piece), link, pieceBytes);
    }
  }
  return 0;
}

double cost(AllgatherAlgorithm algorithm, int members, size_t bytes, const LinkCost& link,
            size_t pieceBytes) {
  if (members < 2) return 0;
  const double block = static_cast<double>(bytes);
  switch (algorithm) {
    case AllgatherAlgorithm::Bruck: {
      double total = 0;
      for (int distance = 1; distance < members; distance *= 2) {
        total += message(std::min(distance, members - distance) * block, link, pieceBytes);
      }
      return total;
    }
    case AllgatherAlgorithm::Ring:
      return (members - 1) * message(block, link, pieceBytes);
  }
  return 0;
}

size_t pipelinePiece(int members, size_t bytes, const LinkCost& link, size_t pieceBytes) {
  if (members <= 2 || link.latencyUs <= 0 || link.usPerByte <= 0) return pieceBytes;
  const double best =
      std::sqrt(static_cast<double>(bytes) * link.latencyUs / ((members - 2) * link.usPerByte));
  return std::clamp(static_cast<size_t>(best), std::min(kMinPipelinePiece, pieceBytes), pieceBytes);
}

template <typename Algorithm>
Algorithm cheapest(int members, size_t bytes, const LinkCost& link, size_t pieceBytes) {
  Algorithm best = Kind<Algorithm>::kAuto[0];
  double bestCost = cost(best, members, bytes, link, pieceBytes);
  for (Algorithm algorithm : Kind<Algorithm>::kAuto) {
    const double c = cost(algorithm, members, bytes, link, pieceBytes);
    if (c < bestCost) {
      best = algorithm;
      bestCost = c;
    }
  }
  return best;
}

template <typename Algorithm>
std::string choices(int members, const LinkCost& link, size_t pieceBytes) {
  std::string text;
  Algorithm current = cheapest<Algorithm>(members, 4, link, pieceBytes);
  size_t last = 4;
  for (size_t bytes = 16; bytes <= (size_t{64} << 20); bytes *= 4) {
    const Algorithm next = cheapest<Algorithm>(members, bytes, link, pieceBytes);
    if (next != current) {
      text += detail::concat(algorithmName(current), " up to ", sizeText(last), ", ");
      current = next;
    }
    last = bytes;
  }
  return text + std::string(algorithmName(current));
}

#define C10D_COST_KIND(Algorithm)                                                \
  template std::optional<Algorithm> algorithmNamed<Algorithm>(std::string_view); \
  template Algorithm cheapest<Algorithm>(int, size_t, const LinkCost&, size_t);  \
  template std::string choices<Algorithm>(int, const LinkCost&, size_t);
C10D_COST_KIND(AllreduceAlgorithm)
C10D_COST_KIND(BroadcastAlgorithm)
C10D_COST_KIND(AllgatherAlgorithm)
#undef C10D_COST_KIND

}  // namespace c10d::inline v1::cost
