#pragma once

/// \file
/// The table of every C10D_* environment variable the library reads (kVariables), the helpers
/// that check values against it, and the launchers' rank variables.
///
/// Every C10D_* environment variable the library reads, declared once (kVariables), read by one
/// reader that applies one policy to all of them (Settings, c10d/core/Settings.hpp): unset or empty
/// means the default; any other value must be one the table accepts, or the read throws
/// InvalidArgument naming the variable, the value and what it accepts. docs/configuration.md's
/// table of variables is printed from here (`c10d-config --markdown`), and a test fails when the
/// two differ.
///
/// Variables of Scope::Group can also be set for one process group through
/// ProcessGroupOptions::config, which takes precedence over the environment.
///
/// Header-only but for Settings (c10d/core/Settings.cpp, which c10d-config compiles in, as it does
/// not link the library). Not included by ProcessGroup.hpp or Backend.hpp: a program includes it
/// to read the table (c10d-config, the examples). Thread-safe: reading the environment while
/// another thread calls setenv is the caller's race, as with getenv.

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Settings.hpp"

/// environ, which unistd.h declares only under _GNU_SOURCE.
extern "C" char** environ;

/// The library's configuration: the table of C10D_* variables (kVariables), Settings that reads
/// them with one policy, and the launchers' variables (kLaunchers).
namespace c10d::inline v1::config {

/// What values a Variable accepts.
enum class Type {
  Choice,   ///< one of Variable::choices
  Integer,  ///< a decimal integer in [min, max]
  Text,     ///< any non-empty text
  Path,     ///< a file or directory name
};

/// Who may set a Variable, and when it is read.
enum class Scope {
  Process,  ///< read once or per call, for the whole process: only the environment sets it
  Group,    ///< read when a process group is created: ProcessGroupOptions::config can set it too
};

/// One row of kVariables: an environment variable, what it accepts, its default and its meaning
/// (a row of docs/configuration.md).
struct Variable {
  std::string_view name;     ///< "C10D_TIMEOUT"
  Type type;                 ///< what values it accepts
  Scope scope;               ///< Group: ProcessGroupOptions::config may set it too
  std::string_view choices;  ///< Choice: the accepted values, '|' between them
  int64_t min;               ///< Integer: the accepted range
  int64_t max;               ///< Integer: the range's upper end, included (min is the lower)
  std::string_view fallback;     ///< the value unset stands for; empty: none (the reader decides)
  std::string_view defaultText;  ///< the default in words, where fallback alone does not say it
  std::string_view meaning;      ///< what it does, in Markdown (the table's "Meaning" column)
  std::string_view alias = {};  ///< an older name, read when this one is unset
  bool secret = false;          ///< never printed
};

/// Every C10D_* variable the library reads, one Variable each; `c10d-config --markdown` prints
/// it as docs/configuration.md's table.
inline constexpr Variable kVariables[] = {
    {"C10D_BACKEND",
     Type::Text,
     Scope::Process,
     {},
     0,
     0,
     "gloo",
     {},
     "backend spec of `initProcessGroup`: `gloo`, a registered backend's name, or per device "
     "`cpu:gloo,cuda:nccl` (`InitOptions::backend` overrides)"},
    {"C10D_TIMEOUT",
     Type::Integer,
     Scope::Process,
     {},
     1,
     31536000,
     "1800",
     {},
     "default timeout of every op, in seconds (`InitOptions::timeout` overrides)"},
    {"C10D_STORE_HOST",
     Type::Choice,
     Scope::Process,
     "rank0|launcher",
     0,
     0,
     "rank0",
     {},
     "who hosts the job's store at `MASTER_ADDR:MASTER_PORT` for env:// and tcp://: `rank0` (as "
     "torch.distributed) or `launcher` (c10drun says so: every rank is a client, and the store "
     "outlives any rank, which recovery needs)"},
    {"C10D_SOCKET_IFNAME",
     Type::Text,
     Scope::Group,
     {},
     0,
     0,
     {},
     "the address that routes to `MASTER_ADDR`",
     "network interface Gloo and RPC use",
     "GLOO_SOCKET_IFNAME"},
    {"C10D_GLOO_BUSY_POLL",
     Type::Choice,
     Scope::Group,
     "0|1",
     0,
     0,
     {},
     "spin for `C10D_SPIN_US`, then sleep, when each local rank (`LOCAL_WORLD_SIZE`) has a core "
     "(the affinity mask's CPUs and the cgroup's CPU quota)",
     "`1`: spin on reads and never sleep; `0`: sleep at once"},
    {"C10D_ALLREDUCE_ALGO",
     Type::Choice,
     Scope::Group,
     "auto|recursive_doubling|halving_doubling|ring",
     0,
     0,
     "auto",
     {},
     "the Gloo backend's allreduce algorithm at every size; `auto`: the cheapest for the link "
     "(over TCP) or by size (shared memory). Must be the same on every rank"},
    {"C10D_BROADCAST_ALGO",
     Type::Choice,
     Scope::Group,
     "auto|binomial|scatter_allgather|pipeline",
     0,
     0,
     "auto",
     {},
     "the Gloo backend's broadcast algorithm at every size; `auto`: the cheapest for the link "
     "(over TCP) or a binomial tree (shared memory). Must be the same on every rank"},
    {"C10D_ALLGATHER_ALGO",
     Type::Choice,
     Scope::Group,
     "auto|bruck|ring",
     0,
     0,
     "auto",
     {},
     "the Gloo backend's allgather algorithm at every size (without hierarchy); `auto`: the "
     "cheapest for the link (over TCP) or a ring (shared memory). Must be the same on every rank"},
    {"C10D_NET_LATENCY_US",
     Type::Integer,
     Scope::Group,
     {},
     0,
     10000000,
     "0",
     "`0`: measured as the group connects",
     "one message's latency across hosts, in microseconds, for the Gloo backend's cost model "
     "(with `C10D_NET_MBITS`); rank 0's value is every rank's"},
    {"C10D_NET_MBITS",
     Type::Integer,
     Scope::Group,
     {},
     0,
     100000000,
     "0",
     "`0`: measured as the group connects",
     "the link's bandwidth across hosts, in Mbit/s, for the Gloo backend's cost model; rank 0's "
     "value is every rank's"},
    {"C10D_SPIN_US",
     Type::Integer,
     Scope::Group,
     {},
     0,
     1000000,
     "50",
     {},
     "microseconds a waiting rank that may spin (`C10D_GLOO_BUSY_POLL`) spins before it sleeps"},
    {"C10D_GLOO_FAST_PATH",
     Type::Choice,
     Scope::Group,
     "0|all|size",
     0,
     0,
     "size",
     {},
     "`0`: every collective through Gloo's own algorithms; `all`: through the SyncMesh at every "
     "size; `size`: by size. Must be the same on every rank"},
    {"C10D_GLOO_HIERARCHICAL",
     Type::Choice,
     Scope::Group,
     "auto|0|1",
     0,
     0,
     "auto",
     {},
     "in a group on several hosts with several ranks on some, whether allreduce, broadcast, "
     "reduce, allgather and reduce_scatter on the fast path go within each host, then among one "
     "rank per host, then within each host: `1` (on every rank) always; `auto` when that crosses "
     "hosts fewer times in turn "
     "than the flat algorithm; `0` (on any rank) never"},
    {"C10D_SHM",
     Type::Choice,
     Scope::Group,
     "0|1",
     0,
     0,
     "1",
     {},
     "`1`: ranks of a group on one host exchange the fast path's messages through shared memory "
     "(memfd segments only the same user can map); `0`: over TCP. A pair keeps TCP when either "
     "rank says `0` or cannot map the other's segment. A group wholly on shared memory whose "
     "ranks can read each other's memory (process_vm_readv) also sends point-to-point there. "
     "RPC workers on one host that can read each other's memory copy tensors of 256 KiB or more "
     "from the sender's memory (RpcOptions::sharedMemory overrides it)"},
    {"C10D_KERNELS",
     Type::Choice,
     Scope::Process,
     "auto|portable|avx2|avx512",
     0,
     0,
     "auto",
     {},
     "which build of the element-wise kernels (reductions, fp16/bf16 conversions) runs: `auto` "
     "the widest this CPU runs; `portable`, `avx2` (with FMA and F16C) or `avx512` to choose one "
     "(each computes the same bits; a set the CPU lacks is refused)"},
    {"C10D_HOST_ID",
     Type::Text,
     Scope::Group,
     {},
     0,
     0,
     {},
     "host name, boot id and namespaces",
     "the host this rank counts as: ranks with the same value are one host to the Gloo backend "
     "(shared memory between them where it works, one step of the hierarchical collectives), "
     "ranks with different values are apart (TCP). For tests, and to split one machine's ranks"},
    {"C10D_MPI_ABORT_ON_TIMEOUT",
     Type::Choice,
     Scope::Group,
     "0|1",
     0,
     0,
     "1",
     {},
     "`1`: when an MPI collective passes its timeout, log it and end the job with `MPI_Abort` "
     "(MPI cannot abandon a collective); `0`: only log it"},
    {"C10D_NCCL_BLOCKING_WAIT",
     Type::Choice,
     Scope::Group,
     "0|1",
     0,
     0,
     "0",
     {},
     "`1`: `Work::wait` on NCCL ops waits on the host and rethrows errors and timeouts; `0`: it "
     "makes the caller's current stream wait and returns"},
    {"C10D_LOG_LEVEL",
     Type::Choice,
     Scope::Process,
     "DEBUG|INFO|WARNING|ERROR|OFF",
     0,
     0,
     "WARNING",
     {},
     "the least severe message logged to stderr"},
    {"C10D_DEBUG",
     Type::Choice,
     Scope::Group,
     "OFF|INFO|DETAIL",
     0,
     0,
     "OFF",
     {},
     "`INFO`: log group creation and each collective's duration; `DETAIL`: also check before "
     "every collective that all ranks make the same call (op, dtype, sizes, device, root, reduce "
     "op, sequence number) and fail on every rank naming the ranks that differ"},
    {"C10D_FLIGHT_RECORDER_SIZE",
     Type::Integer,
     Scope::Group,
     {},
     0,
     16777216,
     "1000",
     {},
     "collectives each group remembers for its flight recorder; `0`: off"},
    {"C10D_FLIGHT_RECORDER_DIR",
     Type::Path,
     Scope::Process,
     {},
     0,
     0,
     "/tmp",
     {},
     "where dumps go: `c10d_flight_<group>_rank<R>.json`, written when a collective fails, on "
     "request and on the signal"},
    {"C10D_FLIGHT_RECORDER_SIGNAL",
     Type::Choice,
     Scope::Process,
     "USR1|USR2|SIGUSR1|SIGUSR2",
     0,
     0,
     {},
     "no handler",
     "that signal makes a rank dump every group's recorder, and `c10drun` sends it to the "
     "surviving ranks when one dies"},
    {"C10D_HOST_CACHE_MB",
     Type::Integer,
     Scope::Process,
     {},
     0,
     1073741824,
     "256",
     {},
     "host memory of freed tensors of 1 MiB and more kept for reuse by the next tensor of that "
     "size, in MiB; `0`: free at once"},
    {"C10D_AUTH_TOKEN",
     Type::Text,
     Scope::Process,
     {},
     0,
     0,
     {},
     "no authentication",
     "shared secret: TCPStore and RPC connections must pass an HMAC-SHA256 challenge-response "
     "before any request ([store-protocol.md](store-protocol.md#authentication))",
     {},
     true},
    {"C10D_AUTH_TOKEN_FILE",
     Type::Path,
     Scope::Process,
     {},
     0,
     0,
     {},
     "no authentication",
     "a file whose first line is the token, when `C10D_AUTH_TOKEN` is unset"},
    {"C10D_C_LIBRARY",
     Type::Path,
     Scope::Process,
     {},
     0,
     0,
     {},
     "the one beside the package",
     "Python package: the `libc10d_c.so.1` to load"},
    {"C10D_TORCH_STORE_PROTOCOL",
     Type::Choice,
     Scope::Process,
     "auto|v1|v2",
     0,
     0,
     "auto",
     {},
     "the wire protocol of a PyTorch TCPStore server (torchrun's agent store): `v1` (PyTorch 1.13, "
     "2.0), `v2` (2.2 and later), `auto`: ask the server"},
    {"C10D_EXAMPLE_DEVICE",
     Type::Choice,
     Scope::Process,
     "cpu|cuda",
     0,
     0,
     {},
     "`cpu`, or `cuda` when the backend serving CPU tensors cannot take them (`C10D_BACKEND=nccl`)",
     "examples only: `cuda` puts their tensors on `cuda:LOCAL_RANK`"},
};

/// The table's row for name; null when it has none.
/// \param name A variable's name, e.g. "C10D_TIMEOUT" (not its alias).
/// \return The row in kVariables, or nullptr.
inline const Variable* find(std::string_view name) {
  for (const Variable& v : kVariables) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

/// The table's row for a name the library knows it has.
/// \param name A variable's name in kVariables.
/// \return Its row.
/// \throws Error when the table has no such row (a bug of the library's, not the user's).
inline const Variable& variable(std::string_view name) {
  const Variable* v = find(name);
  // A name missing from the table is a bug of ours, not the user's.
  C10D_CHECK(v != nullptr, Error, "internal: configuration variable ", name,
             " is not in c10d/core/Config.hpp");
  return *v;
}

/// A Choice variable's accepted values, in the table's order.
/// \param v A row of Type::Choice.
/// \return Variable::choices split at '|'; views into the table.
inline std::vector<std::string_view> choices(const Variable& v) {
  std::vector<std::string_view> values;
  for (size_t start = 0; start <= v.choices.size();) {
    size_t bar = v.choices.find('|', start);
    if (bar == std::string_view::npos) bar = v.choices.size();
    values.push_back(v.choices.substr(start, bar - start));
    start = bar + 1;
  }
  return values;
}

/// text as a decimal integer in [low, high]; nullopt for anything else.
/// \param text Decimal digits with an optional '-'; no spaces, no '+'.
/// \param low The least value accepted.
/// \param high The greatest value accepted.
/// \return The number, or nullopt.
inline std::optional<int64_t> parseInteger(std::string_view text, int64_t low, int64_t high) {
  int64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end != text.data() + text.size() || number < low || number > high) {
    return std::nullopt;
  }
  return number;
}

/// The same, for a value the caller must have: InvalidArgument "<what>='<text>' is not an integer
/// in [low, high]" otherwise (launchers' variables, an init method's port).
/// \param what What text is, for the message: a variable's name.
/// \param text The value to parse.
/// \param low The least value accepted.
/// \param high The greatest value accepted.
/// \return The number.
/// \throws InvalidArgument when text is not a decimal integer in [low, high].
inline int64_t requireInteger(std::string_view what, std::string_view text, int64_t low,
                              int64_t high) {
  std::optional<int64_t> number = parseInteger(text, low, high);
  C10D_CHECK(number.has_value(), InvalidArgument, what, "='", text, "' is not an integer in [", low,
             ", ", high, "]");
  return *number;
}

/// "`a`, `b` or `c`", "an integer in [min, max]", ...: what a variable accepts, in words.
/// \param v A row of the table.
/// \return The Markdown text: the choices in backquotes, the range, "text" or "a path".
inline std::string accepted(const Variable& v) {
  switch (v.type) {
    case Type::Choice: {
      std::vector<std::string_view> values = choices(v);
      std::string text;
      for (size_t i = 0; i < values.size(); ++i) {
        if (i > 0) text += i + 1 == values.size() ? " or " : ", ";
        text += detail::concat("`", values[i], "`");
      }
      return text;
    }
    case Type::Integer:
      return detail::concat("an integer in [", v.min, ", ", v.max, "]");
    case Type::Text:
      return "text";
    case Type::Path:
      return "a path";
  }
  return "";
}

/// Checks value against v's type; returns it unchanged. Throws InvalidArgument naming the
/// variable, where the value came from, the value and what is accepted.
/// \param v The variable's row; a Choice value must be one of its choices, an Integer one in its
///        range; Text and Path accept anything.
/// \param value The value given (callers pass no empty one: empty stands for the default).
/// \param origin Where value came from, for the message: "environment", ...
/// \return value.
/// \throws InvalidArgument when v does not accept value (a secret value is not shown).
inline std::string_view check(const Variable& v, std::string_view value, std::string_view origin) {
  bool ok = true;
  if (v.type == Type::Choice) {
    std::vector<std::string_view> values = choices(v);
    ok = std::find(values.begin(), values.end(), value) != values.end();
  } else if (v.type == Type::Integer) {
    ok = parseInteger(value, v.min, v.max).has_value();
  }
  C10D_CHECK(ok, InvalidArgument, v.name, "='", v.secret ? "<secret>" : value, "' (", origin,
             "): expected ", accepted(v));
  return value;
}

/// The environment's value of name, checked (Settings{}.value(name)).
/// \param name A variable of kVariables.
/// \return The value, or the fallback when unset or empty.
/// \throws InvalidArgument when the value is not one the variable accepts.
/// \throws Error when name is not in the table.
inline std::string value(std::string_view name) {
  return Settings().value(name);
}

/// C10D_* variables set in the environment that the table does not know: most likely typos
/// ("C10D_DEGUB"). Reported as a warning, not refused: tests and tools have variables of their own.
/// \return Their names, in the environment's order (empty when there are none).
inline std::vector<std::string> unknownEnvironmentNames() {
  std::vector<std::string> unknown;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    if (text.rfind("C10D_", 0) != 0) continue;
    std::string_view name = text.substr(0, text.find('='));
    if (find(name) == nullptr) unknown.emplace_back(name);
  }
  return unknown;
}

