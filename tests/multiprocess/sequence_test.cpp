// One sequence number per group: every place that names a collective by its number (the Op a
// backend gets, Work::op() and description(), ErrorContext::sequence, the flight recorder's
// entries and dumps, the C10D_DEBUG log lines and DETAIL check, the Gloo wire check) names the
// same call by the same number on every rank, in a group whose CPU and CUDA ops go to different
// backends (the CUDA one a test double: there may be no GPU here), with C10D_DEBUG off and at
// DETAIL, and in a subgroup.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "c10d/FlightRecorder.hpp"
#include "c10d/core/Cuda.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

// The group's CUDA backend here: it runs nothing, completes every op at once and keeps the
// number of each op it got.
class NumberingDouble : public Backend {
 public:
  explicit NumberingDouble(const BackendContext& context)
      : Backend("numbering", context.rank, context.size) {}
  bool handlesDevice(DeviceType type) const override { return type == DeviceType::CUDA; }

  std::shared_ptr<Work> start(const Op& op, const OpTensors&) override {
    seen().push_back(op.seq);
    auto work = std::make_shared<BackendWork>(std::string(), op.timeout);
    work->finish();
    return work;
  }
  static std::vector<uint64_t>& seen() {
    static std::vector<uint64_t> numbers;
    return numbers;
  }
};

// What a dump says of collective seq: its "call" text.
std::string callInDump(const std::string& json, uint64_t seq) {
  std::smatch match;
  std::regex entry("\\{\"seq\":" + std::to_string(seq) +
                   ",\"op\":\"[a-z_]+\",\"call\":\"([^\"]*)\"");
  return std::regex_search(json, match, entry) ? match[1].str() : std::string();
}

