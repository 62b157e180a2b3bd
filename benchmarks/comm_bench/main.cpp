// c10d-comm-bench: bandwidth and latency of the collectives of a c10d process group, measured
// the way nccl-tests measures NCCL's, with the same columns; optionally side by side with the
// same operation run straight on Gloo, so the cost of the c10d layer shows.
//
//   c10drun --nproc-per-node N c10d-comm-bench [--op OP|all] [-b MIN] [-e MAX] [-f STEP]
//           [-d DTYPE] [-o REDOP] [-r ROOT] [-n ITERS] [-w WARMUP] [--device cpu|cuda]
//           [--raw] [--json]
//           [--check|--no-check]
//
// Also runs under mpirun, srun or anything else initProcessGroup() understands; the backend
// comes from C10D_BACKEND (default gloo).
//
// Method (nccl-tests'): per size, `warmup` untimed then `iters` timed blocking operations
// (op()->wait()); with --raw the paths run in the order c10d, raw, raw, c10d (half the
// iterations each time, each after its own warm-up). `time` is the slowest rank's
// average per operation; p50/p99 are taken over every rank's individual iterations, min/max over
// the ranks' averages. algbw = size / time, busbw = algbw * the op's bus factor (allreduce
// 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce, sendrecv 1; barrier,
// which moves no data, 0 and one row of size 0). For
// allgather, reduce_scatter and alltoall `size` is the whole (gathered / scattered / exchanged)
// buffer and `count` the elements of one rank's share; sizes too small to give every rank an
// element are skipped.
//
// --check (the default) fills the inputs so that every result is known, runs the op once per
// size before timing it, and counts the wrong elements over all ranks (#wrong). --raw adds a row
// per size for the same op made straight on the library of the backend that serves CPU tensors:
// Gloo (a context of its own over the job's store, under the prefix "raw-gloo") or MPI (one
// blocking call on a duplicate of MPI_COMM_WORLD). The difference between the rows is the c10d
// layer. The raw paths live in Raw<Library>.cpp.
//
// --device cuda puts the buffers on cuda:LOCAL_RANK (the NCCL backend with C10D_BACKEND=nccl,
// or a CPU backend staging through host memory); each timed op then ends when the calling
// thread's stream has finished it.
//
// Rank 0 prints; with --json it prints exactly one JSON line (an array of rows) on stdout.
// Exit status: 0 when every check passed, 3 when any element was wrong (after printing), 2 on a
// usage error, 1 on any other failure.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/comm_bench/Buffers.hpp"
#include "benchmarks/comm_bench/Check.hpp"
#include "benchmarks/comm_bench/CommBench.hpp"
#include "benchmarks/comm_bench/Ops.hpp"
#include "benchmarks/comm_bench/Options.hpp"
#include "benchmarks/comm_bench/Report.hpp"
#include "benchmarks/comm_bench/Stats.hpp"
#include "c10d/Backend.hpp"
#include "c10d/Init.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"
#include "c10d/core/Tensor.hpp"

