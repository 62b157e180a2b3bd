// c10drun: starts the ranks of one node of a c10d job, the way torchrun does for
// torch.distributed, and stays in front of them until they are all gone.
//
//   c10drun --nproc-per-node N [--nnodes M --node-rank K --master-addr A --master-port P]
//           [--kill-grace-seconds S] [--elastic] [--max-restarts N] [--chaos-kill-every S]
//           [--chaos-stop-every S] [--chaos-stop-seconds D]
//           PROGRAM ARGS...
//
// The launcher of node 0 hosts the job's store (a TCPStoreServer at MASTER_PORT), as torchrun's
// agent does, so that the store outlives every rank; each launcher writes there how each of its
// ranks ended (c10d/elastic reads it to tell a dead rank from a slow one). The store also
// serves PyTorch's TCPStore clients, so torch.distributed programs (env://) rendezvous there as
// they do under torchrun.
//
// Every rank gets its own process group so that stopping a rank also stops whatever it
// spawned, and a parent-death signal so that no rank outlives a launcher killed with SIGKILL.
// Rank output goes through pipes and is re-emitted line by line with a "[rank R] " prefix, so
// lines of different ranks never interleave mid-line. The first rank to fail stops the job;
// its exit code becomes the launcher's.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "c10d/FlightRecorderSignal.hpp"
#include "c10d/core/Config.hpp"
#include "c10d/core/Json.hpp"
#include "c10d/elastic/LauncherKeys.hpp"
#include "store/TCPStore.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kUsageExitCode = 2;
constexpr int kRuntimeErrorExitCode = 1;
constexpr int kExecFailedExitCode = 127;

// Once every rank has exited, a process the rank left behind may still hold the pipe open.
// Waiting for it forever would hang the launcher after a job that succeeded, so its output is
// only waited for this long.
constexpr auto kDrainAfterExit = std::chrono::seconds(2);

// A rank writing without newlines (progress bars) must not make the launcher buffer without
// bound; past this size the partial line is emitted as if it were complete.
constexpr size_t kMaxPendingLine = 4 * 1024 * 1024;

// Caps the poll wait even when no deadline is pending, so that a wakeup lost for any reason
// costs at most this much latency instead of a hang.
constexpr int kMaxPollMs = 1000;

// A launcher of another node waits this long for node 0's store (node 0 may start later).
constexpr auto kStoreConnectTimeout = std::chrono::minutes(5);
// Each record of a rank's end may take this long: the supervision loop waits for it. Over a cut
// link the first record fails after it (and the launcher records no more), so the launcher ends
// this long after its last rank instead of hanging (tests/integration/netns/multi_host_test.sh cuts
// a link).
constexpr auto kStoreCallTimeout = std::chrono::seconds(5);

struct Options {
  int nproc_per_node = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free one (single node only).
  double kill_grace_seconds = 5.0;
  bool elastic = false;
  int max_restarts = 0;         // per rank; more than 0 implies elastic
  double chaos_kill_every = 0;  // seconds; 0: no chaos
  double chaos_stop_every = 0;  // seconds; 0: no stops
  double chaos_stop_seconds = 5;
  std::vector<std::string> command;
};

// Writes the whole buffer even across partial writes, EINTR and a non-blocking descriptor
// inherited from the caller. Gives up silently on other errors (e.g. EPIPE when the reader of
// the launcher's output went away): the ranks must keep running and be reaped regardless.
void writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written > 0) {
      data += written;
      size -= static_cast<size_t>(written);
    } else if (written < 0 && errno == EINTR) {
      continue;
    } else if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, kMaxPollMs);
    } else {
      return;
    }
  }
}

void writeAll(int fd, const std::string& text) {
  writeAll(fd, text.data(), text.size());
}

// One write per message so that it never ends up split around rank output.
void printMessage(const std::string& message) {
  writeAll(STDERR_FILENO, "c10drun: " + message + "\n");
}

[[noreturn]] void usageError(const std::string& message) {
  writeAll(STDERR_FILENO, "c10drun: error: " + message + "\nRun 'c10drun --help' for usage.\n");
  std::exit(kUsageExitCode);
}

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// CLI11 cannot describe PROGRAM in its usage line: it is no declared positional, because the
// parse must stop there (see parseOptions).
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* /*app*/, std::string name) const override {
    return "Usage: " + name + " [OPTIONS] PROGRAM [ARGS...]\n";
  }
};