// ---- Launchers' variables ----
// Not ours: what c10drun, torchrun, mpirun (Open MPI), PMI and srun (Slurm) tell each process.

/// The names of the variables one launcher sets for each process it starts.
struct Launcher {
  const char* rank;       ///< the rank's variable: "RANK", "SLURM_PROCID", ...
  const char* size;       ///< the world size's variable: "WORLD_SIZE", "SLURM_NTASKS", ...
  const char* localRank;  ///< the rank on its host's variable: "LOCAL_RANK", ...
  const char* name;  ///< for messages
};

/// The launchers whose variables are read, in the order they are tried: torchrun and c10drun
/// (RANK/WORLD_SIZE), Open MPI, PMI, Slurm.
inline constexpr Launcher kLaunchers[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK/WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "Slurm"},
};

/// The integer in variable name, nullopt when unset or empty; InvalidArgument naming the
/// variable when it holds anything but an integer in [low, high].
/// \param name The environment variable's name.
/// \param low The least value accepted.
/// \param high The greatest value accepted.
/// \return The number, or nullopt.
/// \throws InvalidArgument when the variable is set to anything but an integer in [low, high].
inline std::optional<int64_t> launcherInteger(const char* name, int64_t low, int64_t high) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  return requireInteger(name, text, low, high);
}

