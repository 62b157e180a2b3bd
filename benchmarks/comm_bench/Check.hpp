#pragma once

// --check: inputs whose every result is known, and the count of elements that came out wrong.

#include <cstdint>

#include "benchmarks/comm_bench/CommBench.hpp"

namespace commbench {

// Small integers chosen per op so that every result, reductions over all ranks included, is
// exactly representable in the dtype (no rounding, no overflow): the expected value can then be
// computed here independently and compared exactly. Values depend on rank and index, so a
// block landing at the wrong offset or from the wrong rank is caught.
class Pattern {
 public:
  Pattern(const OpInfo& op, const ReduceOp& redop, ScalarType dtype, int ranks);

  // Rank r's input element i.
  double value(int r, int64_t i) const;

  // The reduction of element i over every rank's input, as the dtype holds it.
  double reduced(int64_t i) const;

  // Fills count elements of data with rank r's input.
  void fill(void* data, int r, int64_t count) const;

  // Elements of data that differ from expected(i), i over [0, count). Defined where it is used,
  // in Check.cpp.
  template <typename Expected>
  int64_t countWrong(const void* data, int64_t count, Expected&& expected) const;

 private:
  ReduceOp redop_;
  ScalarType dtype_;
  int ranks_;
  bool reduces_;
  bool isBool_;
  int64_t modulus_ = 1;
  int64_t twos_ = 0;
};

// Sets up inputs (and poisons outputs) so that one run of the op gives a known result.
void prepare(const Case& c, const Pattern& pattern);

// Elements of this rank's result that differ from the independently computed expectation.
int64_t countWrong(const Case& c, const Pattern& pattern);

}  // namespace commbench
