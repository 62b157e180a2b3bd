// c10d-scale-bench: what a job's size costs each rank, under any launcher that sets the
// rendezvous variables (c10drun, torchrun, mpirun with MASTER_ADDR):
//
//   c10drun --nproc-per-node 64 c10d-scale-bench [--extra-groups 20] [--json]
//
// Each rank connects to the store, builds the world group over a CountingStore and ends a first
// barrier (init); then makes the three groups of a 3-D layout with split: tensor groups of 2,
// pipeline groups of 4 and data groups of the rest (world size a multiple of 8), each used by one
// 4-byte allreduce (subgroups); then --extra-groups more groups (split in two halves, alternately
// by rank's parity and by its half), each used once. After each phase it notes its threads,
// descriptors and resident memory (/proc/self), and the store requests and keys the phase made
// through the group's store (connecting to the store is not counted: it is the launcher's
// rendezvous). Rank 0 prints each figure's minimum, median and maximum over the ranks. Counts
// (threads, descriptors, requests) are the same on any machine; times on this one are N ranks
// sharing its cores, which the output says.

#include <dirent.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "c10d/Init.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Config.hpp"
#include "c10d/core/Exception.hpp"
#include "store/CountingStore.hpp"

namespace {

using namespace c10d;
using Clock = std::chrono::steady_clock;

int countEntries(const char* directory) {
  DIR* dir = ::opendir(directory);
  if (dir == nullptr) return -1;
  int entries = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++entries;
  }
  ::closedir(dir);
  return entries;
}

double residentMiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One rank's figures, in the order of kMetrics: gathered as float64 into rank 0.
struct Metric {
  const char* name;
  const char* unit;
};
constexpr Metric kMetrics[] = {
    {"connect to the store", "s"},
    {"init to the first barrier's end", "s"},
    {"three subgroups made and used", "s"},
    {"extra groups made and used", "s"},
    {"threads after init", ""},
    {"threads after the subgroups", ""},
    {"threads after the extra groups", ""},
    {"descriptors after init", ""},
    {"descriptors after the subgroups", ""},
    {"descriptors after the extra groups", ""},
    {"resident MiB after init", "MiB"},
    {"resident MiB after the extra groups", "MiB"},
    {"store requests for init", ""},
    {"store keys for init", ""},
    {"store requests per subgroup", ""},
    {"store requests per extra group", ""},
};
constexpr size_t kMetricCount = std::size(kMetrics);

struct Snapshot {
  int threads = countEntries("/proc/self/task");
  int descriptors = countEntries("/proc/self/fd");
  double rss = residentMiB();
};

