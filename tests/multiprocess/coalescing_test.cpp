// ProcessGroup::startCoalescing / endCoalescing (torch's _coalescing_manager), through the public
// API at 2 and 4 ranks: a block of 50 allreduces equals 50 separate ones bit for bit and is one
// op on the wire; the held ops' Works follow the fused one; what cannot be coalesced fails on
// every rank, naming the op, and leaves the group usable.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

// Tensor i of rank r: float values that depend on both, with sizes 1..50 elements, so that a
// sum in another order would round differently.
std::vector<Tensor> inputs(int rank, int count) {
  std::vector<Tensor> tensors;
  for (int i = 0; i < count; ++i) {
    Tensor t = Tensor::empty({i + 1}, ScalarType::Float32);
    for (int j = 0; j <= i; ++j) t.data<float>()[j] = 0.1f * float(rank + 1) / float(j + 3) + i;
    tensors.push_back(t);
  }
  return tensors;
}

template <typename T>
Tensor full(int64_t n, T value) {
  Tensor t = Tensor::empty({n}, ScalarTypeOf<T>::value);
  for (int64_t i = 0; i < n; ++i) t.data<T>()[i] = value;
  return t;
}

bool sameBits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

uint64_t allreduceCalls(const ProcessGroup& pg, const char* name) {
  for (const OpTraffic& t : pg.traffic()) {
    if (t.op == name) return t.calls;
  }
  return 0;
}

void fiftyEqualFiftySeparate(int worldSize) {
  auto outcomes = test::runRanks({.worldSize = worldSize}, [](test::RankEnv& env) {
    std::vector<Tensor> separate = inputs(env.rank, 50);
    for (const Tensor& t : separate) env.pg.allreduce(t)->wait();

    std::vector<Tensor> coalesced = inputs(env.rank, 50);
    env.pg.resetTraffic();
    env.pg.startCoalescing();
    test::check(env.pg.isCoalescing(), "isCoalescing() inside the block");
    std::vector<std::shared_ptr<Work>> held;
    for (const Tensor& t : coalesced) held.push_back(env.pg.allreduce(t));
    test::expectThrows<StateError>([&] { held[0]->wait(); }, "wait on a held op",
                                   {"coalescing block", "endCoalescing"});
    std::shared_ptr<Work> fused = env.pg.endCoalescing();
    test::check(!env.pg.isCoalescing(), "isCoalescing() after the block");
    fused->wait();
    for (const auto& work : held) work->wait();  // they follow the fused op
    for (size_t i = 0; i < held.size(); ++i) {
      test::check(held[i]->isCompleted() && held[i]->isSuccess(), "held op " + std::to_string(i));
    }
    for (int i = 0; i < 50; ++i) {
      test::check(sameBits(separate[i], coalesced[i]),
                  "coalesced allreduce " + std::to_string(i) + " equals the separate one");
    }
    test::checkEq(uint64_t{1}, allreduceCalls(env.pg, "allreduce_coalesced"), "fused ops issued");
    test::checkEq(uint64_t{0}, allreduceCalls(env.pg, "allreduce"), "separate allreduces issued");

    // An empty block is a completed Work; a block of MAX ops reduces with MAX.
    env.pg.startCoalescing();
    test::check(env.pg.endCoalescing()->isCompleted(), "an empty block's Work is complete");
    Tensor a = full<float>(4, float(env.rank));
    Tensor b = full<float>(2, float(-env.rank));
    env.pg.startCoalescing();
    env.pg.allreduce(a, {.reduceOp = ReduceOp::MAX});
    env.pg.allreduce(b, {.reduceOp = ReduceOp::MAX});
    env.pg.endCoalescing()->wait();
    test::checkEq(float(env.size - 1), a.data<float>()[3], "max of a");
    test::checkEq(0.0f, b.data<float>()[1], "max of b");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(worldSize, 0)) << test::report(outcomes);
}

TEST(Coalescing, FiftyAllreducesEqualFiftySeparateAt2Ranks) {
  fiftyEqualFiftySeparate(2);
}
TEST(Coalescing, FiftyAllreducesEqualFiftySeparateAt4Ranks) {
  fiftyEqualFiftySeparate(4);
}

TEST(Coalescing, WhatCannotBeCoalescedFailsOnEveryRankAndTheBlockGoesOn) {
  auto outcomes = test::runRanks({.worldSize = 2}, [](test::RankEnv& env) {
    Tensor x = full<float>(3, 1.0f);
    test::expectThrows<InvalidArgument>([&] { env.pg.endCoalescing(); }, "end without start",
                                        {"no coalescing block is open"});
    auto other = env.pg.split(0);  // made before the block: making a group runs ops
    env.pg.startCoalescing();
    test::expectThrows<InvalidArgument>([&] { env.pg.startCoalescing(); }, "a nested start",
                                        {"still open", "do not nest"});
    env.pg.allreduce(x);
    test::expectThrows<InvalidArgument>([&] { env.pg.broadcast(x); }, "a broadcast inside",
                                        {"broadcast", "allreduces only"});
    Tensor ints = full<int64_t>(3, 1);
    test::expectThrows<InvalidArgument>([&] { env.pg.allreduce(ints); }, "another dtype",
                                        {"int64", "differs from the coalescing block's first"});
    test::expectThrows<InvalidArgument>([&] { env.pg.allreduce(x, {.reduceOp = ReduceOp::MAX}); },
                                        "another reduce op", {"max", "one reduce op"});
    test::expectThrows<InvalidArgument>([&] { other->allreduce(x); }, "another group's op",
                                        {"another group"});
    env.pg.endCoalescing()->wait();
    test::checkEq(2.0f, x.data<float>()[0], "the block's one accepted allreduce ran");
    Tensor y = full<float>(1, 1.0f);
    env.pg.allreduce(y)->wait();  // the group is usable after the refusals
    test::checkEq(2.0f, y.data<float>()[0], "an allreduce after the block");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0})) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
