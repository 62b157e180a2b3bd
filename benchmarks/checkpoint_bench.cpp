// c10d-checkpoint-bench: save and load throughput of a model-sized state, beside plain writes and
// reads of the same bytes in the same run, and the blocking time of an asynchronous save beside
// a memcpy of the rank's slices.
//
//   c10drun --nproc-per-node 4 c10d-checkpoint-bench --model gpt2_small --dir /tmp/bench
//
// Every rank holds rows [r * ceil(n / N), ...) of each parameter tensor of the model (float32),
// so the state is the model's size at every world size and each rank writes and reads 1/N of it.
// Per repeat, each timed from a barrier to the last rank's end:
//   raw write: each rank pwrite()s its bytes into a file of its own and fsync()s it;
//   save:      checkpoint::save of the state (files, checksums, fsyncs, metadata, rename);
//   raw read:  each rank pread()s its raw file back into memory of its slices' size (touched
//              before, as the load's tensors are);
//   load:      checkpoint::load of the checkpoint into the same slicing (reads and checks, then
//              reads, checks and copies);
//   load1:     the same with LoadOptions::checkFirst off (one reading, checked as copied);
//   async:     AsyncSaver::save's blocking part (the copy into staging; the second and later
//              saves, whose staging exists), beside memcpy of the same bytes.
// Reads come from the page cache unless --drop-caches (root: writes /proc/sys/vm/drop_caches
// before each read, for raw reads and loads alike).

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "benchmarks/ddp_bench/Models.hpp"
#include "c10d/Init.hpp"
#include "c10d/checkpoint/Checkpoint.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace c10d;

double seconds(Clock::time_point from) {
  return std::chrono::duration<double>(Clock::now() - from).count();
}

