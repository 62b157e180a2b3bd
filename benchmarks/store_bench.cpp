// c10d-store-bench: how fast one TCPStore client runs set/get/add, and how long N clients take to
// connect and pass a store barrier -- the two costs that decide how quickly a large job starts.
//
//   c10d-store-bench [--host H --port P] [--ops N] [--repeat R] [--clients 64,256,...]
//                    [--threads T] [--timeout-seconds S] [--quick] [--json]
//
// Without --host/--port the server runs inside this process on 127.0.0.1, so the numbers
// include the server's share of the CPU. With --json stdout carries exactly one JSON line;
// everything else (errors, library logs) goes to stderr.

#include <signal.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "store/Store.hpp"
#include "store/TCPStore.hpp"

namespace {

using c10d::Store;
using c10d::TCPStore;
using Clock = std::chrono::steady_clock;

constexpr int kUsageExitCode = 2;
constexpr int kRuntimeErrorExitCode = 1;

// Ops cycle over this many keys so that the store's size, not the op count, stays fixed and the
// measurement does not turn into one of the server's memory growth.
constexpr int kKeySpace = 1000;
constexpr int kWarmupOps = 1000;
constexpr size_t kValueBytes = 16;

// Descriptors the process needs besides one per barrier client (and one per server-side
// connection): stdio, the control client, the server's event loop and listening socket.
constexpr uint64_t kSpareFiles = 64;

constexpr int kDefaultOpsRepeat = 5;
constexpr int kDefaultBarrierRepeat = 3;

struct Options {
  std::optional<std::string> host;  // set together with port: use that server
  int port = 0;
  int64_t ops = 20000;
  std::optional<int> repeat;  // unset: kDefaultOpsRepeat / kDefaultBarrierRepeat
  std::vector<int> clients{64, 256, 1024, 4096};
  int threads = 64;
  double timeout_seconds = 120.0;
  bool quick = false;
  bool json = false;

  int opsRepeat() const { return repeat.value_or(kDefaultOpsRepeat); }
  int barrierRepeat() const { return repeat.value_or(kDefaultBarrierRepeat); }
  bool external() const { return host.has_value(); }
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000.0));
  }
};

[[noreturn]] void usageError(const std::string& message) {
  std::fprintf(stderr, "c10d-store-bench: %s (see --help)\n", message.c_str());
  std::exit(kUsageExitCode);
}

Options parseOptions(int argc, char** argv) {
  Options options;
  std::string host;
  int repeat = 0;
  CLI::App app{"Measures TCPStore op throughput and N-client barrier latency.", "c10d-store-bench"};
  CLI::Option* host_option =
      app.add_option("--host", host, "Host of an external store server (default: in-process)");
  CLI::Option* port_option =
      app.add_option("--port", options.port, "Port of the external store server")
          ->check(CLI::Range(1, 65535));
  host_option->needs(port_option);
  port_option->needs(host_option);
  CLI::Option* ops_option =
      app.add_option("--ops", options.ops, "Timed ops per set/get/add measurement")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
          ->capture_default_str();
  CLI::Option* repeat_option =
      app.add_option("--repeat", repeat,
                     "Runs per measurement; the median is reported (default: 5 for ops, 3 for "
                     "barriers)")
          ->check(CLI::Range(1, 1000000));
  CLI::Option* clients_option =
      app.add_option("--clients", options.clients,
                     "Client counts for the barrier measurement, comma-separated")
          ->delimiter(',')
          ->check(CLI::Range(1, 10000000))
          ->capture_default_str();
  app.add_option("--threads", options.threads, "Threads that drive the barrier clients")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--timeout-seconds", options.timeout_seconds,
                 "Store timeout for connecting and for each blocking call")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--quick", options.quick,
               "Smoke-test sizes: --ops 2000 --repeat 1 --clients 64,256 unless given");
  app.add_flag("--json", options.json, "Print one JSON line instead of tables");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) std::exit(app.exit(e));  // --help
    usageError(e.what());
  }

  if (host_option->count() > 0) {
    if (host.empty()) usageError("--host must not be empty");
    options.host = host;
  }
  if (repeat_option->count() > 0) options.repeat = repeat;
  // Explicit sizes win over --quick so that the smoke test's shape can still be adjusted.
  if (options.quick) {
    if (ops_option->count() == 0) options.ops = 2000;
    if (repeat_option->count() == 0) options.repeat = 1;
    if (clients_option->count() == 0) options.clients = {64, 256};
  }
  if (options.clients.empty()) usageError("--clients needs at least one count");
  if (options.timeout().count() <= 0) usageError("--timeout-seconds is below one millisecond");
  return options;
}