void useOnce(ProcessGroup& group) {
  float value = 1;
  group.allreduce(Tensor::fromBlob(&value, ScalarType::Float32, {1}))->wait();
  C10D_CHECK(value == static_cast<float>(group.size()), Error,
             "c10d-scale-bench: an allreduce over ", group.size(), " ranks gave ", value);
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = Clock::now();
  CLI::App app{
      "c10d-scale-bench: per-rank cost of a job's size (init, subgroups, threads, "
      "descriptors, memory, store requests)"};
  int extraGroups = 0;
  bool json = false;
  app.add_option("--extra-groups", extraGroups, "groups made after the three subgroups")
      ->check(CLI::Range(0, 1000));
  app.add_flag("--json", json, "one JSON object per figure instead of a table");
  CLI11_PARSE(app, argc, argv);

  try {
    InitOptions options;
    options.backend = config::value("C10D_BACKEND");
    if (options.backend.empty()) options.backend = "gloo";
    options.timeout = resolveTimeout(options.timeout);
    const WorldInfo world = detectWorld(options);
    C10D_CHECK(world.worldSize % 8 == 0, InvalidArgument, "c10d-scale-bench: world size ",
               world.worldSize,
               " is not a multiple of 8 (tensor groups of 2, pipeline groups of 4)");
    auto store = std::make_shared<CountingStore>(connectStore(options, world));
    const double connectSeconds = secondsSince(start);

    ProcessGroupOptions groupOptions;
    groupOptions.backend = options.backend;
    groupOptions.timeout = options.timeout;
    groupOptions.localRank = world.localRank;
    ProcessGroup group(store, world.rank, world.worldSize, groupOptions);
    group.barrier()->wait();
    const double initSeconds = secondsSince(start);
    const CountingStore::Counts afterInit = store->counts();
    const Snapshot init;

    // A 3-D layout: rank = (data * 4 + pipeline) * 2 + tensor.
    const int rank = world.rank;
    auto subgroupsStart = Clock::now();
    std::vector<std::shared_ptr<ProcessGroup>> groups;
    groups.push_back(group.split(rank / 2, rank));                 // tensor groups of 2
    groups.push_back(group.split(rank / 8 * 2 + rank % 2, rank));  // pipeline groups of 4
    groups.push_back(group.split(rank % 8, rank));                 // data groups of the rest
    for (auto& subgroup : groups) useOnce(*subgroup);
    const double subgroupSeconds = secondsSince(subgroupsStart);
    const CountingStore::Counts afterSubgroups = store->counts();
    const Snapshot subgroups;

    auto extraStart = Clock::now();
    for (int i = 0; i < extraGroups; ++i) {
      const int color = i % 2 == 0 ? rank % 2 : rank * 2 / world.worldSize;
      groups.push_back(group.split(color, rank));
      useOnce(*groups.back());
    }
    const double extraSeconds = secondsSince(extraStart);
    const CountingStore::Counts afterExtra = store->counts();
    const Snapshot extra;

    std::vector<double> mine = {
        connectSeconds,
        initSeconds,
        subgroupSeconds,
        extraSeconds,
        static_cast<double>(init.threads),
        static_cast<double>(subgroups.threads),
        static_cast<double>(extra.threads),
        static_cast<double>(init.descriptors),
        static_cast<double>(subgroups.descriptors),
        static_cast<double>(extra.descriptors),
        init.rss,
        extra.rss,
        static_cast<double>(afterInit.totalRequests()),
        static_cast<double>(afterInit.totalKeys()),
        (afterSubgroups - afterInit).totalRequests() / 3.0,
        extraGroups > 0 ? (afterExtra - afterSubgroups).totalRequests() / double(extraGroups) : 0,
    };
    static_assert(kMetricCount == 16);
    std::vector<double> all(kMetricCount * world.worldSize);
    group
        .allgatherIntoTensor(
            Tensor::fromBlob(all.data(), ScalarType::Float64, {static_cast<int64_t>(all.size())}),
            Tensor::fromBlob(mine.data(), ScalarType::Float64,
                             {static_cast<int64_t>(kMetricCount)}))
        ->wait();

    if (rank == 0) {
      const unsigned cores = std::thread::hardware_concurrency();
      if (!json) {
        std::printf("%d ranks (one process each) on %u cores; backend %s; %d extra groups\n",
                    world.worldSize, cores, options.backend.c_str(), extraGroups);
        std::printf("%-40s %12s %12s %12s\n", "per rank", "min", "median", "max");
      }
      for (size_t m = 0; m < kMetricCount; ++m) {
        std::vector<double> values;
        for (int r = 0; r < world.worldSize; ++r) values.push_back(all[r * kMetricCount + m]);
        std::sort(values.begin(), values.end());
        const double median = values[values.size() / 2];
        if (json) {
          std::printf(
              "{\"ranks\": %d, \"cores\": %u, \"extra_groups\": %d, \"figure\": \"%s\", "
              "\"unit\": \"%s\", \"min\": %.6g, \"median\": %.6g, \"max\": %.6g}\n",
              world.worldSize, cores, extraGroups, kMetrics[m].name, kMetrics[m].unit,
              values.front(), median, values.back());
        } else {
          std::printf("%-40s %12.4g %12.4g %12.4g %s\n", kMetrics[m].name, values.front(), median,
                      values.back(), kMetrics[m].unit);
        }
      }
      std::fflush(stdout);
    }
    group.barrier()->wait();  // no rank shuts down while another still reads
    groups.clear();
    group.shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "c10d-scale-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
