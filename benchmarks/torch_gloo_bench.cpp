// PyTorch's C++ ProcessGroupGloo (libtorch-dev) timed as c10d-comm-bench times ours, for
// side-by-side runs under the same launcher: rank 0 prints each size's p50 in microseconds and
// its bus bandwidth. A program of its own: torch's c10d and ours cannot share a translation unit.
//
// Usage (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the launcher; torch's store listens on
// TORCH_GLOO_BENCH_PORT, else MASTER_PORT + 1, since the launcher's store holds MASTER_PORT):
//   c10drun --nproc-per-node 2 build/benchmarks/torch-gloo-bench --op allreduce -b 4 -e 16M -n 20

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::string env(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

size_t parseBytes(const std::string& text) {
  size_t end = 0;
  const double value = std::stod(text, &end);
  const std::string unit = text.substr(end);
  const double scale = unit == "K" ? 1 << 10 : unit == "M" ? 1 << 20 : unit == "G" ? 1 << 30 : 1;
  if (!unit.empty() && scale == 1) throw std::invalid_argument("bad size " + text);
  return static_cast<size_t>(value * scale);
}

}  // namespace

int main(int argc, char** argv) try {
  const int rank = std::stoi(env("RANK", "0"));
  const int size = std::stoi(env("WORLD_SIZE", "1"));
  size_t minBytes = 8, maxBytes = 32 << 20;
  int iters = 20, warmup = 5, factor = 2;
  std::string op = "allreduce";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 == argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "-b")
      minBytes = parseBytes(value);
    else if (flag == "-e")
      maxBytes = parseBytes(value);
    else if (flag == "-n")
      iters = std::stoi(value);
    else if (flag == "-w")
      warmup = std::stoi(value);
    else if (flag == "-f")
      factor = std::max(2, std::stoi(value));
    else if (flag == "--op")
      op = value;
    else
      throw std::invalid_argument("unknown option " + flag + " (-b -e -f -n -w --op)");
  }
  if (op != "allreduce" && op != "allgather" && op != "broadcast") {
    throw std::invalid_argument("--op " + op + ": allreduce, allgather or broadcast");
  }
  c10d::TCPStoreOptions storeOptions;
  const std::string port = env("TORCH_GLOO_BENCH_PORT", "");
  storeOptions.port = static_cast<uint16_t>(
      port.empty() ? std::stoi(env("MASTER_PORT", "29500")) + 1 : std::stoi(port));
  storeOptions.isServer = rank == 0;
  storeOptions.numWorkers = size;
  auto store = c10::make_intrusive<c10d::TCPStore>(env("MASTER_ADDR", "127.0.0.1"), storeOptions);
  auto options = c10d::ProcessGroupGloo::Options::create();
  // As torch.distributed does: GLOO_SOCKET_IFNAME names the interface, else the hostname's.
  const std::string interface = env("GLOO_SOCKET_IFNAME", "");
  options->devices.push_back(interface.empty()
                                 ? c10d::ProcessGroupGloo::createDefaultDevice()
                                 : c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  c10d::ProcessGroupGloo group(store, rank, size, options);
  if (rank == 0) {
    std::printf("# torch %s ProcessGroupGloo %s, %d ranks, p50 of %d\n%12s %12s %10s\n",
                TORCH_VERSION, op.c_str(), size, iters, "bytes", "p50_us", "busbw_GBs");
  }
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
    // As nccl-tests and c10d-comm-bench count: allgather's size is its whole output.
    const size_t perRank = op == "allgather" ? bytes / size : bytes;
    const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(perRank / 4));
    std::vector<at::Tensor> tensors{torch::ones({count}, torch::kFloat32)};
    std::vector<std::vector<at::Tensor>> gathered(1);
    for (int r = 0; r < size; ++r) gathered[0].push_back(torch::empty({count}, torch::kFloat32));
    std::vector<double> micros;
    for (int i = 0; i < warmup + iters; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (op == "allreduce") {
        group.allreduce(tensors)->wait();
      } else if (op == "allgather") {
        group.allgather(gathered, tensors)->wait();
      } else {
        group.broadcast(tensors)->wait();
      }
      const auto end = std::chrono::steady_clock::now();
      if (i >= warmup)
        micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    std::sort(micros.begin(), micros.end());
    const double p50 = micros[micros.size() / 2];
    // nccl-tests' bus bandwidth: what each link carries.
    const double links = op == "allreduce"   ? 2.0 * (size - 1) / size
                         : op == "allgather" ? static_cast<double>(size - 1) / size
                                             : 1.0;
    if (rank == 0) std::printf("%12zu %12.1f %10.3f\n", bytes, p50, links * bytes / p50 / 1e3);
  }
  group.barrier()->wait();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "torch-gloo-bench: %s\n", e.what());
  return 1;
}
