// The multi-process test harness (tests/support/MultiProcess.hpp): the runner (forking, waiting,
// killing, reporting, the mpirun detection, store and group construction) and the checks inside a
// rank, compiled once into the c10d_test_support library instead of into every test.

#include "tests/support/MultiProcess.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <source_location>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Exception.hpp"
#include "store/PrefixStore.hpp"
#include "store/TCPStore.hpp"

namespace c10d::inline v1::test {

// ---- checks inside a rank ----

namespace detail {

int& currentRank() {
  static int rank = -1;
  return rank;
}

std::atomic<int>& failureCount() {
  static std::atomic<int> count{0};
  return count;
}

constexpr int kMaxPrintedFailures = 40;

// The dynamic type of a library error, for messages.
std::string errorKind(const std::exception& e) {
  if (dynamic_cast<const InvalidArgument*>(&e)) return "InvalidArgument";
  if (dynamic_cast<const TimeoutError*>(&e)) return "TimeoutError";
  if (dynamic_cast<const BackendError*>(&e)) return "BackendError";
  if (dynamic_cast<const StoreError*>(&e)) return "StoreError";
  if (dynamic_cast<const RemoteError*>(&e)) return "RemoteError";
  if (dynamic_cast<const StateError*>(&e)) return "StateError";
  if (dynamic_cast<const Error*>(&e)) return "c10d::Error";
  return "std::exception";
}

}  // namespace detail

int currentRank() {
  return detail::currentRank();
}
int failureCount() {
  return detail::failureCount().load();
}

// Records a failed check of this rank (printed to stderr, makes the rank exit 1).
void fail(const std::string& what, std::source_location where) {
  int n = ++detail::failureCount();
  if (n <= detail::kMaxPrintedFailures) {
    std::fprintf(stderr, "[rank %d] FAILED (%s:%u): %s\n", detail::currentRank(), where.file_name(),
                 static_cast<unsigned>(where.line()), what.c_str());
  } else if (n == detail::kMaxPrintedFailures + 1) {
    std::fprintf(stderr, "[rank %d] further failures are not printed\n", detail::currentRank());
  }
  std::fflush(stderr);
}

bool check(bool condition, const std::string& what, std::source_location where) {
  if (!condition) fail(what, where);
  return condition;
}

// All ranks wait here until every rank arrived (through the store; key is unique per use).
void storeBarrier(Store& store, const std::string& key, int size,
                  std::chrono::milliseconds timeout) {
  if (store.add(key + "/count", 1) == size) store.setString(key + "/go", "1");
  store.wait({key + "/go"}, timeout);
}

// ---- the runner ----

size_t procEntries(const char* folder) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(folder)) ++n;
  return n;
}

uint16_t freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

