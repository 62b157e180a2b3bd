#pragma once

// Runs a test body on N ranks, one forked process each, joined by a TCPStore (rank 0 hosts it)
// and a ProcessGroup of the given backend:
//
//   auto outcomes = c10d::test::runRanks({.backend = "gloo", .worldSize = 4},
//                                        [](c10d::test::RankEnv& env) { ... });
//   EXPECT_EQ(c10d::test::exitCodes(outcomes), std::vector<int>(4, 0))
//       << c10d::test::report(outcomes);
//
// Inside a rank, use c10d::test::check / checkEq / expectThrows, never gtest macros: the rank
// is not the gtest process. A failing check prints the rank, the call site, what was checked
// and expected vs actual to the rank's stderr, and makes the rank exit 1 (an uncaught exception:
// 2). The parent waits until a deadline (sooner once a rank has failed), SIGKILLs what is left,
// and reports each rank's exit code and captured output.
//
// Call runRanks from a plain test body: it forks, so the parent must not have started threads.
//
// The runner (forking, waiting, killing, reporting, the mpirun detection, store and group
// construction) is compiled once in tests/support/MultiProcess.cpp, the c10d_test_support
// library every test links; this header keeps only what tests call, and the templates.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Exception.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1::test {

// What a rank's body gets.
struct RankEnv {
  ProcessGroup& pg;
  Store& store;  // the job's TCPStore (keys under "c10d-test/" are the runner's)
  int rank;
  int size;
};

struct RunOptions {
  std::string backend = "gloo";
  int worldSize = 2;
  // The group's default operation timeout (ProcessGroupOptions::timeout), and the store's.
  std::chrono::milliseconds opTimeout = std::chrono::seconds(30);
  // The whole run: ranks still alive then are killed (exit code -1).
  std::chrono::milliseconds deadline = std::chrono::seconds(90);
  // Once a rank has failed, how long the others get to finish (they are probably stuck in a
  // collective that waits for the failed one).
  std::chrono::milliseconds graceAfterFailure = std::chrono::seconds(10);
  // Ranks the body kills on purpose (fault tests). The closing barriers do not wait for them;
  // when rank 0, the store's host, is among them, the survivors skip those barriers.
  std::vector<int> killedRanks;
};

// Exit codes of a rank.
inline constexpr int kRankPassed = 0;
inline constexpr int kRankFailedChecks = 1;
inline constexpr int kRankThrew = 2;
inline constexpr int kRankSetupFailed = 3;
inline constexpr int kRankKilledAtDeadline = -1;  // 128 + N: died of signal N

struct RankOutcome {
  int rank = -1;
  int exitCode = kRankKilledAtDeadline;
  std::string output;  // what the rank wrote to stdout and stderr
};

// ---- checks inside a rank ----

namespace detail {

template <typename T>
std::string show(const T& value);

template <typename T>
std::string showOne(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view> ||
                       std::is_same_v<T, const char*>) {
    return "'" + std::string(value) + "'";
  } else {
    std::ostringstream out;
    out << value;
    return out.str();
  }
}

template <typename T>
std::string show(const std::vector<T>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + show(values[i]);
  return text + "]";
}

template <typename T>
std::string show(const std::optional<T>& value) {
  return value ? show(*value) : "nullopt";
}

template <typename T>
std::string show(const T& value) {
  return showOne(value);
}

// The dynamic type of a library error, for messages.
std::string errorKind(const std::exception& e);

template <typename E>
std::string errorName() {
  if constexpr (std::is_same_v<E, InvalidArgument>) return "InvalidArgument";
  if constexpr (std::is_same_v<E, TimeoutError>) return "TimeoutError";
  if constexpr (std::is_same_v<E, BackendError>) return "BackendError";
  if constexpr (std::is_same_v<E, StoreError>) return "StoreError";
  if constexpr (std::is_same_v<E, RemoteError>) return "RemoteError";
  if constexpr (std::is_same_v<E, StateError>) return "StateError";
  if constexpr (std::is_same_v<E, Error>) return "c10d::Error";
  return "the expected error type";
}

}  // namespace detail

// This rank's number (-1 outside a rank), and how many of its checks failed so far.
int currentRank();
int failureCount();

// Records a failed check of this rank (printed to stderr, makes the rank exit 1).
void fail(const std::string& what, std::source_location where = std::source_location::current());

bool check(bool condition, const std::string& what,
           std::source_location where = std::source_location::current());

template <typename E, typename A>
bool checkEq(const E& expected, const A& actual, const std::string& what,
             std::source_location where = std::source_location::current()) {
  if (expected == actual) return true;
  fail(what + ": expected " + detail::show(expected) + ", got " + detail::show(actual), where);
  return false;
}

// Runs fn, which must throw ErrorType whose message contains each of needles. Returns the
// message ("" when the check failed).
template <typename ErrorType, typename Fn>
std::string expectThrows(Fn&& fn, const std::string& what,
                         std::initializer_list<std::string_view> needles = {},
                         std::source_location where = std::source_location::current()) {
  try {
    fn();
  } catch (const ErrorType& e) {
    std::string message = e.what();
    bool ok = true;
    for (std::string_view needle : needles) {
      if (message.find(needle) == std::string::npos) {
        fail(
            what + ": the error message does not mention '" + std::string(needle) + "': " + message,
            where);
        ok = false;
      }
    }
    return ok ? message : "";
  } catch (const std::exception& e) {
    fail(what + ": threw " + detail::errorKind(e) + " (" + e.what() + ") instead of " +
             detail::errorName<ErrorType>(),
         where);
    return "";
  }
  fail(what + ": did not throw (expected " + detail::errorName<ErrorType>() + ")", where);
  return "";
}

// All ranks wait here until every rank arrived (through the store; key is unique per use).
void storeBarrier(Store& store, const std::string& key, int size,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Entries of a /proc/self folder: open descriptors ("/proc/self/fd") or threads
// ("/proc/self/task"), for tests that check a process holds no more than before.
size_t procEntries(const char* folder);

// ---- the runner ----

// A loopback port that was free a moment ago (bound to port 0, read back, closed).
uint16_t freeLoopbackPort();

// The world size of the mpirun that started this process, or 0 when mpirun did not.
int mpirunWorldSize();

// Forks options.worldSize ranks running body, waits for them and returns their outcomes. With
// the "mpi" backend under mpirun, runs this process's rank instead (detail::runThisMpiRank).
std::vector<RankOutcome> runRanks(const RunOptions& options,
                                  const std::function<void(RankEnv&)>& body);

std::vector<int> exitCodes(const std::vector<RankOutcome>& outcomes);

// Every rank's exit code explained, and its output (the last maxChars characters of it).
std::string report(const std::vector<RankOutcome>& outcomes, size_t maxChars = 8000);

}  // namespace c10d::inline v1::test
