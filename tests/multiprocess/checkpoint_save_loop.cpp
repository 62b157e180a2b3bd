// A job that saves checkpoints until it is killed, and the check that follows the kill
// (checkpoint_kill_test.sh):
//   checkpoint_save_loop save ROOT   every rank (under c10drun) saves ROOT/step-N for N = 1, 2, ...
//                                    and rank 0 keeps the last 2
//   checkpoint_save_loop check ROOT  one process: the newest complete checkpoint verifies, loads
//                                    whole, and holds step N's contents; every other folder
//                                    there is complete or named .partial

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "c10d/Init.hpp"
#include "c10d/checkpoint/Checkpoint.hpp"

namespace {

using namespace c10d;
const std::vector<int64_t> kRows = {2048, 512};  // 4 MiB of float32, cut in rows
const std::vector<int64_t> kShared = {262144};   // 1 MiB, on every rank

float valueAt(int64_t step, int64_t index) {
  return static_cast<float>(step * 1000003 + index % 65521);
}

void fill(const Tensor& t, int64_t step, int64_t first) {
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = valueAt(step, first + k);
}

int save(const std::string& root) {
  auto pg = initProcessGroup();
  const int rank = pg->rank(), size = pg->size();
  const int64_t part = (kRows[0] + size - 1) / size;
  const int64_t first = std::min(kRows[0], rank * part);
  const int64_t rows = std::min(kRows[0], first + part) - first;
  Tensor mine = Tensor::empty({rows, kRows[1]}, ScalarType::Float32);
  Tensor shared = Tensor::empty(kShared, ScalarType::Float32);
  for (int64_t step = 1;; ++step) {
    fill(mine, step, first * kRows[1]);
    fill(shared, step, 0);
    checkpoint::State state;
    state.addSlice("w", mine, kRows, checkpoint::Slice::rows(first, rows, kRows));
    state.add("shared", shared);
    state.setInt("step", step);
    checkpoint::save(state, root + "/step-" + std::to_string(step), pg.get());
    if (rank == 0) checkpoint::keepLast(root, 2);
    std::printf("rank %d saved step %lld\n", rank, static_cast<long long>(step));
    std::fflush(stdout);
  }
}

int check(const std::string& root) {
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    const bool partial = name.size() > 8 && name.substr(name.size() - 8) == ".partial";
    if (!partial && !std::filesystem::exists(entry.path() / "metadata.json")) {
      std::printf("FAIL: %s is neither complete nor named .partial\n", name.c_str());
      return 1;
    }
  }
  auto newest = checkpoint::latest(root);
  if (!newest) {
    std::printf("no complete checkpoint yet (killed before the first commit)\n");
    return 0;
  }
  auto problems = checkpoint::verify(*newest);
  for (const auto& p : problems) std::printf("FAIL: %s\n", p.c_str());
  if (!problems.empty()) return 1;
  Tensor w = Tensor::zeros(kRows, ScalarType::Float32);
  Tensor shared = Tensor::zeros(kShared, ScalarType::Float32);
  checkpoint::State state;
  state.add("w", w);
  state.add("shared", shared);
  state.setInt("step", -1);
  checkpoint::load(state, *newest);
  const int64_t step = state.getInt("step");
  for (int64_t k = 0; k < w.numel(); ++k) {
    if (w.data<float>()[k] != valueAt(step, k)) {
      std::printf("FAIL: %s: w[%lld] is not step %lld's\n", newest->c_str(),
                  static_cast<long long>(k), static_cast<long long>(step));
      return 1;
    }
  }
  for (int64_t k = 0; k < shared.numel(); ++k) {
    if (shared.data<float>()[k] != valueAt(step, k)) {
      std::printf("FAIL: %s: shared[%lld] is not step %lld's\n", newest->c_str(),
                  static_cast<long long>(k), static_cast<long long>(step));
      return 1;
    }
  }
  std::printf("latest complete: %s (step %lld), verified and loaded\n", newest->c_str(),
              static_cast<long long>(step));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s save|check ROOT\n", argv[0]);
    return 2;
  }
  try {
    const std::string mode = argv[1];
    if (mode == "save") return save(argv[2]);
    if (mode == "check") return check(argv[2]);
    std::fprintf(stderr, "%s: mode '%s': expected save or check\n", argv[0], argv[1]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
