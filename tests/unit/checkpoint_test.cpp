// Checkpoints on ranks as threads: the slicing geometry, save and load across world sizes and
// slicings (every element checked against its global index), replicas written once, every kind
// of damage and disagreement named, asynchronous saves, and finding the newest checkpoint.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/Geometry.hpp"
#include "c10d/checkpoint/Metadata.hpp"
#include "c10d/core/Cuda.hpp"
#include "tests/support/TempDir.hpp"
#include "tests/support/ThreadRanks.hpp"

namespace c10d::inline v1::checkpoint {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

using test::TempDir;

// The elements a slice holds, as their global indices (what a tensor filled with its own global
// indices holds there).
std::vector<int64_t> globalIndices(const Slice& slice, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out(slice.numel());
  for (const detail::Run& run : detail::runsOf(slice, shape)) {
    for (int64_t k = 0; k < run.length; ++k) out[run.local + k] = run.global + k;
  }
  return out;
}

Tensor filledSlice(const Slice& slice, const std::vector<int64_t>& shape, double scale = 1) {
  std::vector<int64_t> indices = globalIndices(slice, shape);
  Tensor t = Tensor::empty({slice.numel()}, ScalarType::Float64);
  for (size_t k = 0; k < indices.size(); ++k) t.data<double>()[k] = scale * indices[k] + 0.5;
  return t;
}

void expectFilled(const Tensor& t, const Slice& slice, const std::vector<int64_t>& shape,
                  const std::string& what, double scale = 1) {
  std::vector<int64_t> indices = globalIndices(slice, shape);
  for (size_t k = 0; k < indices.size(); ++k) {
    ASSERT_EQ(t.data<double>()[k], scale * indices[k] + 0.5)
        << what << " element " << k << " of slice " << slice.describe();
  }
}

// How a rank of size ranks holds a tensor of shape.
using Slicing =
    std::function<std::vector<Slice>(int rank, int size, const std::vector<int64_t>& shape)>;

int64_t numelOf(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

const std::map<std::string, Slicing> kSlicings = {
    {"replicated", [](int, int, const auto& shape) { return std::vector{Slice::whole(shape)}; }},
    {"rows",
     [](int rank, int size, const auto& shape) {
       const int64_t part = (shape[0] + size - 1) / size;
       const int64_t first = std::min<int64_t>(shape[0], rank * part);
       return std::vector{Slice::rows(first, std::min(shape[0], first + part) - first, shape)};
     }},
    {"columns",
     [](int rank, int size, const auto& shape) {
       const int64_t cols = shape.back();
       const int64_t part = (cols + size - 1) / size;
       const int64_t first = std::min<int64_t>(cols, rank * part);
       return std::vector{Slice::columns(first, std::min(cols, first + part) - first, shape)};
     }},
    // ZeroOptimizer's and FullyShardedLayers' cut: ceil(n / N) elements each, starting mid-row.
    {"flat",
     [](int rank, int size, const auto& shape) {
       const int64_t n = numelOf(shape);
       const int64_t part = (n + size - 1) / size;
       const int64_t begin = std::min<int64_t>(n, rank * part);
       return std::vector{Slice::flat(begin, std::min(n, begin + part) - begin)};
     }},
    // Rank 0 holds nothing, the others two flat pieces each, out of order.
    {"scattered",
     [](int rank, int size, const auto& shape) {
       std::vector<Slice> mine;
       if (size == 1) return std::vector{Slice::whole(shape)};
       const int64_t n = numelOf(shape);
       const int pieces = 2 * (size - 1);
       const int64_t part = (n + pieces - 1) / pieces;
       for (int p : {2 * rank - 1, 2 * rank - 2}) {
         if (rank == 0) break;
         const int64_t begin = std::min<int64_t>(n, p * part);
         mine.push_back(Slice::flat(begin, std::min(n, begin + part) - begin));
       }
       return mine;
     }},
};

const std::vector<int64_t> kShape = {7, 5, 3};

void addSlices(State& state, const std::string& name, const Slicing& slicing, int rank, int size,
               std::vector<std::pair<Slice, Tensor>>* kept = nullptr, bool fill = true) {
  for (const Slice& slice : slicing(rank, size, kShape)) {
    Tensor local =
        fill ? filledSlice(slice, kShape) : Tensor::zeros({slice.numel()}, ScalarType::Float64);
    state.addSlice(name, local, kShape, slice);
    if (kept) kept->push_back({slice, local});
  }
}

void saveOnRanks(const std::string& dir, int size, const std::string& slicing) {
  auto errors = test::errorsOnThreadRanks(size, 30s, [&](ProcessGroup& group) {
    State state;
    addSlices(state, "t", kSlicings.at(slicing), group.rank(), size);
    state.setInt("step", 10);
    save(state, dir, &group);
  });
  for (int r = 0; r < size; ++r) ASSERT_EQ(errors[r], "") << "save rank " << r;
}

TEST(CheckpointGeometry, RunsOfBoxesAndFlatRanges) {
  using detail::Run;
  auto runs = detail::runsOf(Slice::columns(1, 2, {3, 4}), {3, 4});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].global, 5);
  EXPECT_EQ(runs[1].local, 2);
  EXPECT_EQ(runs[1].length, 2);
  EXPECT_EQ(detail::runsOf(Slice::rows(1, 2, {3, 4}), {3, 4}).size(), 1u);
  EXPECT_EQ(detail::runsOf(Slice::whole({}), {}).size(), 1u);
  EXPECT_TRUE(detail::runsOf(Slice::rows(1, 0, {3, 4}), {3, 4}).empty());
  // A flat range and a box over the same rows are one slice.
  EXPECT_EQ(detail::canonicalKey(Slice::rows(1, 2, {3, 4}), {3, 4}),
            detail::canonicalKey(Slice::flat(4, 8), {3, 4}));
  auto overlaps = detail::overlapsOf(detail::runsOf(Slice::flat(3, 7), {3, 4}),
                                     detail::runsOf(Slice::columns(1, 2, {3, 4}), {3, 4}));
  ASSERT_EQ(overlaps.size(), 2u);  // elements 5, 6 and 9
  EXPECT_EQ(overlaps[0].target, 2);
  EXPECT_EQ(overlaps[0].source, 2);
  EXPECT_EQ(overlaps[0].length, 2);
  EXPECT_EQ(overlaps[1].target, 6);
  EXPECT_EQ(overlaps[1].source, 4);
  EXPECT_EQ(overlaps[1].length, 1);
}