namespace detail {

// The body of one forked rank; returns its exit code.
int runRank(const RunOptions& options, uint16_t port, int rank, FILE* log,
            const std::function<void(RankEnv&)>& body) {
#ifdef __linux__
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the test binary died (e.g. ctest's timeout): follow
#endif
  ::dup2(::fileno(log), STDOUT_FILENO);
  ::dup2(::fileno(log), STDERR_FILENO);
  currentRank() = rank;
  const int size = options.worldSize;
  std::shared_ptr<TCPStore> store;
  std::shared_ptr<ProcessGroup> pg;
  try {
    store =
        std::make_shared<TCPStore>("127.0.0.1", port,
                                   TCPStoreOptions{.isServer = rank == 0,
                                                   .numWorkers = size,
                                                   .timeout = std::max<std::chrono::milliseconds>(
                                                       options.opTimeout, std::chrono::seconds(30)),
                                                   .listenAddress = "127.0.0.1"});
    pg = std::make_shared<ProcessGroup>(
        store, rank, size,
        ProcessGroupOptions{.backend = options.backend, .timeout = options.opTimeout});
  } catch (const std::exception& e) {
    std::fprintf(
        stderr, "[rank %d] setup (TCPStore on port %u, ProcessGroup '%s') failed: %s: %s\n", rank,
        static_cast<unsigned>(port), options.backend.c_str(), errorKind(e).c_str(), e.what());
    return kRankSetupFailed;
  }
  try {
    RankEnv env{*pg, *store, rank, size};
    body(env);
    const auto& killed = options.killedRanks;
    const int leaving = size - static_cast<int>(killed.size());
    const bool storeLost = std::find(killed.begin(), killed.end(), 0) != killed.end();
    // Nobody tears its group down while another rank may still talk to it.
    if (!storeLost) storeBarrier(*store, "c10d-test/body-done", leaving);
    pg.reset();
    // Rank 0 hosts the store, so it leaves last: once every rank has counted itself out (a
    // rank's last store call has been answered then).
    if (!storeLost) store->add("c10d-test/finished", 1);
    if (rank == 0) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (store->add("c10d-test/finished", 0) < leaving) {
        C10D_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError,
                   "ranks did not finish within 30 s of destroying their groups");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] uncaught %s: %s\n", rank, errorKind(e).c_str(), e.what());
    std::fflush(stderr);
    return kRankThrew;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  return failureCount() == 0 ? kRankPassed : kRankFailedChecks;
}

std::string readAll(FILE* file) {
  std::string text;
  std::fflush(file);
  std::rewind(file);
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, got);
  return text;
}

}  // namespace detail

// The world size of the mpirun that started this process, or 0 when mpirun did not.
int mpirunWorldSize() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size != nullptr ? std::atoi(size) : 0;
}

namespace detail {

// The "mpi" backend's ranks are mpirun's processes, not forks: each runs body as its own rank,
// with a TCPStore at MASTER_ADDR:MASTER_PORT (tests/support/run_under_mpirun.sh) shared by every
// run of the process. Each process checks its own rank; mpirun's exit code and each process's gtest
// result carry the verdict. This rank's outcome goes in its slot, the others read 0.
std::vector<RankOutcome> runThisMpiRank(const RunOptions& options,
                                        const std::function<void(RankEnv&)>& body) {
  const int size = options.worldSize;
  const int rank = std::atoi(std::getenv("OMPI_COMM_WORLD_RANK"));
  std::vector<RankOutcome> outcomes(size);
  for (int r = 0; r < size; ++r) outcomes[r] = {r, kRankPassed, ""};
  RankOutcome& mine = outcomes[rank];
  currentRank() = rank;
  static std::shared_ptr<TCPStore> shared;
  static int runs = 0;
  const int failuresBefore = failureCount();
  try {
    if (!shared) {
      const char* host = std::getenv("MASTER_ADDR");
      const char* port = std::getenv("MASTER_PORT");
      C10D_CHECK(host != nullptr && port != nullptr, InvalidArgument,
                 "MPI conformance runs need MASTER_ADDR and MASTER_PORT "
                 "(tests/support/run_under_mpirun.sh)");
      shared = std::make_shared<TCPStore>(
          host, static_cast<uint16_t>(std::atoi(port)),
          TCPStoreOptions{
              .isServer = rank == 0, .numWorkers = size, .timeout = std::chrono::seconds(60)});
    }
    auto store = std::make_shared<PrefixStore>("run" + std::to_string(runs++), shared);
    auto pg = std::make_shared<ProcessGroup>(
        store, rank, size,
        ProcessGroupOptions{.backend = options.backend, .timeout = options.opTimeout});
    RankEnv env{*pg, *store, rank, size};
    body(env);
    storeBarrier(*store, "c10d-test/body-done", size);
    pg.reset();
  } catch (const std::exception& e) {
    mine.exitCode = kRankThrew;
    mine.output = c10d::detail::concat("[rank ", rank, "] uncaught ", errorKind(e), ": ", e.what());
    return outcomes;
  }
  if (failureCount() != failuresBefore) {
    mine.exitCode = kRankFailedChecks;
    mine.output = "(the failed checks are printed above)";
  }
  return outcomes;
}

}  // namespace detail

