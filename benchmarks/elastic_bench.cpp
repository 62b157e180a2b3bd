// c10d-elastic-bench: what recovery costs (c10d/elastic/ElasticGroup.hpp), under c10drun:
//
//   c10drun --elastic --nproc-per-node 4 c10d-elastic-bench --mode commit [--iterations 20000]
//     per step: ElasticGroup::commit beside a plain 4-byte allreduce on the same group,
//     alternating in blocks of 100, p50 and p90 on rank 0;
//   c10drun --elastic --nproc-per-node 4 c10d-elastic-bench --mode kill [--victim 2]
//     the victim notes the time (CLOCK_MONOTONIC, one clock for every process of the host) in
//     the store and SIGKILLs itself in the middle of a step; each survivor prints the time from
//     that to its first committed step in the new group, and the reform's own time.
//     benchmarks/elastic_kill_bench.sh repeats it and reports medians and the 95th percentile.
//   c10drun --elastic --nproc-per-node 4 c10d-elastic-bench --mode copies [--shard-mib 16]
//     per step, the cost of ShardCopies::refresh for a float32 slice of --shard-mib per rank:
//     what the step waits for when the exchange overlaps --step-us of compute (refresh returns
//     once the snapshot is taken and the exchange posted), beside the whole exchange when the
//     step waits for it (refresh then wait), alternating in blocks of 10; p50, p90, and the bytes
//     the copies hold, on rank 0.
// Steps are a 1-float allreduce after --step-us of compute (a sleep).

#include <signal.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "c10d/checkpoint/State.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/elastic/ElasticGroup.hpp"
#include "c10d/elastic/ShardCopies.hpp"
#include "store/Store.hpp"

namespace {

using namespace c10d;

int64_t monotonicNs() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

void commitMode(elastic::ElasticGroup& elastic, int iterations) {
  std::vector<double> commits, allreduces;
  int32_t value = 1;
  Tensor tensor = Tensor::fromBlob(&value, ScalarType::Int32, {1});
  for (int block = 0; block < iterations / 100 + 1; ++block) {
    for (int i = 0; i < 100; ++i) {
      auto start = std::chrono::steady_clock::now();
      if (block % 2 == 0) {
        if (!elastic.commit(true)) throw Error("c10d-elastic-bench: a commit failed");
      } else {
        elastic.group().allreduce(tensor, {.reduceOp = ReduceOp::MIN})->wait();
      }
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      if (block > 1) (block % 2 == 0 ? commits : allreduces).push_back(us);  // after warm-up
    }
  }
  if (elastic.rank() == 0) {
    std::printf(
        "commit: p50 %.2f us p90 %.2f us | 4-byte allreduce: p50 %.2f us p90 %.2f us | "
        "%d ranks, %zu each\n",
        percentile(commits, 0.5), percentile(commits, 0.9), percentile(allreduces, 0.5),
        percentile(allreduces, 0.9), elastic.size(), commits.size());
  }
}

void killMode(elastic::ElasticGroup& elastic, std::shared_ptr<Store> store, int victim, int killAt,
              int steps, int stepUs) {
  const std::string killedAt = "c10d-elastic-bench/killed-at";
  double reformSeconds = 0;
  while (elastic.step() < steps) {
    bool ok = true;
    float gradient = 1;
    try {
      std::this_thread::sleep_for(std::chrono::microseconds(stepUs));
      if (elastic.id() == victim && elastic.step() == killAt) {
        store->set(killedAt, toBytes(std::to_string(monotonicNs())));
        ::raise(SIGKILL);
      }
      elastic.group().allreduce(Tensor::fromBlob(&gradient, ScalarType::Float32, {1}))->wait();
    } catch (const Error&) {
      ok = false;
    }
    if (elastic.commit(ok)) {
      if (reformSeconds > 0) {
        const int64_t kill = std::stoll(toString(store->get(killedAt)));
        std::printf("id %d: kill to first committed step %.1f ms, reform %.1f ms\n", elastic.id(),
                    static_cast<double>(monotonicNs() - kill) / 1e6, reformSeconds * 1e3);
        reformSeconds = -1;  // printed
      }
      continue;
    }
    reformSeconds = elastic.reform().seconds;
  }
}

void copiesMode(elastic::ElasticGroup& elastic, int iterations, int shardMib, int stepUs) {
  const int64_t count = int64_t{shardMib} * 1024 * 1024 / 4;
  std::vector<float> slice(static_cast<size_t>(count), 1.0f);
  checkpoint::State state;
  state.addSlice("w", Tensor::fromBlob(slice.data(), ScalarType::Float32, {count}),
                 {count * elastic.size()}, checkpoint::Slice::flat(count * elastic.rank(), count));
  elastic::ShardCopies copies(elastic);
  std::vector<double> overlapped, whole;
  for (int block = 0; block < iterations / 10 + 2; ++block) {
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(stepUs));  // the step's compute
      elastic.group().barrier()->wait();  // every rank starts the refresh together
      auto start = std::chrono::steady_clock::now();
      copies.refresh(state);
      if (block % 2 == 1 && !copies.wait()) throw Error("c10d-elastic-bench: an exchange failed");
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      if (block > 1) (block % 2 == 0 ? overlapped : whole).push_back(us);  // after warm-up
    }
  }
  copies.wait();
  if (elastic.rank() == 0) {
    std::printf(
        "refresh of a %d MiB slice: overlapped p50 %.1f us p90 %.1f us | refresh and "
        "wait p50 %.1f us p90 %.1f us | copies hold %.1f MiB | %d ranks, %zu each\n",
        shardMib, percentile(overlapped, 0.5), percentile(overlapped, 0.9), percentile(whole, 0.5),
        percentile(whole, 0.9), static_cast<double>(copies.bytes()) / (1024.0 * 1024.0),
        elastic.size(), overlapped.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"c10d-elastic-bench: the cost of a step's commit and of recovering from a kill"};
  std::string mode = "commit";
  int iterations = 20000, victim = 2, killAt = 200, steps = 400, stepUs = 1000, shardMib = 16;
  app.add_option("--mode", mode, "commit, kill or copies")
      ->check(CLI::IsMember({"commit", "kill", "copies"}));
  app.add_option("--iterations", iterations, "commit mode: steps timed")->capture_default_str();
  app.add_option("--victim", victim, "kill mode: the id that dies")->capture_default_str();
  app.add_option("--kill-at", killAt, "kill mode: the step it dies in")->capture_default_str();
  app.add_option("--steps", steps, "kill mode: steps in all")->capture_default_str();
  app.add_option("--step-us", stepUs, "kill and copies modes: compute per step (a sleep)")
      ->capture_default_str();
  app.add_option("--shard-mib", shardMib, "copies mode: each rank's slice")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    auto elastic = elastic::ElasticGroup::fromEnvironment();
    if (mode == "commit") {
      commitMode(*elastic, iterations);
    } else if (mode == "copies") {
      copiesMode(*elastic, iterations, shardMib, stepUs);
    } else {
      killMode(*elastic, elastic->group().store(), victim, killAt, steps, stepUs);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "c10d-elastic-bench: %s\n", e.what());
    return 1;
  }
}
