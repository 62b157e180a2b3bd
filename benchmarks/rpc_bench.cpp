// c10d-rpc-bench: two RPC workers on loopback. Rank 0 measures, rank 1 serves:
//   - empty rpc_sync round trips (median and p99),
//   - pipelined rpc_async calls per second (a window of calls kept in flight),
//   - echo of a 1 MiB and a 16 MiB tensor (GB/s counting both directions),
//   - with --echo-sizes, the median time of one echo of a tensor of each of those sizes.
//
//   c10drun --nproc-per-node 2 c10d-rpc-bench [--json] [--calls N] [--threads T]
//                                             [--echo-sizes BYTES,...]
//
// --json prints, from rank 0, one line: {"rpc_sync_median_us":..., "rpc_sync_p99_us":...,
// "rpc_async_calls_per_s":..., "echo_1MiB_GBps":..., "echo_16MiB_GBps":...[, "echo_us":
// {"BYTES":..., ...}]}.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <vector>

#include "c10d/Init.hpp"
#include "rpc/RpcAgent.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using c10d::Tensor;
using c10d::rpc::RpcAgent;

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(p * static_cast<double>(values.size() - 1));
  return values[index];
}

double echoGBps(RpcAgent& agent, int64_t bytes, int repeats) {
  Tensor tensor = Tensor::empty({bytes}, c10d::ScalarType::UInt8);
  std::fill_n(static_cast<uint8_t*>(tensor.data()), bytes, uint8_t{7});
  agent.rpcSync<Tensor>("server", "echo", tensor);  // warm-up
  auto start = Clock::now();
  for (int i = 0; i < repeats; ++i) {
    Tensor back = agent.rpcSync<Tensor>("server", "echo", tensor);
    if (back.numel() != bytes || static_cast<uint8_t*>(back.data())[bytes - 1] != 7) {
      std::fprintf(stderr, "c10d-rpc-bench: echo returned the wrong tensor\n");
      std::exit(3);
    }
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return 2.0 * static_cast<double>(bytes) * repeats / seconds / 1e9;
}

// Median microseconds of one echo of bytes.
double echoMedianUs(RpcAgent& agent, int64_t bytes, int repeats) {
  Tensor tensor = Tensor::empty({bytes}, c10d::ScalarType::UInt8);
  std::fill_n(static_cast<uint8_t*>(tensor.data()), bytes, uint8_t{5});
  for (int i = 0; i < 20; ++i) agent.rpcSync<Tensor>("server", "echo", tensor);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto start = Clock::now();
    Tensor back = agent.rpcSync<Tensor>("server", "echo", tensor);
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (back.numel() != bytes || (bytes > 0 && static_cast<uint8_t*>(back.data())[0] != 5)) {
      std::fprintf(stderr, "c10d-rpc-bench: echo returned the wrong tensor\n");
      std::exit(3);
    }
  }
  return percentile(times, 0.5);
}

int run(bool json, int calls, int threads, const std::vector<int64_t>& echoSizes) {
  c10d::InitOptions init;
  c10d::WorldInfo world = c10d::detectWorld(init);
  if (world.worldSize != 2) {
    std::fprintf(stderr, "c10d-rpc-bench: needs exactly 2 ranks, got %d\n", world.worldSize);
    return 2;
  }
  auto store = c10d::connectStore(init, world);
  c10d::rpc::RpcOptions options;
  options.threads = threads;
  auto agent = RpcAgent::create(store, world.rank == 0 ? "client" : "server", world.rank, 2,
                                options, [](RpcAgent& a) {
                                  a.registerFunction("empty", [] {});
                                  a.registerFunction("echo", [](const Tensor& t) { return t; });
                                });
  if (world.rank == 0) {
    for (int i = 0; i < 1000; ++i) agent->rpcSync<void>("server", "empty");
    std::vector<double> latencies;
    latencies.reserve(calls);
    for (int i = 0; i < calls; ++i) {
      auto start = Clock::now();
      agent->rpcSync<void>("server", "empty");
      latencies.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    const int window = 256;
    const int pipelined = calls * 5;
    std::deque<c10d::rpc::Future<void>> inFlight;
    auto start = Clock::now();
    for (int i = 0; i < pipelined; ++i) {
      if (static_cast<int>(inFlight.size()) == window) {
        inFlight.front().wait();
        inFlight.pop_front();
      }
      inFlight.push_back(agent->rpcAsync<void>("server", "empty"));
    }
    for (auto& f : inFlight) f.wait();
    double callsPerSecond = pipelined / std::chrono::duration<double>(Clock::now() - start).count();
    double echo1 = echoGBps(*agent, int64_t{1} << 20, 200);
    double echo16 = echoGBps(*agent, int64_t{16} << 20, 20);
    double median = percentile(latencies, 0.5);
    double p99 = percentile(latencies, 0.99);
    std::vector<double> echoUs;
    for (int64_t bytes : echoSizes) echoUs.push_back(echoMedianUs(*agent, bytes, 500));
    if (json) {
      std::printf(
          "{\"rpc_sync_median_us\":%.2f, \"rpc_sync_p99_us\":%.2f, \"rpc_async_calls_per_s\":%.0f, "
          "\"echo_1MiB_GBps\":%.3f, \"echo_16MiB_GBps\":%.3f",
          median, p99, callsPerSecond, echo1, echo16);
      for (size_t i = 0; i < echoSizes.size(); ++i) {
        std::printf("%s\"%lld\":%.2f", i == 0 ? ", \"echo_us\":{" : ", ",
                    static_cast<long long>(echoSizes[i]), echoUs[i]);
      }
      std::printf("%s}\n", echoSizes.empty() ? "" : "}");
    } else {
      for (size_t i = 0; i < echoSizes.size(); ++i) {
        std::printf("echo of %lld bytes: median %.2f us\n", static_cast<long long>(echoSizes[i]),
                    echoUs[i]);
      }
      std::printf("empty rpc_sync: median %.2f us, p99 %.2f us (%d calls)\n", median, p99, calls);
      std::printf("pipelined rpc_async: %.0f calls/s (%d calls, window %d)\n", callsPerSecond,
                  pipelined, window);
      std::printf("echo 1 MiB: %.3f GB/s; echo 16 MiB: %.3f GB/s (both directions)\n", echo1,
                  echo16);
    }
  }
  agent->shutdown(true);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Latency and throughput of c10d RPC between two workers.", "c10d-rpc-bench"};
  bool json = false;
  int calls = 20000;
  app.add_flag("--json", json, "Rank 0 prints one JSON line");
  app.add_option("--calls", calls, "Timed rpc_sync calls (5x as many pipelined ones)")
      ->check(CLI::Range(10, 100000000))
      ->capture_default_str();
  int threads = c10d::rpc::RpcOptions{}.threads;
  app.add_option("--threads", threads, "Each worker's pool threads (RpcOptions::threads)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  std::vector<int64_t> echoSizes;
  app.add_option("--echo-sizes", echoSizes, "Also time one echo of each of these sizes (bytes)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 32));
  CLI11_PARSE(app, argc, argv);
  try {
    return run(json, calls, threads, echoSizes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "c10d-rpc-bench: %s\n", e.what());
    return 1;
  }
}