Options parseOptions(int argc, char** argv) {
  Options options;
  CLI::App app{"Starts PROGRAM as the local ranks of a c10d job, like torchrun.", "c10drun"};
  app.formatter(std::make_shared<UsageFormatter>());
  app.footer(
      "Everything from PROGRAM on is passed to the ranks untouched. Each rank gets the\n"
      "environment torchrun gives its workers: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
      "GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_NAME, ROLE_WORLD_SIZE, MASTER_ADDR,\n"
      "MASTER_PORT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID,\n"
      "TORCHELASTIC_USE_AGENT_STORE=True, TORCHELASTIC_ERROR_FILE (shown when the rank fails),\n"
      "C10D_STORE_HOST=launcher (node 0's launcher hosts the store; every rank is a client)\n"
      "and, unless set, OMP_NUM_THREADS=1 with several ranks per node. Each rank's output is\n"
      "printed with a '[rank R] ' prefix.");
  // Parsing stops at the first positional argument (PROGRAM), so options of the program such as
  // --foo or even --nnodes reach it instead of being taken by the launcher.
  app.prefix_command();
  // Not ->required(): an unknown option earlier on ends the parse before it, and the error must
  // name that option rather than claim this one is missing.
  CLI::Option* nproc_option =
      app.add_option("--nproc-per-node,--nproc_per_node", options.nproc_per_node,
                     "Number of ranks to start on this node (required)");
  app.add_option("--nnodes", options.nnodes, "Number of nodes in the job")->capture_default_str();
  app.add_option("--node-rank,--node_rank", options.node_rank, "Index of this node in [0, nnodes)")
      ->capture_default_str();
  app.add_option("--master-addr,--master_addr", options.master_addr,
                 "Address of the node that hosts the store")
      ->capture_default_str();
  CLI::Option* port_option =
      app.add_option("--master-port,--master_port", options.master_port,
                     "Port of the store; picked free when omitted on a single node");
  app.add_option("--kill-grace-seconds", options.kill_grace_seconds,
                 "How long stopped ranks get after SIGTERM before SIGKILL")
      ->capture_default_str();
  app.add_flag("--elastic", options.elastic,
               "A rank that fails does not stop the others (programs that recover with "
               "c10d::elastic go on without it); the job succeeds when any rank exits with 0, "
               "and a summary lists every loss");
  app.add_option("--max-restarts,--max_restarts", options.max_restarts,
                 "Start a failed rank again, up to N times per rank, while the others keep "
                 "running (implies --elastic); the new process joins at their next step")
      ->capture_default_str();
  app.add_option("--chaos-kill-every", options.chaos_kill_every,
                 "For tests and demos: SIGKILL a random running rank every S seconds (implies "
                 "--elastic); the summary lists each kill");
  app.add_option("--chaos-stop-every", options.chaos_stop_every,
                 "For tests and demos: SIGSTOP a random running rank every S seconds and resume "
                 "it --chaos-stop-seconds later (implies --elastic): a rank that stalls without "
                 "dying");
  app.add_option("--chaos-stop-seconds", options.chaos_stop_seconds,
                 "How long --chaos-stop-every keeps a rank stopped")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) std::exit(app.exit(e));  // --help
    usageError(e.what());
  }

  options.command = app.remaining();
  // Unknown options before PROGRAM land in remaining() too; running "--bogus" as the program
  // would only produce a confusing exec error.
  if (!options.command.empty() && options.command.front().rfind('-', 0) == 0) {
    usageError("unknown option '" + options.command.front() + "'");
  }
  if (nproc_option->count() == 0) usageError("--nproc-per-node is required");
  if (options.command.empty()) usageError("missing PROGRAM to run");
  if (options.nproc_per_node < 1) {
    usageError("--nproc-per-node must be >= 1, got " + std::to_string(options.nproc_per_node));
  }
  if (options.nnodes < 1) {
    usageError("--nnodes must be >= 1, got " + std::to_string(options.nnodes));
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    usageError("--node-rank must be in [0, " + std::to_string(options.nnodes) + "), got " +
               std::to_string(options.node_rank));
  }
  if (static_cast<int64_t>(options.nproc_per_node) * options.nnodes > INT_MAX) {
    usageError("world size --nnodes * --nproc-per-node is too large");
  }
  if (port_option->count() > 0) {
    if (options.master_port < 1 || options.master_port > 65535) {
      usageError("--master-port must be in [1, 65535], got " + std::to_string(options.master_port));
    }
  } else if (options.nnodes > 1) {
    // Each node would pick a different free port; they could never meet.
    usageError("--master-port is required when --nnodes > 1");
  }
  if (!std::isfinite(options.kill_grace_seconds) || options.kill_grace_seconds < 0) {
    usageError("--kill-grace-seconds must be a finite number >= 0");
  }
  if (options.master_addr.empty()) usageError("--master-addr must not be empty");
  if (options.max_restarts < 0) {
    usageError("--max-restarts must be >= 0, got " + std::to_string(options.max_restarts));
  }
  if (options.max_restarts > 0) options.elastic = true;
  if (!std::isfinite(options.chaos_kill_every) || options.chaos_kill_every < 0) {
    usageError("--chaos-kill-every must be a finite number of seconds >= 0");
  }
  if (options.chaos_kill_every > 0) options.elastic = true;
  for (double seconds : {options.chaos_stop_every, options.chaos_stop_seconds}) {
    if (!std::isfinite(seconds) || seconds < 0) {
      usageError("--chaos-stop-every and --chaos-stop-seconds must be finite numbers >= 0");
    }
  }
  if (options.chaos_stop_every > 0) options.elastic = true;
  // Every rank would refuse a bad C10D_* value at its first group; say it once, before starting
  // any of them.
  try {
    c10d::config::Settings().checkAll();
  } catch (const c10d::InvalidArgument& e) {
    usageError(e.what());
  }
  return options;
}

