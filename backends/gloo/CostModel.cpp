#include "backends/gloo/CostModel.hpp"

#include <algorithm>
#include <cmath>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v0::cost {
namespace {

constexpr AllreduceAlgorithm kAll[] = {AllreduceAlgorithm::RecursiveDoubling,
                                       AllreduceAlgorithm::HalvingDoubling,
                                       AllreduceAlgorithm::Ring};

// One message of `bytes`, cut into pieces that each pay the latency.
double message(double bytes, const LinkCost& link, size_t pieceBytes) {
  const double pieces = std::max(1.0, std::ceil(bytes / static_cast<double>(pieceBytes)));
  return pieces * link.latencyUs + bytes * link.usPerByte;
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

std::optional<AllreduceAlgorithm> algorithmNamed(std::string_view name) {
  for (AllreduceAlgorithm algorithm : kAll) {
    if (algorithmName(algorithm) == name) return algorithm;
  }
  return std::nullopt;
}

double allreduceCost(AllreduceAlgorithm algorithm, int members, size_t bytes, const LinkCost& link,
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

AllreduceAlgorithm cheapestAllreduce(int members, size_t bytes, const LinkCost& link,
                                     size_t pieceBytes) {
  AllreduceAlgorithm best = kAll[0];
  double bestCost = allreduceCost(best, members, bytes, link, pieceBytes);
  for (AllreduceAlgorithm algorithm : kAll) {
    const double cost = allreduceCost(algorithm, members, bytes, link, pieceBytes);
    if (cost < bestCost) {
      best = algorithm;
      bestCost = cost;
    }
  }
  return best;
}

std::string allreduceChoices(int members, const LinkCost& link, size_t pieceBytes) {
  std::string text;
  AllreduceAlgorithm current = cheapestAllreduce(members, 4, link, pieceBytes);
  size_t last = 4;
  for (size_t bytes = 16; bytes <= (size_t{64} << 20); bytes *= 4) {
    const AllreduceAlgorithm next = cheapestAllreduce(members, bytes, link, pieceBytes);
    if (next != current) {
      text += detail::concat(algorithmName(current), " up to ", sizeText(last), ", ");
      current = next;
    }
    last = bytes;
  }
  return text + std::string(algorithmName(current));
}

}  // namespace c10d::inline v0::cost
