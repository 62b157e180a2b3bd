// A job that loses a rank or a link on purpose, for the fault tests (tests/fault_*.sh and the
// multi-host test): every rank runs allreduces in a loop; --kill-rank R makes rank R start one
// and then SIGKILL itself mid-op at iteration --kill-at. A rank whose op fails prints
//   rank 1: allreduce #20 failed after 35 ms: <the error>
// and exits 1; a rank that finishes prints "rank N: M allreduces checked" and exits 0.
// Rank and world come from the environment as for any c10d program (c10drun, mpirun).
#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "c10d/Init.hpp"

namespace {

struct Options {
  int killRank = -1;
  int killAt = 10;
  int iters = 100;
  int64_t elements = 1024;
  int pauseMs = 0;
};

int run(const Options& options) {
  auto pg = c10d::initProcessGroup();
  const int rank = pg->rank();
  c10d::Tensor tensor = c10d::Tensor::empty({options.elements}, c10d::ScalarType::Float32);
  for (int i = 0; i < options.iters; ++i) {
    float* data = tensor.data<float>();
    for (int64_t j = 0; j < options.elements; ++j) data[j] = static_cast<float>(rank + 1);
    if (rank == options.killRank && i == options.killAt) {
      auto work = pg->allreduce(tensor);
      std::printf("rank %d: killing itself during allreduce #%d\n", rank, i);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    auto start = std::chrono::steady_clock::now();
    try {
      pg->allreduce(tensor)->wait();
    } catch (const std::exception& e) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
      std::printf("rank %d: allreduce #%d failed after %lld ms: %s\n", rank, i,
                  static_cast<long long>(ms), e.what());
      std::fflush(stdout);
      return 1;
    }
    const float expected = static_cast<float>(pg->size() * (pg->size() + 1) / 2);
    if (tensor.data<float>()[0] != expected ||
        tensor.data<float>()[options.elements - 1] != expected) {
      std::printf("rank %d: allreduce #%d gave %g, expected %g\n", rank, i,
                  static_cast<double>(tensor.data<float>()[0]), static_cast<double>(expected));
      return 1;
    }
    if (options.pauseMs > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(options.pauseMs));
  }
  std::printf("rank %d: %d allreduces checked\n", rank, options.iters);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Runs allreduces in a loop; optionally one rank kills itself mid-op."};
  app.add_option("--kill-rank", options.killRank, "Rank that SIGKILLs itself (-1: none)");
  app.add_option("--kill-at", options.killAt, "Iteration at which it does")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--iters", options.iters, "Allreduces per rank")->check(CLI::PositiveNumber);
  app.add_option("--elements", options.elements, "float32 elements per allreduce")
      ->check(CLI::PositiveNumber);
  app.add_option("--pause-ms", options.pauseMs, "Sleep between iterations")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault_rank: %s\n", e.what());
    return 1;
  }
}