// Every barrier client holds a socket here and, with the in-process server, another on the
// server's side; the default soft limit (often 1024) would fail the large runs midway with an
// opaque connect error, so the limit is raised up front and checked against what is needed.
void ensureFileLimit(const Options& options) {
  int max_clients = *std::max_element(options.clients.begin(), options.clients.end());
  uint64_t per_client = options.external() ? 1 : 2;
  uint64_t needed = static_cast<uint64_t>(max_clients) * per_client + kSpareFiles;

  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    C10D_THROW(c10d::StoreError, "getrlimit(RLIMIT_NOFILE): ", std::strerror(errno));
  }
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    // An unlimited hard limit cannot be adopted as is (the kernel caps it at fs.nr_open), so
    // fall back to asking for just what this run needs.
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0 && needed > limit.rlim_cur) {
      raised.rlim_cur = std::min<rlim_t>(needed, limit.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &raised);
    }
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    C10D_THROW(c10d::InvalidArgument, "the barrier run with ", max_clients, " clients needs ",
               needed, " open files (", per_client, " per client",
               options.external() ? "" : ", counting the in-process server's side", ", plus ",
               kSpareFiles, " spare), but RLIMIT_NOFILE is ", limit.rlim_cur, " (hard limit ",
               limit.rlim_max, "); raise it (ulimit -n ", needed, ") or pass a smaller --clients");
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t middle = values.size() / 2;
  if (values.size() % 2 == 1) return values[middle];
  return (values[middle - 1] + values[middle]) / 2.0;
}

double secondsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// ---- single-client ops ----

enum class OpKind { Set, Get, Add };

std::vector<std::string> makeKeys(const std::string& prefix) {
  std::vector<std::string> keys;
  keys.reserve(kKeySpace);
  for (int i = 0; i < kKeySpace; ++i) keys.push_back(prefix + std::to_string(i));
  return keys;
}

// Keys are built beforehand so that the timed loop measures the store, not string formatting.
void runOps(TCPStore& store, OpKind kind, const std::vector<std::string>& keys,
            const Store::Bytes& value, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const std::string& key = keys[static_cast<size_t>(i % kKeySpace)];
    switch (kind) {
      case OpKind::Set:
        store.set(key, value);
        break;
      case OpKind::Get:
        store.get(key);
        break;
      case OpKind::Add:
        store.add(key, 1);
        break;
    }
  }
}

// Median ops/s of repeat timed passes, after one untimed warm-up that also proves the op works.
double measureOps(TCPStore& store, OpKind kind, const std::vector<std::string>& keys,
                  const Store::Bytes& value, int64_t ops, int repeat) {
  // get needs its keys present; add needs counters, and a rerun against an external server must
  // not trip over what an earlier, interrupted run left there.
  if (kind == OpKind::Get) {
    for (const std::string& key : keys) store.set(key, value);
  } else if (kind == OpKind::Add) {
    for (const std::string& key : keys) store.setString(key, "0");
  }
  runOps(store, kind, keys, value, kWarmupOps);
  if (kind == OpKind::Get && store.get(keys.front()) != value) {
    C10D_THROW(c10d::StoreError, "get of ", keys.front(),
               " returned a value other than the one set");
  }

  std::vector<double> rates;
  for (int run = 0; run < repeat; ++run) {
    Clock::time_point start = Clock::now();
    runOps(store, kind, keys, value, ops);
    double seconds = std::max(secondsSince(start, Clock::now()), 1e-9);
    rates.push_back(static_cast<double>(ops) / seconds);
  }
  return median(rates);
}

// ---- N-client barrier ----