TEST(CheckpointState, RefusesSlicesThatDoNotFit) {
  State state;
  Tensor four = Tensor::zeros({4}, ScalarType::Float32);
  EXPECT_THROW(state.addSlice("a", four, {3}, Slice::whole({3})), InvalidArgument);
  EXPECT_THROW(state.addSlice("a", four, {8}, Slice::flat(6, 4)), InvalidArgument);
  EXPECT_THROW(state.addSlice("a", four, {2, 4}, Slice::box({0}, {4})), InvalidArgument);
  state.addSlice("a", four, {8}, Slice::flat(4, 4));
  try {
    state.addSlice("a", four, {8}, Slice::flat(4, 4));
    FAIL() << "a slice added twice";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("flat[4:8] of tensor 'a' was added twice"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(state.getInt("missing"), InvalidArgument);
  state.setInt("step", -42);
  EXPECT_EQ(state.getInt("step"), -42);
}

TEST(Checkpoint, EveryDtypeAndValueRoundTripsInOneProcess) {
  TempDir tmp;
  State saved;
  std::vector<Tensor> tensors;
  for (ScalarType dtype : kAllScalarTypes) {
    Tensor t = Tensor::empty({3, 5}, dtype);
    auto* bytes = static_cast<uint8_t*>(t.data());
    for (size_t k = 0; k < t.nbytes(); ++k) bytes[k] = static_cast<uint8_t>(k * 7 + 1);
    if (dtype == ScalarType::Bool) {
      for (size_t k = 0; k < t.nbytes(); ++k) bytes[k] &= 1;
    }
    saved.add(std::string(c10d::name(dtype)), t);
    tensors.push_back(t);
  }
  Tensor scalar = Tensor::zeros({}, ScalarType::Int64);
  *scalar.data<int64_t>() = -5;
  saved.add("scalar", scalar);
  saved.add("empty", Tensor::zeros({0, 4}, ScalarType::Float32));
  saved.setValue("bytes", std::string("\0\xff\x01 binary", 10));
  saved.setInt("step", 7);
  save(saved, tmp / "ckpt");
  EXPECT_FALSE(fs::exists(tmp / "ckpt.partial"));

  State loaded;
  std::vector<Tensor> into;
  for (size_t i = 0; i < kAllScalarTypes.size(); ++i) {
    into.push_back(Tensor::zeros({3, 5}, kAllScalarTypes[i]));
    loaded.add(std::string(c10d::name(kAllScalarTypes[i])), into.back());
  }
  Tensor scalarInto = Tensor::zeros({}, ScalarType::Int64);
  loaded.add("scalar", scalarInto);
  loaded.add("empty", Tensor::zeros({0, 4}, ScalarType::Float32));
  bool hookRan = false;
  loaded.onLoad([&](const State& s) { hookRan = s.getInt("step") == 7; });
  load(loaded, tmp / "ckpt");
  for (size_t i = 0; i < into.size(); ++i) {
    EXPECT_EQ(std::memcmp(into[i].data(), tensors[i].data(), tensors[i].nbytes()), 0)
        << c10d::name(kAllScalarTypes[i]);
  }
  EXPECT_EQ(*scalarInto.data<int64_t>(), -5);
  EXPECT_EQ(*loaded.value("bytes"), std::string("\0\xff\x01 binary", 10));
  EXPECT_TRUE(hookRan);
}

// The data files are safetensors: an 8-byte little-endian header length, a JSON header with
// dtype, shape and data_offsets, then the bytes, which any reader can take.
TEST(Checkpoint, DataFilesAreSafetensors) {
  TempDir tmp;
  State state;
  Tensor t = Tensor::empty({2, 3}, ScalarType::Float32);
  for (int k = 0; k < 6; ++k) t.data<float>()[k] = 1.5f * k;
  state.add("w", t);
  save(state, tmp / "ckpt");
  std::ifstream in(tmp / "ckpt/rank-00000.safetensors", std::ios::binary);
  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  EXPECT_EQ((8 + length) % 8, 0u);
  EXPECT_NE(header.find("\"w\":{\"data_offsets\":[0,24],\"dtype\":\"F32\",\"shape\":[2,3]}"),
            std::string::npos)
      << header;
  float data[6];
  in.read(reinterpret_cast<char*>(data), sizeof(data));
  EXPECT_EQ(std::memcmp(data, t.data(), sizeof(data)), 0);
}

// Saved by 4 ranks in each slicing, loaded at 1 to 5 ranks in each slicing: every element lands
// where its global index says.
class Reshard : public ::testing::TestWithParam<std::string> {};

TEST_P(Reshard, LoadsAtEveryWorldSizeAndSlicing) {
  TempDir tmp;
  saveOnRanks(tmp / "ckpt", 4, GetParam());
  for (int size = 1; size <= 5; ++size) {
    for (const auto& [name, slicing] : kSlicings) {
      auto errors = test::errorsOnThreadRanks(size, 30s, [&](ProcessGroup& group) {
        State state;
        std::vector<std::pair<Slice, Tensor>> mine;
        addSlices(state, "t", slicing, group.rank(), size, &mine, /*fill=*/false);
        state.setInt("step", 0);
        load(state, tmp / "ckpt", &group);
        for (const auto& [slice, local] : mine) {
          expectFilled(local, slice, kShape, "loaded as " + name);
        }
        EXPECT_EQ(state.getInt("step"), 10);
      });
      for (int r = 0; r < size; ++r) {
        EXPECT_EQ(errors[r], "") << "saved " << GetParam() << " at 4, loaded " << name << " at "
                                 << size << ", rank " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Slicings, Reshard,
                         ::testing::Values("replicated", "rows", "columns", "flat", "scattered"));

TEST(Checkpoint, ReplicasAreWrittenOnceSpreadOverTheirHolders) {
  TempDir tmp;
  const std::vector<int64_t> shape = {64, 16};
  auto errors = test::errorsOnThreadRanks(4, 30s, [&](ProcessGroup& group) {
    State state;
    for (int i = 0; i < 8; ++i) {  // 8 replicated tensors of 8 KiB
      state.add("r" + std::to_string(i), filledSlice(Slice::whole(shape), shape));
    }
    save(state, tmp / "ckpt", &group);
  });
  for (int r = 0; r < 4; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  Metadata m = readMetadata(tmp / "ckpt");
  EXPECT_EQ(m.dataBytes(), 8 * 64 * 16 * 8);
  ASSERT_EQ(m.files.size(), 4u);  // two tensors each
  int64_t onDisk = 0;
  for (const SavedFile& f : m.files) {
    onDisk += static_cast<int64_t>(fs::file_size(tmp / ("ckpt/" + f.name)));
    EXPECT_EQ(f.bytes, static_cast<int64_t>(fs::file_size(tmp / ("ckpt/" + f.name))));
  }
  EXPECT_LT(onDisk, m.dataBytes() + 4 * 1024);  // the data once, plus four small headers
  EXPECT_EQ(m.tensors.at("r3").slices.at(0).holders.size(), 4u);
}

// The ranks disagree about the state: every rank fails, naming the ranks and the tensor, and no
// checkpoint appears.
TEST(Checkpoint, RanksThatDisagreeFailEveryRankNamingThem) {
  TempDir tmp;
  struct Case {
    const char* what;
    std::function<void(State&, int)> build;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"shape",
       [](State& s, int rank) {
         s.add("w", Tensor::zeros({rank == 2 ? 5 : 4}, ScalarType::Float32));
       },
       "tensor 'w' is float32[4] on rank 0 but float32[5] on rank 2"},
      {"dtype",
       [](State& s, int rank) {
         s.add("w", Tensor::zeros({4}, rank == 1 ? ScalarType::Float64 : ScalarType::Float32));
       },
       "tensor 'w' is float32[4] on rank 0 but float64[4] on rank 1"},
      {"overlap",
       [](State& s, int rank) {
         s.addSlice("w", Tensor::zeros({3}, ScalarType::Float32), {9}, Slice::flat(rank * 2, 3));
       },
       "overlap without being equal"},
      {"gap",
       [](State& s, int rank) {
         s.addSlice("w", Tensor::zeros({1}, ScalarType::Float32), {8}, Slice::flat(rank * 2, 1));
       },
       "tensor 'w' of 8 elements: no rank holds element 1"},
      {"value", [](State& s, int rank) { s.setInt("step", rank == 3 ? 11 : 10); },
       "value 'step' is set to other bytes on rank 3 than on rank 0"},
  };
  for (const Case& c : cases) {
    auto errors = test::errorsOnThreadRanks(4, 30s, [&](ProcessGroup& group) {
      State state;
      c.build(state, group.rank());
      EXPECT_THROW(save(state, tmp / c.what, &group), InvalidArgument);
      save(state, tmp / c.what, &group);
    });
    for (int r = 0; r < 4; ++r) {
      EXPECT_NE(errors[r].find(c.expected), std::string::npos)
          << c.what << " rank " << r << ": " << errors[r];
    }
    EXPECT_FALSE(fs::exists(tmp / c.what)) << c.what;
  }
}

TEST(Checkpoint, OneRanksBadStateFailsEveryRank) {
  TempDir tmp;
  auto errors = test::errorsOnThreadRanks(3, 30s, [&](ProcessGroup& group) {
    State state;
    state.add("w", Tensor::zeros({4}, ScalarType::Float32));
    SaveOptions options;
    if (group.rank() == 1) options.checksumBlockBytes = 0;
    save(state, tmp / "ckpt", &group, options);
  });
  EXPECT_NE(errors[1].find("checksumBlockBytes is 0"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("rank 1: checkpoint::save: checksumBlockBytes is 0"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[2].find("rank 1: "), std::string::npos) << errors[2];
}

// A checkpoint of two tensors saved by 2 ranks, for damaging.
std::string saveTwoTensors(const TempDir& tmp) {
  const std::string dir = tmp / "ckpt";
  auto errors = test::errorsOnThreadRanks(2, 30s, [&](ProcessGroup& group) {
    State state;
    const std::vector<int64_t> shape = {64, 64};
    state.addSlice("a", filledSlice(Slice::rows(group.rank() * 32, 32, shape), shape), shape,
                   Slice::rows(group.rank() * 32, 32, shape));
    state.add("b", filledSlice(Slice::whole({10}), {10}));
    state.setInt("step", 3);
    SaveOptions options;
    options.checksumBlockBytes = 4096;
    save(state, dir, &group, options);
  });
  EXPECT_EQ(errors[0] + errors[1], "");
  return dir;
}

// Loads the two tensors at one rank; returns the error ("" when it loaded) and checks that a
// failed load left the tensors untouched.
std::string loadTwoTensors(const std::string& dir, LoadOptions options = {},
                           std::vector<int64_t> shapeOfA = {64, 64},
                           ScalarType dtypeOfB = ScalarType::Float64, bool askB = true) {
  State state;
  Tensor a = Tensor::zeros(shapeOfA, ScalarType::Float64);
  Tensor b = Tensor::zeros({10}, dtypeOfB);
  state.add("a", a);
  if (askB) state.add("b", b);
  try {
    load(state, dir, nullptr, options);
  } catch (const CheckpointError& e) {
    for (int64_t k = 0; k < a.numel(); ++k) {
      if (a.data<double>()[k] != 0) return "partly loaded: " + std::string(e.what());
    }
    return e.what();
  }
  expectFilled(a, Slice::whole({64, 64}), {64, 64}, "a");
  return "";
}

void expectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << text;
}

TEST(CheckpointDamage, FlippedByteIsNamedWithTensorFileAndOffset) {
  TempDir tmp;
  const std::string dir = saveTwoTensors(tmp);
  const Metadata m = readMetadata(dir);
  const SavedSlice& second = m.tensors.at("a").slices.at(1);
  const std::string file = dir + "/" + m.files.at(second.file).name;
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(second.offset + 5000);
    char c;
    f.read(&c, 1);
    f.seekp(second.offset + 5000);
    c ^= 0x10;
    f.write(&c, 1);
  }
  const std::string error = loadTwoTensors(dir);
  expectContains(error, "tensor 'a', slice [32:64, 0:64]: bytes " +
                            std::to_string(second.offset + 4096) + " to " +
                            std::to_string(second.offset + 8192) + " of file '" + file +
                            "' do not match their checksum");
  // A load of only the first rows reads only the first file, and succeeds.
  State rows;
  Tensor first = Tensor::zeros({32, 64}, ScalarType::Float64);
  rows.addSlice("a", first, {64, 64}, Slice::rows(0, 32, {64, 64}));
  load(rows, dir, nullptr, LoadOptions{.allowUnexpected = true});
  expectFilled(first, Slice::rows(0, 32, {64, 64}), {64, 64}, "first rows");
}

TEST(CheckpointDamage, MissingAndTruncatedFilesAreNamed) {
  TempDir tmp;
  const std::string dir = saveTwoTensors(tmp);
  const Metadata m = readMetadata(dir);
  const std::string file = dir + "/" + m.files.at(1).name;
  fs::resize_file(file, fs::file_size(file) - 100);
  expectContains(loadTwoTensors(dir), "file '" + file + "' is " +
                                          std::to_string(m.files[1].bytes - 100) +
                                          " bytes but the metadata says " +
                                          std::to_string(m.files[1].bytes) + " (truncated)");
  fs::remove(file);
  expectContains(loadTwoTensors(dir), "file '" + file + "' is missing");
}

TEST(CheckpointDamage, MismatchesAreNamed) {
  TempDir tmp;
  const std::string dir = saveTwoTensors(tmp);
  expectContains(loadTwoTensors(dir, {}, {64, 65}),
                 "tensor 'a' is float64[64, 65] in the program but float64[64, 64] in checkpoint");
  expectContains(loadTwoTensors(dir, {}, {64, 64}, ScalarType::Float32),
                 "tensor 'b' is float32[10] in the program but float64[10]");
  expectContains(loadTwoTensors(dir, {}, {64, 64}, ScalarType::Float64, false),
                 "holds tensor 'b' that no rank asks for");
  EXPECT_EQ(loadTwoTensors(dir, {.allowUnexpected = true}, {64, 64}, ScalarType::Float64, false),
            "");
  State extra;
  extra.add("a", Tensor::zeros({64, 64}, ScalarType::Float64));
  extra.add("b", Tensor::zeros({10}, ScalarType::Float64));
  extra.add("c", Tensor::zeros({1}, ScalarType::Float64));
  extra.setInt("epoch", 1);
  try {
    load(extra, dir);
    FAIL() << "loaded a tensor the checkpoint lacks";
  } catch (const CheckpointError& e) {
    expectContains(e.what(), "lacks tensor 'c' that the program asks for");
  }
  extra.setInt("epoch", 1);
  load(extra, dir, nullptr, {.allowMissing = true});
  EXPECT_EQ(extra.getInt("step"), 3);
  EXPECT_EQ(extra.getInt("epoch"), 1);
}

TEST(CheckpointDamage, PartialAndMalformedCheckpointsAreRefused) {
  TempDir tmp;
  const std::string dir = saveTwoTensors(tmp);
  fs::rename(dir, dir + ".partial");
  expectContains(loadTwoTensors(dir + ".partial"), "it is a save that did not finish");
  expectContains(loadTwoTensors(dir), "only '" + dir + ".partial' exists");
  EXPECT_EQ(latest(tmp.path()), std::nullopt);
  fs::rename(dir + ".partial", dir);
  std::string json;
  {
    std::ifstream in(dir + "/metadata.json");
    json.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    std::ofstream out(dir + "/metadata.json");
    out << json.substr(0, json.size() / 2);
  }
  expectContains(loadTwoTensors(dir), "does not parse");
}

TEST(Checkpoint, SavingOverACheckpointNeedsOverwrite) {
  TempDir tmp;
  State state;
  Tensor t = Tensor::zeros({4}, ScalarType::Float32);
  state.add("t", t);
  save(state, tmp / "c");
  try {
    save(state, tmp / "c");
    FAIL() << "saved over a checkpoint";
  } catch (const CheckpointError& e) {
    expectContains(e.what(), "exists already; save to a new folder or set SaveOptions::overwrite");
  }
  t.data<float>()[0] = 9;
  save(state, tmp / "c", nullptr, {.overwrite = true});
  t.data<float>()[0] = 0;
  load(state, tmp / "c");
  EXPECT_EQ(t.data<float>()[0], 9);
  EXPECT_FALSE(fs::exists(tmp / "c.old"));
}

TEST(Checkpoint, LatestAndKeepLast) {
  TempDir tmp;
  for (int step : {30, 10, 20}) {
    State state;
    state.add("t", Tensor::zeros({4}, ScalarType::Float32));
    state.setInt("step", step);
    save(state, tmp / ("step-" + std::to_string(step)));
  }
  fs::create_directories(tmp / "step-40.partial");
  EXPECT_EQ(latest(tmp.path()), tmp / "step-30");
  EXPECT_EQ(completeCheckpoints(tmp.path()),
            (std::vector<std::string>{tmp / "step-10", tmp / "step-20", tmp / "step-30"}));
  auto removed = keepLast(tmp.path(), 2);
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(tmp / "step-10"));
  EXPECT_FALSE(fs::exists(tmp / "step-40.partial"));
  EXPECT_TRUE(fs::exists(tmp / "step-20"));
  EXPECT_EQ(latest(tmp / "nothing-here"), std::nullopt);
}

// Training goes on while the save writes: the checkpoint holds the values at save() time.
TEST(CheckpointAsync, SavesWhatWasThereWhenSaveReturned) {
  TempDir tmp;
  auto errors = test::errorsOnThreadRanks(2, 30s, [&](ProcessGroup& group) {
    AsyncSaver saver(group);
    const std::vector<int64_t> shape = {256, 64};
    const Slice mine = Slice::rows(group.rank() * 128, 128, shape);
    Tensor w = filledSlice(mine, shape);
    State state;
    state.addSlice("w", w, shape, mine);
    for (int step = 1; step <= 3; ++step) {
      state.setInt("step", step);
      auto done = saver.save(state, tmp / ("s" + std::to_string(step)));
      // A training step on the same group while the save runs on its own.
      for (int64_t k = 0; k < w.numel(); ++k) w.data<double>()[k] += 1;
      group.allreduce(w)->wait();
      for (int64_t k = 0; k < w.numel(); ++k) w.data<double>()[k] /= 2;
      if (step == 2) done->wait();
    }
    saver.wait();
    EXPECT_GT(saver.stagingBytes(), 0u);
    group.barrier()->wait();
    State check;
    Tensor back = Tensor::zeros({128, 64}, ScalarType::Float64);
    check.addSlice("w", back, shape, mine);
    check.setInt("step", 0);
    load(check, tmp / "s1", &group);
    expectFilled(back, mine, shape, "s1");
    EXPECT_EQ(check.getInt("step"), 1);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(CheckpointAsync, ABackgroundFailureSurfacesAtTheNextCall) {
  TempDir tmp;
  fs::create_directories(tmp / "taken");
  std::ofstream(tmp / "file") << "not a folder";
  auto errors = test::errorsOnThreadRanks(2, 30s, [&](ProcessGroup& group) {
    AsyncSaver saver(group);
    State state;
    state.add("t", Tensor::zeros({4}, ScalarType::Float32));
    saver.save(state, tmp / "file/ckpt");  // its folder cannot be made
    try {
      saver.save(state, tmp / "ok");
      ADD_FAILURE() << "the failed save was not reported";
    } catch (const CheckpointError& e) {
      expectContains(e.what(), tmp / "file/ckpt.partial");
    }
    saver.save(state, tmp / "ok")->wait();
    saver.wait();
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_TRUE(fs::exists(tmp / "ok/metadata.json"));
}

TEST(CheckpointAsync, RefusesWhileBusyWhenAsked) {
  TempDir tmp;
  auto errors = test::errorsOnThreadRanks(1, 30s, [&](ProcessGroup& group) {
    AsyncSaver saver(group, /*refuseWhileBusy=*/true);
    State state;
    state.add("t", Tensor::zeros({1 << 22}, ScalarType::Float32));
    auto first = saver.save(state, tmp / "a");
    bool refused = false;
    try {
      saver.save(state, tmp / "b");
    } catch (const StateError&) {
      refused = true;
    }
    // The first save may have finished before the second call: then the second one runs.
    saver.wait();
    EXPECT_TRUE(first->completed());
    EXPECT_EQ(fs::exists(tmp / "b/metadata.json"), !refused);
    EXPECT_TRUE(fs::exists(tmp / "a/metadata.json"));
  });
  EXPECT_EQ(errors[0], "");
}

}  // namespace
}  // namespace c10d::inline v1::checkpoint

namespace c10d::inline v1::checkpoint {
namespace {

// Edits metadata.json of dir with edit, as a damaged or hostile file would be.
void editMetadata(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(dir + "/metadata.json");
  nlohmann::json json = nlohmann::json::parse(in);
  in.close();
  edit(json);
  std::ofstream(dir + "/metadata.json") << json.dump(1);
}

TEST(CheckpointMetadata, SlicesThatOverlapOrLeaveGapsAreRefusedWhenRead) {
  TempDir tmp;
  const std::string dir = saveTwoTensors(tmp);
  // Both slices of 'a' said to be its first rows: the count of elements still adds up.
  editMetadata(dir, [](nlohmann::json& j) {
    j["tensors"]["a"]["slices"][1]["offsets"] = j["tensors"]["a"]["slices"][0]["offsets"];
  });
  expectContains(loadTwoTensors(dir), "the slices of tensor 'a' overlap at element 0");
  EXPECT_FALSE(latest(tmp.path()).has_value());  // not a checkpoint latest() may offer
}

TEST(CheckpointMetadata, HostileNumbersAndUnknownDtypesAreRefusedNamingTheFolder) {
  TempDir tmp;
  const std::string dir = saveTwoTensors(tmp);
  editMetadata(dir, [](nlohmann::json& j) { j["tensors"]["b"]["dtype"] = "float8_e4m3fn"; });
  expectContains(loadTwoTensors(dir), "tensor 'b' has dtype 'float8_e4m3fn', which this build");
  expectContains(loadTwoTensors(dir), dir);
  editMetadata(dir, [](nlohmann::json& j) {
    j["tensors"]["b"]["dtype"] = "float64";
    j["tensors"]["b"]["slices"][0]["offset"] = INT64_MAX - 8;
  });
  expectContains(loadTwoTensors(dir), "lies outside its file");
  editMetadata(dir, [](nlohmann::json& j) {
    j["tensors"]["b"]["slices"][0]["offset"] = 0;
    j["checksum"]["block_bytes"] = int64_t{1} << 40;
  });
  expectContains(loadTwoTensors(dir), "checksum block_bytes 1099511627776");
}

TEST(CheckpointAgreement, RanksWithAnotherFolderOrBlockSizeFailEveryRank) {
  TempDir tmp;
  auto errors = test::errorsOnThreadRanks(3, 30s, [&](ProcessGroup& group) {
    State state;
    state.add("w", Tensor::zeros({4}, ScalarType::Float32));
    save(state, group.rank() == 2 ? tmp / "elsewhere" : tmp / "c", &group);
  });
  for (int r = 0; r < 3; ++r) {
    expectContains(errors[r], "rank 2 saves with folder \"" + tmp / "elsewhere" +
                                  "\" but rank 0 with \"" + tmp / "c\"");
  }
  errors = test::errorsOnThreadRanks(2, 30s, [&](ProcessGroup& group) {
    State state;
    state.add("w", Tensor::zeros({4}, ScalarType::Float32));
    save(state, tmp / "d", &group, {.checksumBlockBytes = group.rank() == 1 ? 4096 : 1 << 20});
  });
  for (int r = 0; r < 2; ++r) expectContains(errors[r], "rank 1 saves with block 4096");
  EXPECT_FALSE(fs::exists(tmp / "c"));
  EXPECT_FALSE(fs::exists(tmp / "d"));
}

TEST(CheckpointAgreement, FolderNamesAndTensorNamesThatWouldBeAmbiguousAreRefused) {
  TempDir tmp;
  State state;
  EXPECT_THROW(state.add("w@[0:2]", Tensor::zeros({2}, ScalarType::Float32)), InvalidArgument);
  EXPECT_THROW(state.add("__metadata__", Tensor::zeros({2}, ScalarType::Float32)), InvalidArgument);
  state.add("w", Tensor::zeros({2}, ScalarType::Float32));
  EXPECT_THROW(save(state, tmp / "x.partial"), InvalidArgument);
  EXPECT_THROW(save(state, tmp / "x.old"), InvalidArgument);
  save(state, tmp / "trailing/");  // the folder "trailing"
  EXPECT_TRUE(fs::exists(tmp / "trailing/metadata.json"));
  EXPECT_FALSE(fs::exists(tmp / "trailing/.partial"));
}

TEST(CheckpointAsync, OneRankFailingToStageFailsEveryRankAndNoSaveHangs) {
  TempDir tmp;
  auto errors = test::errorsOnThreadRanks(2, 30s, [&](ProcessGroup& group) {
    AsyncSaver saver(group);
    State state;
    state.add("t", Tensor::zeros({4}, ScalarType::Float32));
    state.beforeSave(
        [&group] { C10D_CHECK(group.rank() != 1, InvalidArgument, "staging refused on purpose"); });
    saver.save(state, tmp / "never");
  });
  expectContains(errors[0], "rank 1: staging refused on purpose");
  expectContains(errors[1], "staging refused on purpose");
  EXPECT_FALSE(fs::exists(tmp / "never"));
}

TEST(Checkpoint, LatestOrdersByCommitTimeUnlessEveryCheckpointHasAStep) {
  TempDir tmp;
  State state;
  state.add("t", Tensor::zeros({4}, ScalarType::Float32));
  state.setInt("step", 20);
  save(state, tmp / "a");
  State noStep;
  noStep.add("t", Tensor::zeros({4}, ScalarType::Float32));
  save(noStep, tmp / "i");
  state.setInt("step", 10);  // a job that resumed from an older checkpoint
  save(state, tmp / "b");
  EXPECT_EQ(completeCheckpoints(tmp.path()),
            (std::vector<std::string>{tmp / "a", tmp / "i", tmp / "b"}));
  fs::remove_all(tmp / "i");
  EXPECT_EQ(latest(tmp.path()), tmp / "a");
}

}  // namespace
}  // namespace c10d::inline v1::checkpoint

namespace c10d::inline v1::checkpoint {
namespace {

// A tensor larger than a reading thread's task (32 MiB), with checksum blocks that split
// elements, loaded as columns: tasks end mid-row and mid-element, threads copy next to each
// other, every element checked (and the fast path, checkFirst off, alike).
TEST(CheckpointLarge, ColumnsOfALargeTensorAcrossTasksAndOddBlocks) {
  TempDir tmp;
  const std::vector<int64_t> shape = {3000, 2100};  // 50.4 MB of float64
  auto errors = test::errorsOnThreadRanks(2, 60s, [&](ProcessGroup& group) {
    const Slice mine = Slice::rows(group.rank() * 1500, 1500, shape);
    State state;
    state.addSlice("big", filledSlice(mine, shape), shape, mine);
    save(state, tmp / "big", &group, {.checksumBlockBytes = 4097});
  });
  for (int r = 0; r < 2; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  for (bool checkFirst : {true, false}) {
    errors = test::errorsOnThreadRanks(3, 60s, [&](ProcessGroup& group) {
      const Slice mine = Slice::columns(group.rank() * 700, 700, shape);
      Tensor local = Tensor::zeros({mine.numel()}, ScalarType::Float64);
      State state;
      state.addSlice("big", local, shape, mine);
      load(state, tmp / "big", &group, {.checkFirst = checkFirst});
      expectFilled(local, mine, shape, checkFirst ? "checked first" : "checked as copied");
    });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  }
}

}  // namespace
}  // namespace c10d::inline v1::checkpoint

namespace c10d::inline v1::checkpoint {
namespace {

// A rank that never comes to the save: the others end in the group's timeout, naming it, and no
// checkpoint appears.
TEST(CheckpointAgreement, ARankThatNeverSavesIsNamedAtTheTimeout) {
  TempDir tmp;
  auto errors = test::errorsOnThreadRanks(2, 2s, [&](ProcessGroup& group) {
    if (group.rank() == 1) {
      std::this_thread::sleep_for(4s);
      return;
    }
    State state;
    state.add("w", Tensor::zeros({4}, ScalarType::Float32));
    save(state, tmp / "c", &group);
  });
  EXPECT_EQ(errors[1], "");
  expectContains(errors[0], "rank(s) 1 of group 'default' are behind: they never reached");
  EXPECT_FALSE(fs::exists(tmp / "c"));
}

}  // namespace
}  // namespace c10d::inline v1::checkpoint

namespace c10d::inline v1::checkpoint {
namespace {

Tensor onDevice(const Tensor& host) {
  Tensor dev = Tensor::empty(host.sizes(), host.dtype(), Device::cuda(0));
  copyTensor(dev, host);
  return dev;
}

Tensor onHost(const Tensor& dev) {
  Tensor host = Tensor::empty(dev.sizes(), dev.dtype());
  copyTensor(host, dev);
  return host;
}

// CUDA tensors are staged through host memory by save, load and the async saver. Two thread
// ranks share the GPU, each holding half of the rows; the checkpoint is loaded back at world
// size 1 into one CUDA tensor, and the async save must hold the values of save() time even though
// the device tensor changes right after. Runs where the device tool lends a GPU.
TEST(CheckpointOnDevice, CudaSlicesSaveLoadAndSaveInTheBackground) {
  if (cudaDeviceCount() == 0) {
    GTEST_SKIP() << "no CUDA device here: this test saves and loads CUDA tensors (run it on the "
                    "device machine)";
  }
  TempDir tmp;
  const std::vector<int64_t> shape = {96, 33};
  auto errors = test::errorsOnThreadRanks(2, 60s, [&](ProcessGroup& group) {
    const Slice mine = Slice::rows(group.rank() * 48, 48, shape);
    Tensor w = onDevice(filledSlice(mine, shape));
    State state;
    state.addSlice("w", w, shape, mine);
    state.setInt("step", 7);
    save(state, tmp / "sync", &group);
    AsyncSaver saver(group);
    auto done = saver.save(state, tmp / "async");
    copyTensor(w, filledSlice(mine, shape, 2));  // training moves on while the save writes
    done->wait();
    Tensor back = onDevice(Tensor::zeros({48 * 33}, ScalarType::Float64));
    State check;
    check.addSlice("w", back, shape, mine);
    check.setInt("step", 0);
    load(check, tmp / "async", &group);
    expectFilled(onHost(back), mine, shape, "async save, loaded at 2 ranks");
    EXPECT_EQ(check.getInt("step"), 7);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  const Slice all = Slice::whole(shape);
  Tensor whole = onDevice(Tensor::zeros({96 * 33}, ScalarType::Float64));
  State check;
  check.addSlice("w", whole, shape, all);
  check.setInt("step", 0);
  load(check, tmp / "sync");
  expectFilled(onHost(whole), all, shape, "sync save, loaded at 1 rank");
  EXPECT_EQ(check.getInt("step"), 7);
}

}  // namespace
}  // namespace c10d::inline v1::checkpoint