void runNumbering(const char* debug) {
  if (debug) ::setenv("C10D_DEBUG", debug, 1);
  detail::setCudaDeviceCountForTesting(1);
  static const bool registered = [] {
    registerBackend("numbering", [](const BackendContext& context) {
      return std::make_shared<NumberingDouble>(context);
    });
    return true;
  }();
  (void)registered;
  auto outcomes = test::runRanks(
      {.backend = "cpu:gloo,cuda:numbering", .worldSize = 2, .opTimeout = 20s},
      [](test::RankEnv& env) {
        ProcessGroup& pg = env.pg;
        Tensor cpu = Tensor::zeros({4}, ScalarType::Float32);
        static float deviceMemory[16];
        Tensor cuda = Tensor::fromBlob(deviceMemory, ScalarType::Float32, {4}, Device::cuda(0));
        Tensor cudaAll =
            Tensor::fromBlob(deviceMemory + 4, ScalarType::Float32, {8}, Device::cuda(0));
        std::vector<std::shared_ptr<Work>> works;
        works.push_back(pg.allreduce(cpu));                               // 0: gloo
        works.push_back(pg.allreduce(cuda));                              // 1: the double
        works.push_back(pg.broadcast(cpu, {.rootRank = 1}));              // 2: gloo
        works.push_back(pg.barrier());                                    // 3: gloo
        works.push_back(pg.allgatherIntoTensor(cudaAll, cuda));           // 4: the double
        works.push_back(pg.allreduce(cpu, {.reduceOp = ReduceOp::MAX}));  // 5: gloo
        for (size_t i = 0; i < works.size(); ++i) {
          works[i]->wait();
          test::checkEq(uint64_t{i}, works[i]->op().seq,
                        "Work::op().seq of op " + std::to_string(i));
          test::check(
              works[i]->description().find("seq " + std::to_string(i) + ")") != std::string::npos,
              "description of op " + std::to_string(i) + ": " + works[i]->description());
        }
        test::checkEq(std::vector<uint64_t>{1, 4}, NumberingDouble::seen(),
                      "the numbers the CUDA backend got");

        // Point-to-point ops are numbered apart: the collectives' numbers go on from 6.
        Tensor message = Tensor::zeros({2}, ScalarType::Int32);
        std::shared_ptr<Work> p2p = env.rank == 0 ? pg.send(message, 1) : pg.recv(message, 0);
        p2p->wait();
        test::checkEq(uint64_t{0}, p2p->op().seq, "the first point-to-point op's number");

        // A subgroup numbers its own collectives from 0; the parent's go on.
        std::shared_ptr<ProcessGroup> sub = pg.newGroup({0, 1});
        std::shared_ptr<Work> inSub = sub->allreduce(cpu);
        inSub->wait();
        test::checkEq(uint64_t{0}, inSub->op().seq, "the subgroup's first collective");
        std::shared_ptr<Work> next = pg.allreduce(cpu);
        next->wait();
        test::checkEq(uint64_t{6}, next->op().seq, "the parent's next collective");

        // The recorder holds 0..6 under those numbers, and its dump prints them.
        const FlightRecorder* recorder = pg.flightRecorder();
        test::check(recorder != nullptr, "the group has a flight recorder");
        std::vector<FlightRecorder::Entry> entries = recorder->entries();
        test::checkEq(size_t{7}, entries.size(), "recorded collectives");
        const std::vector<OpType> types{
            OpType::Allreduce,           OpType::Allreduce, OpType::Broadcast, OpType::Barrier,
            OpType::AllgatherIntoTensor, OpType::Allreduce, OpType::Allreduce};
        for (size_t i = 0; i < entries.size() && i < types.size(); ++i) {
          test::checkEq(uint64_t{i}, entries[i].op.seq, "recorded number " + std::to_string(i));
          test::check(entries[i].op.type == types[i], "recorded op " + std::to_string(i));
          test::check(entries[i].state == FlightRecorder::State::Completed,
                      "recorded op " + std::to_string(i) + " completed");
        }
        std::string dump = recorder->toJson("test");
        for (uint64_t i = 0; i < 7; ++i) {
          test::check(callInDump(dump, i).find("(#" + std::to_string(i) + ")") != std::string::npos,
                      "the dump's call of " + std::to_string(i) + ": " + dump);
        }
        // Every rank publishes its dump's calls; rank 0 compares them.
        std::string calls;
        for (uint64_t i = 0; i < 7; ++i) calls += callInDump(dump, i) + "\n";
        env.store.setString("numbering/calls/" + std::to_string(env.rank), calls);
        test::checkEq(env.store.getString("numbering/calls/0"),
                      env.store.getString("numbering/calls/1"), "both ranks' recorded calls");

        // A call the ranks make differently. Its number is in the error on both ranks: in the
        // DETAIL check's message (the group stays usable) or, without it, the wire check's
        // (the subgroup breaks, the parent does not).
        const bool detailed = std::getenv("C10D_DEBUG") != nullptr;
        Tensor mine = Tensor::zeros({env.rank == 0 ? 4 : 8}, ScalarType::Float32);
        ProcessGroup& where = detailed ? pg : *sub;
        const uint64_t number = detailed ? 7 : 1;
        try {
          where.allreduce(mine)->wait();
          test::fail("allreduces of 4 and 8 floats went through");
        } catch (const Error& e) {
          const std::string text = e.what();
          test::check(text.find("(#" + std::to_string(number) + ")") != std::string::npos,
                      "the mismatch's message names call #" + std::to_string(number) + ": " + text);
          test::checkEq(static_cast<int64_t>(number), e.context().sequence,
                        "ErrorContext::sequence of the mismatch");
        }
        if (detailed) {
          std::shared_ptr<Work> after = pg.allreduce(cpu);
          after->wait();
          test::checkEq(uint64_t{8}, after->op().seq, "the collective after the refused one");
        }
      });
  ::unsetenv("C10D_DEBUG");
  detail::setCudaDeviceCountForTesting(-1);
  ASSERT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
  if (debug) {
    // The log lines name the calls by the same numbers.
    for (const auto& outcome : outcomes) {
      EXPECT_NE(outcome.output.find("allreduce float32[4] sum (#0) completed"), std::string::npos)
          << outcome.output;
      EXPECT_NE(outcome.output.find("barrier (#3) completed"), std::string::npos) << outcome.output;
      EXPECT_NE(outcome.output.find("allreduce float32[4] max (#5) completed"), std::string::npos)
          << outcome.output;
    }
  }
}

TEST(SequenceTest, EveryPlaceNamesACallByTheSameNumber) {
  runNumbering(nullptr);
}

TEST(SequenceTest, EveryPlaceNamesACallByTheSameNumberWithTheDetailCheck) {
  runNumbering("DETAIL");
}

}  // namespace
}  // namespace c10d::inline v1