// Forks options.worldSize ranks running body, waits for them and returns their outcomes. With
// the "mpi" backend under mpirun, runs this process's rank instead (detail::runThisMpiRank).
std::vector<RankOutcome> runRanks(const RunOptions& options,
                                  const std::function<void(RankEnv&)>& body) {
  if (options.backend == "mpi" && mpirunWorldSize() > 0) {
    C10D_CHECK(mpirunWorldSize() == options.worldSize, InvalidArgument, "a ", options.worldSize,
               "-rank MPI case under an mpirun of ", mpirunWorldSize(), " processes");
    return detail::runThisMpiRank(options, body);
  }
  using Clock = std::chrono::steady_clock;
  const int size = options.worldSize;
  const uint16_t port = freeLoopbackPort();
  std::vector<RankOutcome> outcomes(size);
  std::vector<FILE*> logs(size, nullptr);
  std::vector<pid_t> pids(size, 0);
  std::fflush(stdout);  // or the children would flush the parent's buffered output again
  std::fflush(stderr);
  for (int r = 0; r < size; ++r) {
    outcomes[r].rank = r;
    logs[r] = std::tmpfile();
    if (logs[r] == nullptr) {
      outcomes[r].output = "runner: tmpfile() failed";
      continue;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = kRankThrew;
      try {
        code = detail::runRank(options, port, r, logs[r], body);
      } catch (...) {
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    if (pid < 0) {
      outcomes[r].output = "runner: fork() failed";
      continue;
    }
    pids[r] = pid;
  }

  auto deadline = Clock::now() + options.deadline;
  int running =
      static_cast<int>(std::count_if(pids.begin(), pids.end(), [](pid_t p) { return p != 0; }));
  while (running > 0 && Clock::now() < deadline) {
    bool reaped = false;
    for (int r = 0; r < size; ++r) {
      int status = 0;
      if (pids[r] != 0 && ::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        outcomes[r].exitCode = code;
        pids[r] = 0;
        --running;
        reaped = true;
        if (code != kRankPassed) {
          deadline = std::min(deadline, Clock::now() + options.graceAfterFailure);
        }
      }
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int r = 0; r < size; ++r) {
    if (pids[r] != 0) {
      ::kill(pids[r], SIGKILL);
      ::waitpid(pids[r], nullptr, 0);
      outcomes[r].exitCode = kRankKilledAtDeadline;
    }
    if (logs[r] != nullptr) {
      outcomes[r].output += detail::readAll(logs[r]);
      std::fclose(logs[r]);
    }
  }
  return outcomes;
}

std::vector<int> exitCodes(const std::vector<RankOutcome>& outcomes) {
  std::vector<int> codes;
  for (const RankOutcome& outcome : outcomes) codes.push_back(outcome.exitCode);
  return codes;
}

// Every rank's exit code explained, and its output (the last maxChars characters of it).
std::string report(const std::vector<RankOutcome>& outcomes, size_t maxChars) {
  std::ostringstream out;
  for (const RankOutcome& o : outcomes) {
    out << "rank " << o.rank << ": ";
    switch (o.exitCode) {
      case kRankPassed:
        out << "passed";
        break;
      case kRankFailedChecks:
        out << "failed checks (exit 1)";
        break;
      case kRankThrew:
        out << "uncaught exception (exit 2)";
        break;
      case kRankSetupFailed:
        out << "could not set up its store or process group (exit 3)";
        break;
      case kRankKilledAtDeadline:
        out << "still running at the deadline: killed (hang?)";
        break;
      default:
        out << (o.exitCode > 128 ? "died of signal " + std::to_string(o.exitCode - 128)
                                 : "exit " + std::to_string(o.exitCode));
    }
    out << "\n";
    if (!o.output.empty()) {
      std::string text = o.output;
      if (text.size() > maxChars) text = "...\n" + text.substr(text.size() - maxChars);
      out << text << (text.back() == '\n' ? "" : "\n");
    }
  }
  return out.str();
}

}  // namespace c10d::inline v1::test