/// This process's rank on its host, from the first launcher that sets one; nullopt when none does.
/// \return The local rank (>= 0), or nullopt.
/// \throws InvalidArgument when the first launcher's local-rank variable that is set is not an
///         integer in [0, INT32_MAX].
inline std::optional<int> launcherLocalRank() {
  for (const Launcher& launcher : kLaunchers) {
    if (auto local = launcherInteger(launcher.localRank, 0, INT32_MAX)) {
      return static_cast<int>(*local);
    }
  }
  return std::nullopt;
}

/// docs/configuration.md's table: one row per variable.
/// \return The Markdown table, its header included, one line per row of kVariables.
inline std::string markdownTable() {
  std::string out =
      "| Variable | Accepts | Default | Per group | Meaning |\n|---|---|---|---|---|\n";
  for (const Variable& v : kVariables) {
    std::string name = detail::concat("`", v.name, "`");
    if (!v.alias.empty()) name += detail::concat(" (or `", v.alias, "`)");
    std::string byDefault = !v.defaultText.empty() ? std::string(v.defaultText)
                            : !v.fallback.empty()  ? detail::concat("`", v.fallback, "`")
                                                   : std::string("unset");
    out += detail::concat("| ", name, " | ", accepted(v), " | ", byDefault, " | ",
                          v.scope == Scope::Group ? "yes" : "no", " | ", v.meaning, " |\n");
  }
  return out;
}

}  // namespace c10d::inline v1::config