struct Endpoint {
  std::string host;
  uint16_t port = 0;
};

struct BarrierWorker {
  std::vector<std::unique_ptr<TCPStore>> stores;
  Clock::time_point finished;
  std::string error;
};

// One barrier run: seconds from the first connect until the last client's wait returned.
//
// Each thread connects all of its clients, then adds for all of them, then waits for all of
// them. That cannot deadlock: no wait starts before its thread's adds are done, and the add
// that reaches `clients` sets the done key that releases every wait at once.
double runBarrier(const Endpoint& endpoint, int clients, int threads, const std::string& prefix,
                  std::chrono::milliseconds timeout, TCPStore& control) {
  const std::string count_key = prefix + "/count";
  const std::string done_key = prefix + "/done";
  const int thread_count = std::min(threads, clients);
  std::vector<BarrierWorker> workers(static_cast<size_t>(thread_count));

  // Threads are started and parked before the clock starts, so thread creation is not timed.
  std::latch ready(thread_count);
  std::latch go(1);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(thread_count));
  for (int t = 0; t < thread_count; ++t) {
    // Spread the remainder so that no thread owns more than one client above the others.
    int first = static_cast<int>(static_cast<int64_t>(clients) * t / thread_count);
    int last = static_cast<int>(static_cast<int64_t>(clients) * (t + 1) / thread_count);
    pool.emplace_back([&, first, last, worker = &workers[static_cast<size_t>(t)]] {
      ready.count_down();
      go.wait();
      try {
        c10d::TCPStoreOptions client_options;
        client_options.timeout = timeout;
        worker->stores.reserve(static_cast<size_t>(last - first));
        for (int i = first; i < last; ++i) {
          worker->stores.push_back(
              std::make_unique<TCPStore>(endpoint.host, endpoint.port, client_options));
        }
        for (auto& store : worker->stores) {
          if (store->add(count_key, 1) == clients) store->setString(done_key, "1");
        }
        for (auto& store : worker->stores) store->wait({done_key});
        worker->finished = Clock::now();
      } catch (const std::exception& e) {
        worker->error = e.what();
        // Without this the other threads would sit in wait() until the timeout before the
        // failure could be reported.
        try {
          control.setString(done_key, "1");
        } catch (const std::exception&) {
        }
      }
    });
  }
  ready.wait();
  Clock::time_point start = Clock::now();
  go.count_down();
  for (std::thread& thread : pool) thread.join();

  Clock::time_point end = start;
  for (const BarrierWorker& worker : workers) {
    if (!worker.error.empty()) {
      C10D_THROW(c10d::StoreError, "barrier with ", clients, " clients failed: ", worker.error);
    }
    end = std::max(end, worker.finished);
  }
  // The clients are closed only now, so that closing early finishers' connections could not
  // slow the threads still in their waits.
  workers.clear();

  int64_t arrived = control.add(count_key, 0);
  if (arrived != clients) {
    C10D_THROW(c10d::StoreError, "barrier key ", count_key, " counted ", arrived, " arrivals for ",
               clients, " clients; is another benchmark using this store with the same keys?");
  }
  control.deleteKey(count_key);
  control.deleteKey(done_key);
  return secondsSince(start, end);
}

