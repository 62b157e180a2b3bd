// The flight recorder: the ring buffer itself, the dumps a timeout and a signal leave behind,
// and tools/flight_report.py naming the rank that fell behind from real dumps.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "c10d/FlightRecorder.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Records collective `sequence` as an allreduce of `elements` floats.
void queueAllreduce(FlightRecorder& recorder, uint64_t sequence, int64_t elements) {
  Tensor tensor = Tensor::zeros({elements}, ScalarType::Float32);
  Op op = Op::on(OpType::Allreduce, tensor, std::chrono::seconds(1));
  op.seq = sequence;
  recorder.queued(op);
}

std::string readFile(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// A fresh directory for one test's dumps, named in C10D_FLIGHT_RECORDER_DIR for the ranks the
// test forks.
struct DumpDirectory {
  fs::path path;
  DumpDirectory() {
    path = fs::temp_directory_path() /
           ("c10d-flight-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
    ::setenv("C10D_FLIGHT_RECORDER_DIR", path.c_str(), 1);
  }
  ~DumpDirectory() {
    ::unsetenv("C10D_FLIGHT_RECORDER_DIR");
    fs::remove_all(path);
  }
  static int& counter() {
    static int value = 0;
    return value;
  }
};

bool waitForFile(const fs::path& path, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!fs::exists(path)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

TEST(FlightRecorderTest, KeepsTheLastEntriesWithTheirStates) {
  FlightRecorder recorder("g", 1, 4, 3);
  for (uint64_t s = 0; s < 5; ++s) queueAllreduce(recorder, s, 8 + s);
  recorder.started(2);  // already overwritten by nothing: 2, 3, 4 are held
  recorder.finished(2, "");
  recorder.started(3);
  recorder.finished(3, "boom \"quoted\"");
  recorder.started(4);
  recorder.finished(0, "");  // long gone: ignored

  std::vector<FlightRecorder::Entry> entries = recorder.entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].op.seq, 2u);
  EXPECT_EQ(entries[0].state, FlightRecorder::State::Completed);
  EXPECT_EQ(entries[1].state, FlightRecorder::State::Failed);
  EXPECT_EQ(entries[1].error, "boom \"quoted\"");
  EXPECT_EQ(entries[2].state, FlightRecorder::State::Started);
  EXPECT_GT(entries[2].startedUs, 0);
  EXPECT_EQ(entries[2].finishedUs, 0);
  EXPECT_LE(entries[0].queuedUs, entries[0].startedUs);
  EXPECT_LE(entries[0].startedUs, entries[0].finishedUs);

  std::string json = recorder.toJson("on request");
  EXPECT_NE(json.find("\"group\":\"g\",\"rank\":1,\"size\":4,\"reason\":\"on request\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"seq\":4,\"op\":\"allreduce\",\"call\":\"allreduce float32[12] sum"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"error\":\"boom \\\"quoted\\\"\""), std::string::npos) << json;
  EXPECT_EQ(json.find("\"seq\":1,"), std::string::npos) << "entry 1 was overwritten: " << json;
}

TEST(FlightRecorderTest, SizeComesFromTheEnvironment) {
  const config::Settings settings;
  ::setenv("C10D_FLIGHT_RECORDER_SIZE", "0", 1);
  EXPECT_EQ(settings.integer("C10D_FLIGHT_RECORDER_SIZE"), 0);
  ::setenv("C10D_FLIGHT_RECORDER_SIZE", "lots", 1);
  EXPECT_THROW(settings.integer("C10D_FLIGHT_RECORDER_SIZE"), InvalidArgument);
  ::unsetenv("C10D_FLIGHT_RECORDER_SIZE");
  EXPECT_EQ(settings.integer("C10D_FLIGHT_RECORDER_SIZE"), 1000);
}

// Runs tools/flight_report.py on dumps (a dump or a folder): its exit status and output.
std::pair<int, std::string> runReport(const std::string& dumps) {
  std::string command =
      std::string("python3 ") + C10D_SOURCE_DIR + "/tools/flight_report.py " + dumps;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed: " + command};
  std::string report;
  char buffer[4096];
  while (size_t got = std::fread(buffer, 1, sizeof(buffer), pipe)) report.append(buffer, got);
  int status = ::pclose(pipe);
  return {WEXITSTATUS(status), report};
}

// Ranks 0 and 1 enter a fourth allreduce that rank 2 never calls: their timeout dumps their
// recorders, rank 2 dumps on request, and the report names rank 2 as behind.
TEST(FlightRecorderTest, TheReportNamesTheRankThatFellBehind) {
  DumpDirectory dumps;
  auto outcomes = test::runRanks(
      {.backend = "gloo", .worldSize = 3, .opTimeout = 2s, .graceAfterFailure = 20s},
      [&](test::RankEnv& env) {
        Tensor tensor = Tensor::zeros({16}, ScalarType::Float32);
        for (int i = 0; i < 3; ++i) env.pg.allreduce(tensor)->wait();
        fs::path mine =
            dumps.path / ("c10d_flight_default_rank" + std::to_string(env.rank) + ".json");
        if (env.rank == 2) {
          const FlightRecorder* recorder = env.pg.flightRecorder();
          test::check(recorder != nullptr && recorder->entries().size() == 3,
                      "flightRecorder() holds the three allreduces");
          test::checkEq(env.pg.dumpFlightRecorder(), mine.string(), "the dump's path");
          return;
        }
        test::expectThrows<TimeoutError>([&] { env.pg.allreduce(tensor)->wait(); },
                                         "the allreduce rank 2 skipped");
        test::check(waitForFile(mine, 5s), "the timeout dumped " + mine.string());
        std::string json = readFile(mine);
        test::check(json.find("\"state\":\"failed\"") != std::string::npos,
                    "the dump holds the failed allreduce: " + json);
      });
  ASSERT_EQ(test::exitCodes(outcomes), std::vector<int>(3, 0)) << test::report(outcomes);

  auto [status, report] = runReport(dumps.path.string());
  EXPECT_EQ(status, 1) << "the report must flag a rank behind:\n" << report;
  EXPECT_NE(report.find("group 'default': 3 of 3 ranks dumped"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2 is behind: its last collective is #2 allreduce float32[16] sum "
                        "(completed); ranks 0, 1 reached #3 allreduce float32[16] sum (failed)"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("rank 0 is behind"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 0 first failure: #3 allreduce float32[16] sum"), std::string::npos)
      << report;
}

// Point-to-point ops have their own numbering in the recorder: rank 0 dumps while its receive
// from rank 1 is still open, and the report says who waits on whom. They used to be missing from
// the recorder altogether.
TEST(FlightRecorderTest, TheReportNamesAnOpenPointToPointOp) {
  DumpDirectory dumps;
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 2}, [&](test::RankEnv& env) {
    Tensor tensor = Tensor::zeros({4}, ScalarType::Float32);
    env.pg.allreduce(tensor)->wait();
    if (env.rank == 0) {
      env.pg.send(tensor, 1, 3)->wait();
      auto pending = env.pg.recv(tensor, 1, 7);
      std::string path = env.pg.dumpFlightRecorder("on request");
      env.store.setString("dumped", "1");
      pending->wait();
      std::string json = readFile(path);
      test::check(json.find("{\"n\":0,\"op\":\"send\",\"peer\":1,\"tag\":3,\"dtype\":"
                            "\"float32\",\"numel\":4,\"state\":\"completed\"") != std::string::npos,
                  "the dump holds the completed send: " + json);
    } else {
      env.pg.recv(tensor, 0, 3)->wait();
      env.store.wait({"dumped"}, 30s);
      env.pg.send(tensor, 0, 7)->wait();
    }
  });
  ASSERT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);

  auto [status, report] = runReport((dumps.path / "c10d_flight_default_rank0.json").string());
  EXPECT_EQ(status, 1) << "the report must flag the open receive:\n" << report;
  EXPECT_NE(report.find("rank 0 waits in point-to-point #1: recv float32[4] from rank 1 tag 7"),
            std::string::npos)
      << report;
}

TEST(FlightRecorderTest, TheSignalDumpsEveryGroup) {
  DumpDirectory dumps;
  ::setenv("C10D_FLIGHT_RECORDER_SIGNAL", "USR1", 1);
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 2}, [&](test::RankEnv& env) {
    Tensor tensor = Tensor::zeros({4}, ScalarType::Float32);
    env.pg.allreduce(tensor)->wait();
    fs::path mine = dumps.path / ("c10d_flight_default_rank" + std::to_string(env.rank) + ".json");
    std::raise(SIGUSR1);
    test::check(waitForFile(mine, 5s), "SIGUSR1 dumped " + mine.string());
    std::string json = readFile(mine);
    test::check(json.find("\"reason\":\"signal SIGUSR1\"") != std::string::npos &&
                    json.find("\"state\":\"completed\"") != std::string::npos,
                "the dump says why and holds the completed allreduce: " + json);
  });
  ::unsetenv("C10D_FLIGHT_RECORDER_SIGNAL");
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