// A rank's stdout and stderr are dup2'ed from pipe descriptors; if the launcher
// were started with 0, 1 or 2 closed, a pipe could land on one of them and dup2 would then
// leave it close-on-exec. Occupying them with /dev/null rules that out.
void ensureStandardDescriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      int opened = ::open("/dev/null", O_RDWR);
      if (opened >= 0 && opened != fd) {
        ::dup2(opened, fd);
        ::close(opened);
      }
    }
  }
}

// Signals reach the main loop through a self-pipe so that poll() wakes up for them; the signal
// number is the byte written. SIGCHLD only needs the wakeup, reaping happens in the loop.
int g_wake_write_fd = -1;

extern "C" void onSignal(int sig) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  // A full pipe already guarantees a wakeup, so a failed write loses nothing that matters.
  [[maybe_unused]] ssize_t ignored = ::write(g_wake_write_fd, &byte, 1);
  errno = saved_errno;
}

// Reads one rank stream and re-emits it line by line with the rank prefix.
class PrefixedStream {
 public:
  PrefixedStream(int read_fd, int target_fd, std::string prefix)
      : fd_(read_fd), target_fd_(target_fd), prefix_(std::move(prefix)) {}

  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }

  // One non-blocking read. Reading a single chunk per wakeup keeps a chatty rank from starving
  // the others. Closes the stream at end of file.
  void readOnce() {
    char buffer[64 * 1024];
    ssize_t got = ::read(fd_, buffer, sizeof(buffer));
    if (got > 0) {
      pending_.append(buffer, static_cast<size_t>(got));
      emitCompleteLines();
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
      close();
    }
  }

  // Takes what the pipe holds right now without waiting. Bounded, because a writer that
  // outlived its rank may keep the pipe full forever.
  void readAvailable() {
    for (int chunk = 0; chunk < 64 && open(); ++chunk) {
      char buffer[64 * 1024];
      ssize_t got = ::read(fd_, buffer, sizeof(buffer));
      if (got > 0) {
        pending_.append(buffer, static_cast<size_t>(got));
        emitCompleteLines();
      } else if (got < 0 && errno == EINTR) {
        continue;
      } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        close();
      }
    }
  }

  // Used when the launcher stops waiting for a writer that outlived its rank.
  void drainAndClose() {
    readAvailable();
    if (open()) close();
  }

 private:
  void emitCompleteLines() {
    size_t last_newline = pending_.rfind('\n');
    if (last_newline == std::string::npos) {
      if (pending_.size() >= kMaxPendingLine) emit(pending_.size());
      return;
    }
    emit(last_newline + 1);
  }

  // Emits pending_[0, length) as prefixed lines in a single write, adding a final newline when
  // the chunk does not end with one.
  void emit(size_t length) {
    std::string out;
    out.reserve(length + prefix_.size() * 8 + 1);
    size_t start = 0;
    while (start < length) {
      size_t newline = pending_.find('\n', start);
      size_t end = (newline == std::string::npos || newline >= length) ? length : newline;
      out += prefix_;
      out.append(pending_, start, end - start);
      out += '\n';
      start = end + 1;
    }
    pending_.erase(0, length);
    writeAll(target_fd_, out);
  }

  void close() {
    if (!pending_.empty()) emit(pending_.size());
    ::close(fd_);
    fd_ = -1;
  }

  int fd_;
  int target_fd_;
  std::string prefix_;
  std::string pending_;
};

struct Rank {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;  // Also the id of the rank's process group.
  bool running = false;
  int restarts = 0;  // processes started for this rank after the first
  std::chrono::steady_clock::time_point resume_at{};  // --chaos-stop-every: stopped until then
  PrefixedStream out{-1, STDOUT_FILENO, ""};
  PrefixedStream err{-1, STDERR_FILENO, ""};
};