// The server closes its side of the last run's connections asynchronously; waiting for that
// keeps those descriptors from counting against the next run and the closing work from
// landing inside its timing.
void waitForServerIdle(const c10d::TCPStoreServer& server, int64_t baseline,
                       std::chrono::milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  while (server.connectionCount() > baseline && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Barrier keys must be new on every run, and unique across invocations too: against an
// external server a reused count key would never hit exactly N and every client would hang.
std::string sessionTag() {
  std::random_device device;
  uint64_t bits = (static_cast<uint64_t>(device()) << 32) ^ device() ^
                  static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(bits));
  return text;
}

struct BarrierResult {
  int clients = 0;
  double seconds = 0.0;
};

struct Results {
  double set_ops_per_s = 0.0;
  double get_ops_per_s = 0.0;
  double add_ops_per_s = 0.0;
  std::vector<BarrierResult> barrier;
};

void printJson(const Results& results) {
  std::printf(
      "{\"set_ops_per_s\":%.1f, \"get_ops_per_s\":%.1f, \"add_ops_per_s\":%.1f, "
      "\"barrier\":[",
      results.set_ops_per_s, results.get_ops_per_s, results.add_ops_per_s);
  for (size_t i = 0; i < results.barrier.size(); ++i) {
    std::printf("%s{\"clients\":%d,\"seconds\":%.6f}", i == 0 ? "" : ",",
                results.barrier[i].clients, results.barrier[i].seconds);
  }
  std::printf("]}\n");
}

void printTables(const Results& results, const Options& options, const Endpoint& endpoint) {
  std::printf("store %s:%u (%s), %lld ops per run, %d barrier threads\n\n", endpoint.host.c_str(),
              static_cast<unsigned>(endpoint.port),
              options.external() ? "external server" : "in-process server",
              static_cast<long long>(options.ops), options.threads);
  std::printf("%-8s %14s   (median of %d)\n", "op", "ops per s", options.opsRepeat());
  std::printf("%-8s %14.0f\n", "set", results.set_ops_per_s);
  std::printf("%-8s %14.0f\n", "get", results.get_ops_per_s);
  std::printf("%-8s %14.0f\n", "add", results.add_ops_per_s);
  std::printf("\n%-8s %14s   (median of %d)\n", "clients", "seconds", options.barrierRepeat());
  for (const BarrierResult& result : results.barrier) {
    std::printf("%-8d %14.6f\n", result.clients, result.seconds);
  }
}

int run(const Options& options) {
  // A client that vanishes mid-reply must fail one connection, not kill the whole benchmark
  // with SIGPIPE from inside the in-process server.
  ::signal(SIGPIPE, SIG_IGN);
  ensureFileLimit(options);

  std::unique_ptr<c10d::TCPStoreServer> server;
  Endpoint endpoint;
  if (options.external()) {
    endpoint = {*options.host, static_cast<uint16_t>(options.port)};
  } else {
    c10d::TCPStoreServerOptions serverOptions;
    serverOptions.listenAddress = "127.0.0.1";
    server = std::make_unique<c10d::TCPStoreServer>(serverOptions);
    endpoint = {"127.0.0.1", server->port()};
  }

  c10d::TCPStoreOptions client_options;
  client_options.timeout = options.timeout();
  // Runs the op measurements and, during barriers, only bookkeeping outside the timed span.
  TCPStore control(endpoint.host, endpoint.port, client_options);

  Results results;
  const Store::Bytes value(kValueBytes, 'v');
  const std::vector<std::string> keys = makeKeys("bench/k");
  const std::vector<std::string> counters = makeKeys("bench/counter/k");
  results.set_ops_per_s =
      measureOps(control, OpKind::Set, keys, value, options.ops, options.opsRepeat());
  results.get_ops_per_s =
      measureOps(control, OpKind::Get, keys, value, options.ops, options.opsRepeat());
  results.add_ops_per_s =
      measureOps(control, OpKind::Add, counters, value, options.ops, options.opsRepeat());

  const std::string session = sessionTag();
  const int64_t idle_connections = server ? server->connectionCount() : 0;
  int run_index = 0;
  for (int clients : options.clients) {
    std::vector<double> seconds;
    for (int r = 0; r < options.barrierRepeat(); ++r) {
      std::string prefix = "barrier/" + session + "-" + std::to_string(run_index++);
      seconds.push_back(
          runBarrier(endpoint, clients, options.threads, prefix, options.timeout(), control));
      if (server) waitForServerIdle(*server, idle_connections, options.timeout());
    }
    results.barrier.push_back({clients, median(seconds)});
  }

  // Leave an external server as it was found; the in-process one is about to go away anyway.
  if (options.external()) {
    for (const std::string& key : keys) control.deleteKey(key);
    for (const std::string& key : counters) control.deleteKey(key);
  }

  if (options.json) {
    printJson(results);
  } else {
    printTables(results, options, endpoint);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parseOptions(argc, argv);
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "c10d-store-bench: %s\n", e.what());
    return kRuntimeErrorExitCode;
  }
}