// The longest of every rank's time: the job's.
double slowest(ProcessGroup& pg, double mine) {
  double value[1] = {mine};
  pg.allreduce(Tensor::fromBlob(value, ScalarType::Float64, {1}), {.reduceOp = ReduceOp::MAX})
      ->wait();
  return value[0];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void dropCaches() {
  ::sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
}

void check(bool ok, const std::string& what) {
  if (!ok) throw Error("c10d-checkpoint-bench: " + what + ": " + std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"c10d-checkpoint-bench: checkpoint save and load against plain file I/O"};
  std::string model = "gpt2_small", dir = "/tmp/c10d-checkpoint-bench";
  int repeats = 3;
  bool drop = false;
  app.add_option("--model", model, "whose parameter shapes (benchmarks/ddp_bench/Models.hpp)");
  app.add_option("--dir", dir, "where to write (removed at the end)");
  app.add_option("--repeats", repeats, "timed repeats; medians are reported");
  app.add_flag("--drop-caches", drop, "drop the page cache before each read (root)");
  CLI11_PARSE(app, argc, argv);

  try {
    auto pg = initProcessGroup();
    const int rank = pg->rank(), size = pg->size();
    const bench::ModelShapes* shapes = nullptr;
    for (const auto& m : bench::knownModels()) {
      if (m.name == model) shapes = &m;
    }
    if (shapes == nullptr) throw InvalidArgument("unknown model '" + model + "'");

    checkpoint::State state, into;
    std::vector<Tensor> mine;
    int64_t myBytes = 0, totalBytes = 0;
    for (size_t i = 0; i < shapes->shapes.size(); ++i) {
      const std::vector<int64_t>& shape = shapes->shapes[i];
      int64_t numel = 1;
      for (int64_t s : shape) numel *= s;
      totalBytes += numel * 4;
      const int64_t part = (shape[0] + size - 1) / size;
      const int64_t first = std::min(shape[0], rank * part);
      const int64_t rows = std::min(shape[0], first + part) - first;
      std::vector<int64_t> local = shape;
      local[0] = rows;
      Tensor t = Tensor::empty(local, ScalarType::Float32);
      for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = static_cast<float>(k % 977);
      mine.push_back(t);
      myBytes += static_cast<int64_t>(t.nbytes());
      const std::string name = "param" + std::to_string(i);
      state.addSlice(name, t, shape, checkpoint::Slice::rows(first, rows, shape));
      into.addSlice(name, Tensor::zeros(local, ScalarType::Float32), shape,
                    checkpoint::Slice::rows(first, rows, shape));
    }
    if (rank == 0) std::filesystem::create_directories(dir);
    pg->barrier()->wait();

    std::vector<double> rawWrite, save, rawRead, load, loadOnce, block, copy;
    checkpoint::AsyncSaver saver(*pg);
    std::vector<char> staging(static_cast<size_t>(myBytes));
    const std::string raw = dir + "/raw-" + std::to_string(rank);
    for (int r = 0; r < repeats; ++r) {
      const std::string ckpt = dir + "/ckpt-" + std::to_string(r);
      pg->barrier()->wait();
      auto start = Clock::now();
      {
        int fd = ::open(raw.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        check(fd >= 0, "open " + raw);
        int64_t offset = 0;
        for (const Tensor& t : mine) {
          check(::pwrite(fd, t.data(), t.nbytes(), offset) == static_cast<ssize_t>(t.nbytes()),
                "write");
          offset += static_cast<int64_t>(t.nbytes());
        }
        check(::fsync(fd) == 0, "fsync");
        ::close(fd);
      }
      rawWrite.push_back(slowest(*pg, seconds(start)));

      pg->barrier()->wait();
      start = Clock::now();
      checkpoint::save(state, ckpt, pg.get());
      save.push_back(slowest(*pg, seconds(start)));

      if (drop && rank == 0) dropCaches();
      pg->barrier()->wait();
      start = Clock::now();
      {
        int fd = ::open(raw.c_str(), O_RDONLY);
        check(fd >= 0, "open " + raw);
        int64_t offset = 0;
        for (const Tensor& t : mine) {
          check(::pread(fd, staging.data() + offset, t.nbytes(), offset) ==
                    static_cast<ssize_t>(t.nbytes()),
                "read");
          offset += static_cast<int64_t>(t.nbytes());
        }
        ::close(fd);
      }
      rawRead.push_back(slowest(*pg, seconds(start)));

      if (drop && rank == 0) dropCaches();
      pg->barrier()->wait();
      start = Clock::now();
      checkpoint::load(into, ckpt, pg.get());
      load.push_back(slowest(*pg, seconds(start)));

      if (drop && rank == 0) dropCaches();
      pg->barrier()->wait();
      start = Clock::now();
      checkpoint::load(into, ckpt, pg.get(), {.checkFirst = false});
      loadOnce.push_back(slowest(*pg, seconds(start)));

      // Asynchronous: the first save makes the staging; the others reuse it.
      for (int a = 0; a < 2; ++a) {
        saver.wait();
        pg->barrier()->wait();
        start = Clock::now();
        saver.save(state, ckpt + "-async-" + std::to_string(a));
        const double blocked = slowest(*pg, seconds(start));
        if (a == 1) block.push_back(blocked);
      }
      saver.wait();
      start = Clock::now();
      int64_t offset = 0;
      for (const Tensor& t : mine) {
        std::memcpy(staging.data() + offset, t.data(), t.nbytes());
        offset += static_cast<int64_t>(t.nbytes());
      }
      copy.push_back(slowest(*pg, seconds(start)));
      pg->barrier()->wait();
      if (rank == 0) {
        for (const char* suffix : {"", "-async-0", "-async-1"}) {
          std::filesystem::remove_all(ckpt + suffix);
        }
      }
    }
    pg->barrier()->wait();
    std::filesystem::remove(raw);
    if (rank == 0) {
      const double gb = static_cast<double>(totalBytes) / 1e9;
      const double w = median(rawWrite), s = median(save), rr = median(rawRead), l = median(load);
      std::printf(
          "model %s: %zu tensors, %.1f MB of float32, %d ranks, %d repeats (medians), "
          "reads %s\n",
          model.c_str(), shapes->shapes.size(), totalBytes / 1e6, size, repeats,
          drop ? "after dropping the page cache" : "from the page cache");
      std::printf("raw write %.3f s %.2f GB/s | save %.3f s %.2f GB/s | save/raw %.0f%%\n", w,
                  gb / w, s, gb / s, 100 * w / s);
      const double l1 = median(loadOnce);
      std::printf(
          "raw read  %.3f s %.2f GB/s | load %.3f s %.2f GB/s | load/raw %.0f%% | "
          "load1 %.3f s %.2f GB/s | load1/raw %.0f%%\n",
          rr, gb / rr, l, gb / l, 100 * rr / l, l1, gb / l1, 100 * rr / l1);
      std::printf("async save blocks %.1f ms | memcpy of a rank's slices %.1f ms | ratio %.2f\n",
                  1e3 * median(block), 1e3 * median(copy), median(block) / median(copy));
      std::filesystem::remove_all(dir);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "c10d-checkpoint-bench: %s\n", e.what());
    return 1;
  }
}