// The message of a rank's error file (TORCHELASTIC_ERROR_FILE), in either form torchrun reads:
// {"message": {"message": "...", ...}} or {"message": "...", ...}. Empty when there is none.
std::string errorFileMessage(const std::string& path) {
  std::ifstream file(path);
  std::string json((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  size_t at = json.find("\"message\"");
  if (at == std::string::npos) return "";
  at = json.find_first_not_of(" \t\r\n:", at + 9);
  if (at != std::string::npos && json[at] == '{') {
    at = json.find("\"message\"", at);
    if (at == std::string::npos) return "";
    at = json.find_first_not_of(" \t\r\n:", at + 9);
  }
  if (at == std::string::npos || json[at] != '"') return "";
  return c10d::detail::readJsonString(json, at);
}

class Launcher {
 public:
  explicit Launcher(Options options) : options_(std::move(options)) {}

  int run() {
    ensureStandardDescriptors();
    started_ = Clock::now();
    if (!hostStore()) return kRuntimeErrorExitCode;
    if (!installSignalHandlers()) return kRuntimeErrorExitCode;
    if (!makeErrorFileDirectory()) return kRuntimeErrorExitCode;
    // A rank sharing the terminal but not its foreground process group would be stopped by
    // SIGTTIN on its first read and hang the job; reading EOF is the better failure.
    if (::isatty(STDIN_FILENO)) stdin_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

    ranks_.resize(static_cast<size_t>(options_.nproc_per_node));
    for (int r = 0; r < options_.nproc_per_node; ++r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
      rank.local_rank = r;
      rank.global_rank = options_.node_rank * options_.nproc_per_node + r;
      if (options_.elastic) recordLostWithLauncher(rank);
      if (!spawn(rank)) {
        failure_code_ = kRuntimeErrorExitCode;
        beginStopping(SIGTERM);
        break;
      }
    }
    loop();
    removeErrorFiles();
    if (stdin_fd_ >= 0) ::close(stdin_fd_);
    if (options_.elastic) printSummary();
    if (options_.elastic && any_exited_zero_ && forwarded_signal_ == 0) return 0;
    if (failure_code_) return *failure_code_;
    if (forwarded_signal_ != 0 && !all_exited_zero_) return 128 + forwarded_signal_;
    return 0;
  }

 private:
  bool installSignalHandlers() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      printMessage(std::string("error: pipe: ") + std::strerror(errno));
      return false;
    }
    wake_read_fd_ = fds[0];
    g_wake_write_fd = fds[1];
    struct sigaction action {};
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int sig : {SIGINT, SIGTERM}) ::sigaction(sig, &action, &saved_actions_[sig]);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    ::sigaction(SIGCHLD, &action, &saved_actions_[SIGCHLD]);
    // A launcher whose output reader went away must keep supervising its ranks.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, &saved_actions_[SIGPIPE]);
    return true;
  }

  // Everything the child needs is prepared here, before fork, so that the child neither
  // allocates nor touches shared state between fork and exec.
  bool spawn(Rank& rank) {
    if (options_.elastic && store_) {
      try {
        store_->add(c10d::elastic::launcherStartsKey(rank.global_rank), 1);
      } catch (const std::exception& e) {
        printMessage("cannot count the start of rank " + std::to_string(rank.global_rank) +
                     " in the store: " + e.what());
        store_.reset();
      }
    }
    std::vector<std::string> env_strings = rankEnvironment(rank);
    std::vector<char*> envp;
    for (std::string& entry : env_strings) envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::vector<char*> argv;
    for (std::string& arg : options_.command) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::string exec_error = "c10drun: cannot run '" + options_.command.front() + "': ";

    int out_pipe[2];
    int err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
      printMessage(std::string("error: pipe: ") + std::strerror(errno));
      return false;
    }
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      printMessage(std::string("error: pipe: ") + std::strerror(errno));
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
      return false;
    }

    pid_t launcher_pid = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
      execRank(argv.data(), envp.data(), out_pipe[1], err_pipe[1], launcher_pid, exec_error);
    }
    int fork_errno = errno;
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    if (pid < 0) {
      ::close(out_pipe[0]);
      ::close(err_pipe[0]);
      printMessage(std::string("error: fork: ") + std::strerror(fork_errno));
      return false;
    }
    // Also done here because a signal forwarded before the child ran its own setpgid would
    // otherwise miss it. EACCES once the child has exec'ed is expected and harmless.
    ::setpgid(pid, pid);
    ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
    std::string prefix = "[rank " + std::to_string(rank.global_rank) + "] ";
    rank.out = PrefixedStream(out_pipe[0], STDOUT_FILENO, prefix);
    rank.err = PrefixedStream(err_pipe[0], STDERR_FILENO, prefix);
    rank.pid = pid;
    rank.running = true;
    ++running_count_;
    return true;
  }

  std::vector<std::string> rankEnvironment(const Rank& rank) const {
    const std::vector<std::pair<std::string, std::string>> assigned = {
        {"RANK", std::to_string(rank.global_rank)},
        {"LOCAL_RANK", std::to_string(rank.local_rank)},
        {"WORLD_SIZE", std::to_string(options_.nnodes * options_.nproc_per_node)},
        {"LOCAL_WORLD_SIZE", std::to_string(options_.nproc_per_node)},
        {"GROUP_RANK", std::to_string(options_.node_rank)},
        {"GROUP_WORLD_SIZE", std::to_string(options_.nnodes)},
        {"ROLE_RANK", std::to_string(rank.global_rank)},
        {"ROLE_NAME", "default"},
        {"ROLE_WORLD_SIZE", std::to_string(options_.nnodes * options_.nproc_per_node)},
        {"MASTER_ADDR", options_.master_addr},
        {"MASTER_PORT", std::to_string(options_.master_port)},
        {"TORCHELASTIC_RESTART_COUNT", std::to_string(rank.restarts)},
        {"TORCHELASTIC_MAX_RESTARTS", std::to_string(options_.max_restarts)},
        {"TORCHELASTIC_RUN_ID", "none"},
        // As torchrun's agent: the launcher hosts the store at MASTER_PORT, so a torch.distributed
        // program's env:// joins it as a client (the server speaks PyTorch's protocol as well).
        {"TORCHELASTIC_USE_AGENT_STORE", "True"},
        {"TORCHELASTIC_ERROR_FILE", errorFile(rank)},
        {"C10D_STORE_HOST", "launcher"},
    };
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      std::string_view text(*entry);
      std::string_view name = text.substr(0, text.find('='));
      bool overridden = std::any_of(assigned.begin(), assigned.end(),
                                    [&](const auto& kv) { return kv.first == name; });
      if (!overridden) env.emplace_back(text);
    }
    for (const auto& [name, value] : assigned) env.push_back(name + "=" + value);
    // As torchrun: several ranks on a node each running a full-width OpenMP pool would
    // oversubscribe its cores, so each gets one thread unless the user chose.
    if (options_.nproc_per_node > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
      env.emplace_back("OMP_NUM_THREADS=1");
    }
    return env;
  }

  [[noreturn]] void execRank(char** argv, char** envp, int out_fd, int err_fd, pid_t launcher_pid,
                             const std::string& exec_error) {
    // The program must see the dispositions c10drun itself was started with, not the
    // launcher's handlers (reset by exec anyway) or its SIGPIPE ignore (kept by exec).
    for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) {
      ::sigaction(sig, &saved_actions_[sig], nullptr);
    }
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The launcher may have died before prctl took effect; then nobody would stop this rank.
    if (::getppid() != launcher_pid) ::_exit(kExecFailedExitCode);
    if (stdin_fd_ >= 0) ::dup2(stdin_fd_, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execvpe(argv[0], argv, envp);
    int exec_errno = errno;
    char message[1024];
    const char* reason = std::strerror(exec_errno);
    size_t length = std::min(exec_error.size(), sizeof(message) - 1);
    std::memcpy(message, exec_error.data(), length);
    size_t reason_length = std::min(std::strlen(reason), sizeof(message) - 1 - length);
    std::memcpy(message + length, reason, reason_length);
    length += reason_length;
    if (length < sizeof(message)) message[length++] = '\n';
    writeAll(STDERR_FILENO, message, length);
    ::_exit(kExecFailedExitCode);
  }

  void loop() {
    while (true) {
      reapChildren();
      handleSignals();
      Clock::time_point now = Clock::now();
      if (options_.chaos_kill_every > 0 && !stopping_) chaos(now);
      if (options_.chaos_stop_every > 0) chaosStop(now);
      if (stopping_ && !killed_ && now >= kill_deadline_) killRemaining(/*after_grace=*/true);

      int open_streams = 0;
      for (const Rank& rank : ranks_) open_streams += rank.out.open() + rank.err.open();
      if (running_count_ == 0) {
        if (open_streams == 0) break;
        if (!drain_deadline_) {
          // Leftover processes of a stopped job still get their grace period before SIGKILL.
          Clock::time_point base = stopping_ && !killed_ ? std::max(now, kill_deadline_) : now;
          drain_deadline_ = base + kDrainAfterExit;
        }
        if (now >= *drain_deadline_) {
          for (Rank& rank : ranks_) {
            rank.out.drainAndClose();
            rank.err.drainAndClose();
          }
          break;
        }
      }

      std::vector<pollfd> fds;
      std::vector<PrefixedStream*> streams;  // streams[i] is polled by fds[i + 1].
      fds.push_back({wake_read_fd_, POLLIN, 0});
      for (Rank& rank : ranks_) {
        for (PrefixedStream* stream : {&rank.out, &rank.err}) {
          if (!stream->open()) continue;
          fds.push_back({stream->fd(), POLLIN, 0});
          streams.push_back(stream);
        }
      }
      // On failure every revents stays 0; the loop goes on supervising, slowed by the timeout.
      if (::poll(fds.data(), fds.size(), pollTimeoutMs(now)) < 0 && errno != EINTR) {
        printMessage(std::string("error: poll: ") + std::strerror(errno));
      }
      for (size_t i = 0; i < streams.size(); ++i) {
        if (fds[i + 1].revents != 0) streams[i]->readOnce();
      }
    }
  }

  // --chaos-kill-every: SIGKILLs a random running rank once per period (the rank alone: what it
  // spawned is left, as when a rank's process dies by itself).
  void chaos(Clock::time_point now) {
    Rank* victim = chaosVictim(now, options_.chaos_kill_every, next_chaos_, /*skipStopped=*/false);
    if (victim != nullptr) chaosSignal(*victim, SIGKILL, "SIGKILL");
  }

  // --chaos-stop-every: SIGSTOPs a random running rank once per period, and SIGCONTs it
  // --chaos-stop-seconds later (at once when the job stops, so that it can end).
  void chaosStop(Clock::time_point now) {
    for (Rank& rank : ranks_) {
      if (rank.resume_at == Clock::time_point{} || (now < rank.resume_at && !stopping_)) continue;
      rank.resume_at = {};
      if (rank.running) chaosSignal(rank, SIGCONT, "SIGCONT");
    }
    if (stopping_) return;
    Rank* victim = chaosVictim(now, options_.chaos_stop_every, next_stop_, /*skipStopped=*/true);
    if (victim == nullptr || !chaosSignal(*victim, SIGSTOP, "SIGSTOP")) return;
    victim->resume_at = now + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(options_.chaos_stop_seconds));
  }

  // Once per period of `seconds` (next: when the next one is due), a random running rank (not a
  // stopped one, with skipStopped); none before then, or when fewer than 2 qualify: the last
  // rank is left to go on.
  Rank* chaosVictim(Clock::time_point now, double seconds, Clock::time_point& next,
                    bool skipStopped) {
    const auto period =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    if (next == Clock::time_point{}) next = now + period;
    if (now < next) return nullptr;
    next = now + period;
    std::vector<Rank*> candidates;
    for (Rank& rank : ranks_) {
      if (rank.running && (!skipStopped || rank.resume_at == Clock::time_point{})) {
        candidates.push_back(&rank);
      }
    }
    if (candidates.size() < 2) return nullptr;
    return candidates[chaos_random_() % candidates.size()];
  }

  bool chaosSignal(Rank& rank, int sig, const char* name) {
    if (::kill(rank.pid, sig) != 0) return false;
    events_.push_back({rank.global_rank, secondsSinceStart(), std::string("chaos: sent ") + name});
    printMessage(std::string("chaos: ") + name + " to rank " + std::to_string(rank.global_rank));
    return true;
  }

  int pollTimeoutMs(Clock::time_point now) const {
    std::optional<Clock::time_point> deadline;
    // Unset time points (the epoch) mean "nothing due".
    auto earliest = [&](Clock::time_point at) {
      if (at != Clock::time_point{} && (!deadline || at < *deadline)) deadline = at;
    };
    if (stopping_ && !killed_) deadline = kill_deadline_;
    if (drain_deadline_) earliest(*drain_deadline_);
    if (options_.chaos_kill_every > 0) earliest(next_chaos_);
    if (options_.chaos_stop_every > 0) {
      earliest(next_stop_);
      for (const Rank& rank : ranks_) earliest(rank.resume_at);
    }
    if (!deadline) return kMaxPollMs;
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count();
    return static_cast<int>(std::clamp<int64_t>(wait, 0, kMaxPollMs));
  }

  void reapChildren() {
    while (true) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) return;  // 0: none exited yet; ECHILD: no children left.
      auto it = std::find_if(ranks_.begin(), ranks_.end(),
                             [&](const Rank& rank) { return rank.pid == pid && rank.running; });
      if (it == ranks_.end()) continue;
      it->running = false;
      --running_count_;
      onRankExit(*it, status);
    }
  }

  void onRankExit(Rank& rank, int status) {
    bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    std::string how = WIFSIGNALED(status) ? "killed by signal " + signalName(WTERMSIG(status))
                                          : "exited with code " + std::to_string(code);
    recordExit(rank, how);
    if (!failed) {
      any_exited_zero_ = true;
      return;
    }
    // The rank's last words (often the reason it failed) are already in its pipes; printing
    // them first keeps the log in cause-then-effect order.
    rank.out.readAvailable();
    rank.err.readAvailable();
    all_exited_zero_ = false;
    // Ranks dying after the job was told to stop are a consequence, not news.
    if (stopping_) return;
    std::string error = errorFileMessage(errorFile(rank));
    if (!failure_code_) failure_code_ = code;
    if (options_.elastic) {
      events_.push_back({rank.global_rank, secondsSinceStart(),
                         "lost: " + how + (error.empty() ? "" : ": " + error)});
      printMessage("rank " + std::to_string(rank.global_rank) + " " + how +
                   (error.empty() ? "" : ": " + error) + "; " + std::to_string(running_count_) +
                   " rank(s) go on (--elastic)");
      // Once none of this node's other ranks runs and one finished, the job is over here: a
      // restart would find no member to join and fail again, until the restarts ran out.
      const bool jobOver = running_count_ == 0 && any_exited_zero_;
      if (rank.restarts < options_.max_restarts && !jobOver) restart(rank);
      return;
    }
    printMessage("rank " + std::to_string(rank.global_rank) + " " + how +
                 (error.empty() ? "" : ": " + error));
    askForFlightRecorderDumps();
    // The other ranks would block forever in collectives waiting for the dead one.
    beginStopping(SIGTERM);
  }

  // Node 0 hosts the job's store at MASTER_PORT (any free port when none was given: bound here,
  // so no other process can take it between a pick and a bind). Every launcher keeps a client
  // of it for the ranks' exit records. False after printing why when it cannot.
  bool hostStore() {
    try {
      if (options_.node_rank == 0) {
        c10d::TCPStoreServerOptions server;
        server.port = static_cast<uint16_t>(options_.master_port);
        store_server_ = std::make_unique<c10d::TCPStoreServer>(server);
        options_.master_port = store_server_->port();
      }
      c10d::TCPStoreOptions client;
      client.timeout = kStoreConnectTimeout;
      store_ = std::make_unique<c10d::TCPStore>(
          options_.node_rank == 0 ? "127.0.0.1" : options_.master_addr,
          static_cast<uint16_t>(options_.master_port), client);
      store_->setTimeout(kStoreCallTimeout);
      return true;
    } catch (const std::exception& e) {
      printMessage(std::string("error: ") +
                   (options_.node_rank == 0 ? "cannot host the job's store: "
                                            : "cannot reach node 0's store: ") +
                   e.what());
      return false;
    }
  }

  // Starts the rank's process again; it joins the others at their next step (c10d/elastic).
  void restart(Rank& rank) {
    rank.out.drainAndClose();
    rank.err.drainAndClose();
    ++rank.restarts;
    rank.resume_at = {};       // a stopped process that was killed: its successor runs
    if (!spawn(rank)) return;  // spawn said why; the others go on
    ++restarts_;
    events_.push_back({rank.global_rank, secondsSinceStart(),
                       "restarted (" + std::to_string(rank.restarts) + " of " +
                           std::to_string(options_.max_restarts) + "), pid " +
                           std::to_string(rank.pid)});
    printMessage("rank " + std::to_string(rank.global_rank) + " restarted (" +
                 std::to_string(rank.restarts) + " of " + std::to_string(options_.max_restarts) +
                 ")");
  }

  // A launcher started again on a node whose last launcher was lost: the processes that one
  // started died with it (PR_SET_PDEATHSIG) and nobody recorded their ends. Recording them now
  // makes this launcher's ranks restarts, which join the members instead of claiming to be
  // the first generation.
  void recordLostWithLauncher(const Rank& rank) {
    if (!store_) return;
    try {
      const int64_t startedBefore =
          store_->add(c10d::elastic::launcherStartsKey(rank.global_rank), 0);
      int64_t ended = store_->add(c10d::elastic::launcherExitsKey(rank.global_rank), 0);
      if (ended >= startedBefore) return;
      for (; ended < startedBefore; ++ended) {
        c10d::elastic::recordLauncherEnd(*store_, rank.global_rank);
        store_->set(c10d::elastic::launcherExitKey(rank.global_rank, ended),
                    c10d::toBytes("lost with its node's previous launcher"));
      }
      events_.push_back({rank.global_rank, secondsSinceStart(),
                         "started as a rejoin: its previous process was lost with this node's "
                         "previous launcher"});
    } catch (const std::exception& e) {
      printMessage("cannot read rank " + std::to_string(rank.global_rank) +
                   "'s records in the store: " + e.what());
      store_.reset();
    }
  }

  // How the rank ended, where survivors that re-form their group look, before any restart of
  // it reads its incarnation there (c10d/elastic/LauncherKeys.hpp).
  void recordExit(const Rank& rank, const std::string& how) {
    if (!store_) return;
    try {
      const int64_t ended = c10d::elastic::recordLauncherEnd(*store_, rank.global_rank);
      store_->set(c10d::elastic::launcherExitKey(rank.global_rank, ended),
                  c10d::toBytes(how + " at " + std::to_string(secondsSinceStart()) + " s"));
    } catch (const std::exception& e) {
      printMessage("cannot record the exit of rank " + std::to_string(rank.global_rank) +
                   " in the store: " + e.what());
      store_.reset();  // a broken connection stays broken; say it once
    }
  }

  double secondsSinceStart() const {
    return std::chrono::duration<double>(Clock::now() - started_).count();
  }

  void printSummary() const {
    const size_t lost = std::count_if(events_.begin(), events_.end(),
                                      [](const Event& e) { return e.what.rfind("lost", 0) == 0; });
    std::string text = "summary: " + std::to_string(ranks_.size()) + " rank(s) started, " +
                       std::to_string(lost) + " lost, " + std::to_string(restarts_) + " restarted";
    for (const Event& event : events_) {
      char when[32];
      std::snprintf(when, sizeof(when), "%.3f", event.seconds);
      text +=
          "\n  " + std::string(when) + " s: rank " + std::to_string(event.rank) + " " + event.what;
    }
    printMessage(text);
  }

  void handleSignals() {
    unsigned char signals[64];
    while (true) {
      ssize_t got = ::read(wake_read_fd_, signals, sizeof(signals));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return;
      for (ssize_t i = 0; i < got; ++i) {
        int sig = signals[i];
        if (sig != SIGINT && sig != SIGTERM) continue;
        if (stopping_) {
          // Asking twice means the user does not want to wait out the grace period.
          printMessage("received " + signalName(sig) + " while stopping, killing ranks");
          if (!killed_) killRemaining(/*after_grace=*/false);
          continue;
        }
        printMessage("received " + signalName(sig) + ", forwarding to ranks");
        forwarded_signal_ = sig;
        beginStopping(sig);
      }
    }
  }

  // With C10D_FLIGHT_RECORDER_SIGNAL set (c10d/FlightRecorder.hpp), the surviving ranks are
  // sent that signal before they are stopped, so that each leaves its flight recorder dump:
  // the ranks still blocked in a collective never reach their own timeout's dump.
  void askForFlightRecorderDumps() {
    const int sig = c10d::flightRecorderSignalFromEnvironment();
    if (sig == 0) return;  // unset (a bad value was refused at launch)
    int asked = 0;
    for (const Rank& rank : ranks_) {
      if (rank.running && ::kill(rank.pid, sig) == 0) ++asked;  // the rank alone, not its group
    }
    if (asked == 0) return;
    printMessage("asked " + std::to_string(asked) + " rank(s) for flight recorder dumps (" +
                 signalName(sig) + ")");
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }

  void beginStopping(int sig) {
    stopping_ = true;
    signalGroups(sig);
    kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.kill_grace_seconds));
  }

  // A directory of the job's error files, one per rank, removed when the job ends.
  bool makeErrorFileDirectory() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/c10drun-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      printMessage("error: cannot create a directory for the ranks' error files (" + pattern +
                   "): " + std::strerror(errno));
      return false;
    }
    error_dir_ = pattern;
    return true;
  }

  std::string errorFile(const Rank& rank) const {
    return error_dir_ + "/error_" + std::to_string(rank.global_rank) + ".json";
  }

  void removeErrorFiles() {
    for (const Rank& rank : ranks_) ::unlink(errorFile(rank).c_str());
    ::rmdir(error_dir_.c_str());
  }

  void killRemaining(bool after_grace) {
    killed_ = true;
    if (after_grace && running_count_ > 0) {
      printMessage("ranks still running after the grace period, sending SIGKILL");
    }
    signalGroups(SIGKILL);
  }

  // Signals whole process groups so that what a rank spawned stops with it. The group of a
  // reaped rank is only signalled while its pipes are still open: that shows the rank left
  // processes behind, which keep the group id alive so that it cannot name someone else's group.
  void signalGroups(int sig) {
    for (const Rank& rank : ranks_) {
      bool lingering = rank.pid > 0 && (rank.out.open() || rank.err.open());
      if (rank.running || lingering) ::kill(-rank.pid, sig);
    }
  }

  struct Event {  // a loss or a restart, for the summary
    int rank;
    double seconds;  // since the launcher started
    std::string what;
  };

  Options options_;
  Clock::time_point started_;
  std::unique_ptr<c10d::TCPStoreServer> store_server_;  // node 0 only
  std::unique_ptr<c10d::TCPStore> store_;               // null once it failed
  std::vector<Event> events_;
  int restarts_ = 0;
  Clock::time_point next_chaos_{};
  Clock::time_point next_stop_{};
  std::minstd_rand chaos_random_{static_cast<unsigned>(::getpid())};
  bool any_exited_zero_ = false;
  std::string error_dir_;
  std::vector<Rank> ranks_;
  int running_count_ = 0;
  int wake_read_fd_ = -1;
  int stdin_fd_ = -1;
  struct sigaction saved_actions_[NSIG] = {};
  bool stopping_ = false;
  bool killed_ = false;
  bool all_exited_zero_ = true;
  int forwarded_signal_ = 0;
  std::optional<int> failure_code_;
  Clock::time_point kill_deadline_;
  std::optional<Clock::time_point> drain_deadline_;
};

}  // namespace

int main(int argc, char** argv) {
  Launcher launcher(parseOptions(argc, argv));
  return launcher.run();
}
