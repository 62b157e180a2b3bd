// A job that loses a rank or a link on purpose, for the fault tests (tests/multiprocess/fault_*.sh
// and the multi-host test): every rank runs one op in a loop (--op: allreduce, or a ring of
// point-to-point messages: isend/irecv, irecv from any source, or batch_isend_irecv);
// --kill-rank R makes rank R start one and then SIGKILL itself mid-op at iteration --kill-at.
// A rank whose op fails prints
//   rank 1: allreduce #20 failed after 35 ms: <the error>
// and exits 1; a rank that finishes prints "rank N: M allreduce ops checked" and exits 0.
// Rank and world come from the environment as for any c10d program (c10drun, mpirun).
#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <thread>

#include "c10d/Init.hpp"

namespace {

enum class Op { Allreduce, Ring, RingAnySource, RingBatched };
const std::map<std::string, Op> kOps{{"allreduce", Op::Allreduce},
                                     {"ring", Op::Ring},
                                     {"ring-anysource", Op::RingAnySource},
                                     {"ring-batched", Op::RingBatched}};

struct Options {
  Op op = Op::Allreduce;
  int killRank = -1;
  int killAt = 10;
  int iters = 100;
  int64_t elements = 1024;
  int pauseMs = 0;
};

const char* opName(Op op) {
  for (const auto& [name, value] : kOps) {
    if (value == op) return name.c_str();
  }
  return "?";
}

// Starts one iteration's op: an allreduce of tensor, or a send of tensor to the next rank and a
// receive into received from the previous one.
std::vector<std::shared_ptr<c10d::Work>> start(c10d::ProcessGroup& pg, Op op, c10d::Tensor& tensor,
                                               c10d::Tensor& received) {
  const int right = (pg.rank() + 1) % pg.size();
  const int left = (pg.rank() + pg.size() - 1) % pg.size();
  switch (op) {
    case Op::Allreduce:
      return {pg.allreduce(tensor)};
    case Op::Ring:
      return {pg.send(tensor, right), pg.recv(received, left)};
    case Op::RingAnySource:
      return {pg.send(tensor, right), pg.recvAnysource(received)};
    case Op::RingBatched:
      return pg.batchIsendIrecv(
          {{c10d::P2POp::Send, tensor, right}, {c10d::P2POp::Recv, received, left}});
  }
  return {};
}

int run(const Options& options) {
  auto pg = c10d::initProcessGroup();
  const int rank = pg->rank();
  const char* name = opName(options.op);
  c10d::Tensor tensor = c10d::Tensor::empty({options.elements}, c10d::ScalarType::Float32);
  c10d::Tensor received = c10d::Tensor::empty({options.elements}, c10d::ScalarType::Float32);
  for (int i = 0; i < options.iters; ++i) {
    float* data = tensor.data<float>();
    for (int64_t j = 0; j < options.elements; ++j) data[j] = static_cast<float>(rank + 1);
    if (rank == options.killRank && i == options.killAt) {
      auto works = start(*pg, options.op, tensor, received);
      std::printf("rank %d: killing itself during %s #%d\n", rank, name, i);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    auto begin = std::chrono::steady_clock::now();
    try {
      for (auto& work : start(*pg, options.op, tensor, received)) work->wait();
    } catch (const std::exception& e) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - begin)
                    .count();
      std::printf("rank %d: %s #%d failed after %lld ms: %s\n", rank, name, i,
                  static_cast<long long>(ms), e.what());
      std::fflush(stdout);
      return 1;
    }
    const bool isAllreduce = options.op == Op::Allreduce;
    const c10d::Tensor& result = isAllreduce ? tensor : received;
    const float expected = isAllreduce
                               ? static_cast<float>(pg->size() * (pg->size() + 1) / 2)
                               : static_cast<float>((rank + pg->size() - 1) % pg->size() + 1);
    if (result.data<float>()[0] != expected ||
        result.data<float>()[options.elements - 1] != expected) {
      std::printf("rank %d: %s #%d gave %g, expected %g\n", rank, name, i,
                  static_cast<double>(result.data<float>()[0]), static_cast<double>(expected));
      return 1;
    }
    if (options.pauseMs > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(options.pauseMs));
  }
  std::printf("rank %d: %d %s ops checked\n", rank, options.iters, name);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Runs an op in a loop; optionally one rank kills itself mid-op."};
  app.add_option("--op", options.op,
                 "allreduce, or a point-to-point ring: ring (send/recv), "
                 "ring-anysource (recv from any source), ring-batched (batch_isend_irecv)")
      ->transform(CLI::CheckedTransformer(kOps, CLI::ignore_case));
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