namespace commbench {
namespace {

constexpr int kRuntimeErrorExitCode = 1;
constexpr int kWrongResultsExitCode = 3;

// The GPU of this rank on its node: LOCAL_RANK's, as every launcher sets it.
c10d::Device benchmarkDevice(const Options& options) {
  if (!options.cuda) return c10d::Device::cpu();
  int devices = c10d::cudaDeviceCount();
  C10D_CHECK(devices > 0, c10d::InvalidArgument, "--device cuda: no CUDA device is visible here");
  const char* local = std::getenv("LOCAL_RANK");
  int index = local != nullptr ? std::atoi(local) : 0;
  return c10d::Device::cuda(index % devices);
}

int run(const Options& options) {
  std::shared_ptr<c10d::ProcessGroup> pg = c10d::initProcessGroup();
  const int rank = pg->rank();
  const int ranks = pg->size();
  C10D_CHECK(options.root < ranks, c10d::InvalidArgument, "--root ", options.root,
             " is not a rank of this ", ranks, "-rank job");
  const c10d::Device device = benchmarkDevice(options);
  const Bookkeeping bookkeeping = Bookkeeping::of(*pg, device);
  std::unique_ptr<RawPath> raw;
  if (options.raw) raw = connectRawPath(*pg);

  Reporter reporter(options, rank == 0);
  std::shared_ptr<c10d::Backend> backend = pg->backend(device.type);
  reporter.preamble(ranks, backend->name() + " on " + device.str(),
                    raw ? raw->describe() : std::string());
  const std::string dtypeName(c10d::name(options.dtype));
  const std::string redopName(c10d::name(options.redop.kind()));
  int64_t wrongTotal = 0;

  for (Op op : options.ops) {
    const OpInfo& opInfo = info(op);
    std::vector<std::string> notes;
    if (op == Op::SendRecv && ranks < 2) {
      notes.push_back("skipped: sendrecv needs at least 2 ranks");
      reporter.beginOp(opInfo, notes);
      reporter.endOp();
      continue;
    }
    const bool rawHere = raw && raw->prepareOp(opInfo, options.redop, options.dtype, notes);
    reporter.beginOp(opInfo, notes);
    Buffers buffers = allocate(op, options, ranks, device, rawHere && raw->needsScratch(op));
    const Pattern pattern(opInfo, options.redop, options.dtype, ranks);
    const size_t element = c10d::elementSize(options.dtype);

    for (int64_t bytes = options.minBytes; bytes <= options.maxBytes;) {
      Shape shape = shapeFor(op, bytes, ranks, element);
      if (shape.count > 0) {
        Tensor input = view(buffers.input, shape.inputCount, options.dtype);
        Tensor hostInput = view(buffers.hostInput, shape.inputCount, options.dtype);
        bool inPlace = shape.outputCount == 0;
        Tensor output = inPlace ? input : view(buffers.output, shape.outputCount, options.dtype);
        Tensor hostOutput =
            inPlace ? hostInput : view(buffers.hostOutput, shape.outputCount, options.dtype);
        Case c{.op = opInfo,
               .shape = shape,
               .dtype = options.dtype,
               .redop = options.redop,
               .root = options.root,
               .rank = rank,
               .ranks = ranks,
               .input = input,
               .output = output,
               .hostInput = hostInput,
               .hostOutput = hostOutput,
               .scratch = buffers.scratch.defined() ? buffers.scratch.data() : nullptr,
               .timeout = options.opTimeoutMs > 0 ? std::chrono::milliseconds(options.opTimeoutMs)
                                                  : c10d::kDefaultTimeout};
        std::vector<const char*> names{"c10d"};
        std::vector<Runner> runners{onDevice(c10dRunner(*pg, c), device)};
        if (rawHere) {
          names.push_back("raw");
          runners.push_back(raw->runner(c));
        }
        std::vector<std::optional<int64_t>> wrong(runners.size());
        for (size_t p = 0; p < runners.size(); ++p) {
          prepare(c, pattern);
          upload(c);
          if (options.check) {
            runners[p]();
            download(c);
            wrong[p] = sumOverRanks(bookkeeping, countWrong(c, pattern));
            wrongTotal += *wrong[p];
          }
        }
        std::vector<std::vector<double>> samples =
            timeIterations(*pg, runners, options.warmup, options.iters);
        for (size_t p = 0; p < runners.size(); ++p) {
          Stats stats = summarize(bookkeeping, std::move(samples[p]));
          double algbw = static_cast<double>(shape.bytes) / (stats.timeUs * 1e-6) / 1e9;
          reporter.row({opInfo.name, shape.bytes, shape.count, dtypeName,
                        opInfo.reduces ? redopName : "none", opInfo.rooted ? options.root : -1,
                        stats, algbw, algbw * busFactor(op, ranks), wrong[p], names[p]});
        }
      }
      if (op == Op::Barrier || bytes > options.maxBytes / options.stepFactor) break;
      bytes *= options.stepFactor;
    }
    reporter.endOp();
  }
  reporter.finish();
  raw.reset();
  // Nobody tears down its connections while a slower rank still reads the last statistics.
  pg->barrier()->wait();
  return wrongTotal > 0 ? kWrongResultsExitCode : 0;
}

}  // namespace

std::unique_ptr<RawPath> connectRawPath(c10d::ProcessGroup& pg) {
  std::shared_ptr<c10d::Backend> backend = pg.backend(c10d::DeviceType::CPU);
#if C10D_WITH_GLOO
  if (backend->name() == "gloo") return connectRawGloo(pg);
#endif
#if C10D_WITH_MPI
  if (backend->name() == "mpi") return connectRawMpi(pg);
#endif
  C10D_THROW(c10d::InvalidArgument, "--raw: this c10d-comm-bench has no raw path for backend '",
             backend->name(), "' (it has one for the gloo and mpi backends it was built with)");
}

}  // namespace commbench

int main(int argc, char** argv) {
  using namespace commbench;
  Options options = parseOptions(argc, argv);
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "c10d-comm-bench: %s\n", e.what());
    return kRuntimeErrorExitCode;
  }
}
