// checkpoint::save: three phases, each ending in an exchange among the ranks (Exchange.hpp).
//   plan:   rank 0 makes DIR.partial; every rank says what it holds; every rank then derives the
//           same plan (who writes which slice) from the same list;
//   write:  every rank writes its slices into its own file and syncs it;
//   commit: rank 0 writes metadata.json from everyone's checksums and renames DIR.partial to DIR.

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/Exchange.hpp"
#include "c10d/checkpoint/Files.hpp"
#include "c10d/checkpoint/Geometry.hpp"
#include "c10d/checkpoint/Metadata.hpp"
#include "c10d/checkpoint/Safetensors.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::checkpoint {
namespace {

using Json = nlohmann::json;

// One slice as some rank holds it.
struct Held {
  std::string name;
  ScalarType dtype;
  std::vector<int64_t> shape;
  Slice slice;
  int rank;
  size_t index;  // in that rank's State::tensors()
};

// A slice held by one or more ranks: written once, by writer.
struct UniqueSlice {
  std::string name;
  Slice slice;
  int64_t bytes = 0;
  std::vector<int> holders;        // ascending
  std::vector<size_t> localIndex;  // each holder's index of it
  int writer = -1;
};

struct Plan {
  std::map<std::string, std::pair<ScalarType, std::vector<int64_t>>> tensors;
  std::vector<UniqueSlice> slices;  // ordered by name, then canonical key
  std::map<std::string, std::string> values;
};

std::string describeHolders(const UniqueSlice& s) {
  std::string text = s.holders.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < s.holders.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(s.holders[i]);
  }
  return text;
}

Json describeLocal(const State& state) {
  Json tensors = Json::array();
  for (const StateTensor& t : state.tensors()) {
    tensors.push_back({{"name", t.name},
                       {"dtype", std::string(c10d::name(t.local.dtype()))},
                       {"shape", t.globalShape},
                       {"flat", t.slice.kind == Slice::Kind::Flat},
                       {"offsets", t.slice.offsets},
                       {"sizes", t.slice.sizes}});
  }
  Json values = Json::object();
  for (const auto& [name, bytes] : state.values()) {
    values[name] = Json::binary(std::vector<uint8_t>(bytes.begin(), bytes.end()));
  }
  return Json{{"tensors", std::move(tensors)}, {"values", std::move(values)}};
}

// The same on every rank: built from every rank's list in rank order. Throws InvalidArgument for
// what the ranks disagree about.
Plan makePlan(const std::vector<Json>& lists) {
  Plan plan;
  for (size_t r = 1; r < lists.size(); ++r) {
    for (const char* field : {"folder", "block", "overwrite"}) {
      C10D_CHECK(lists[r].at(field) == lists[0].at(field), InvalidArgument,
                 "checkpoint::save: rank ", r, " saves with ", field, " ",
                 lists[r].at(field).dump(), " but rank 0 with ", lists[0].at(field).dump(),
                 "; every rank must save to the same folder with the same options");
    }
  }
  std::map<std::string, int> firstHolder;
  std::map<std::string, int> valueSetter;
  std::map<std::pair<std::string, std::string>, size_t> byKey;
  for (size_t r = 0; r < lists.size(); ++r) {
    const int rank = static_cast<int>(r);
    const Json& list = lists[r];
    for (size_t i = 0; i < list.at("tensors").size(); ++i) {
      const Json& t = list.at("tensors")[i];
      Held held{t.at("name").get<std::string>(),
                scalarTypeFromName(t.at("dtype").get<std::string>()),
                t.at("shape").get<std::vector<int64_t>>(),
                Slice{t.at("flat").get<bool>() ? Slice::Kind::Flat : Slice::Kind::Box,
                      t.at("offsets").get<std::vector<int64_t>>(),
                      t.at("sizes").get<std::vector<int64_t>>()},
                rank,
                i};
      auto [known, added] = plan.tensors.try_emplace(held.name, held.dtype, held.shape);
      if (added) {
        firstHolder[held.name] = rank;
      } else {
        C10D_CHECK(known->second.first == held.dtype && known->second.second == held.shape,
                   InvalidArgument, "checkpoint::save: tensor '", held.name, "' is ",
                   shapeText(known->second.first, known->second.second), " on rank ",
                   firstHolder[held.name], " but ", shapeText(held.dtype, held.shape), " on rank ",
                   rank);
      }
      const std::string key = detail::canonicalKey(held.slice, held.shape);
      auto [at, fresh] = byKey.try_emplace({held.name, key}, plan.slices.size());
      if (fresh) {
        UniqueSlice unique;
        unique.name = held.name;
        unique.slice = held.slice;
        unique.bytes = held.slice.numel() * static_cast<int64_t>(elementSize(held.dtype));
        plan.slices.push_back(std::move(unique));
      }
      UniqueSlice& unique = plan.slices[at->second];
      C10D_CHECK(unique.holders.empty() || unique.holders.back() != rank, InvalidArgument,
                 "checkpoint::save: rank ", rank, " holds slice ", held.slice.describe(),
                 " of tensor '", held.name, "' twice");
      unique.holders.push_back(rank);
      unique.localIndex.push_back(held.index);
    }
    for (const auto& [name, bytes] : list.at("values").items()) {
      const auto& binary = bytes.get_binary();
      std::string value(binary.begin(), binary.end());
      auto [known, added] = plan.values.try_emplace(name, value);
      if (added) {
        valueSetter[name] = rank;
      } else {
        C10D_CHECK(known->second == value, InvalidArgument, "checkpoint::save: value '", name,
                   "' is set to other bytes on rank ", rank, " than on rank ", valueSetter[name],
                   "; a value several ranks set must be equal (give per-rank values their own "
                   "names)");
      }
    }
  }
  // Each tensor's slices must cover it once: sort their runs and look for overlaps and gaps.
  std::map<std::string, std::vector<std::pair<detail::Run, size_t>>> runs;
  for (size_t u = 0; u < plan.slices.size(); ++u) {
    const UniqueSlice& s = plan.slices[u];
    for (const detail::Run& run : detail::runsOf(s.slice, plan.tensors.at(s.name).second)) {
      runs[s.name].push_back({run, u});
    }
  }
  for (const auto& [name, typeAndShape] : plan.tensors) {
    int64_t numel = 1;
    for (int64_t s : typeAndShape.second) numel *= s;
    const auto fault = detail::coverFault(runs[name], numel);
    if (!fault) continue;
    if (fault->overlap) {
      const UniqueSlice& a = plan.slices[fault->before];
      const UniqueSlice& b = plan.slices[fault->after];
      C10D_THROW(InvalidArgument, "checkpoint::save: tensor '", name, "': slice ",
                 a.slice.describe(), " (", describeHolders(a), ") and slice ", b.slice.describe(),
                 " (", describeHolders(b), ") overlap without being equal");
    }
    C10D_THROW(InvalidArgument, "checkpoint::save: tensor '", name, "' of ", numel,
               " elements: no rank holds element ", fault->element,
               " (the slices of all ranks together must cover the tensor)");
  }
  // Writers: the largest slices first, each to the holder with the fewest bytes so far, so the
  // ranks holding replicas share the writing.
  std::vector<size_t> order(plan.slices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return plan.slices[a].bytes > plan.slices[b].bytes; });
  std::vector<int64_t> load(lists.size(), 0);
  for (size_t u : order) {
    UniqueSlice& s = plan.slices[u];
    int best = s.holders[0];
    for (int holder : s.holders) {
      if (load[holder] < load[best]) best = holder;
    }
    s.writer = best;
    load[best] += s.bytes;
  }
  return plan;
}

std::string fileName(int rank) {
  char name[48];
  std::snprintf(name, sizeof(name), "rank-%05d.safetensors", rank);
  return name;
}

// The key of a slice in its file: the tensor's name when whole, else name@slice.
std::string keyOf(const UniqueSlice& s, const std::vector<int64_t>& shape) {
  return s.slice.numel() > 0 && s.slice.kind == Slice::Kind::Box && s.slice == Slice::whole(shape)
             ? s.name
             : s.name + "@" + s.slice.describe();
}

// Writes this rank's slices into path as a safetensors file, syncs it, and returns what the
// metadata needs of each.
Json writeFile(const State& state, const Plan& plan, int rank, const std::string& dir,
               int64_t blockBytes) {
  struct Item {
    const UniqueSlice* slice;
    const StateTensor* tensor;
    std::string key;
    int64_t offset = 0;
  };
  std::vector<Item> items;
  for (const UniqueSlice& s : plan.slices) {
    if (s.writer != rank) continue;
    const size_t at = std::find(s.holders.begin(), s.holders.end(), rank) - s.holders.begin();
    items.push_back(
        {&s, &state.tensors().at(s.localIndex.at(at)), keyOf(s, plan.tensors.at(s.name).second)});
  }
  Json result{{"file", nullptr}, {"bytes", 0}, {"slices", Json::array()}};
  if (items.empty()) return result;
  std::vector<detail::SafetensorsEntry> entries;
  int64_t dataOffset = 0;
  for (Item& item : items) {
    const StateTensor& t = *item.tensor;
    entries.push_back({item.key, t.local.dtype(), t.slice.sizes, item.slice->bytes});
    item.offset = dataOffset;
    dataOffset += item.slice->bytes;
  }
  const std::string header = detail::safetensorsHeader(
      entries, {{"format", "c10d-checkpoint"}, {"rank", std::to_string(rank)}});
  const int64_t start = static_cast<int64_t>(header.size());
  const std::string name = fileName(rank);
  detail::File file = detail::File::create(dir + "/" + name);
  file.writeAt(header.data(), start, 0);
  for (const Item& item : items) {
    const Tensor& local = item.tensor->local;
    Tensor host = local;
    if (!local.device().isCPU()) {
      host = Tensor::empty(local.sizes(), local.dtype());
      copyTensor(host, local);
    }
    const char* bytes = static_cast<const char*>(host.data());
    Json sums = Json::array();
    for (int64_t at = 0; at < item.slice->bytes; at += blockBytes) {
      const int64_t n = std::min(blockBytes, item.slice->bytes - at);
      file.writeAt(bytes + at, n, start + item.offset + at);
      sums.push_back(XXH3_64bits(bytes + at, static_cast<size_t>(n)));
    }
    result["slices"].push_back({{"name", item.slice->name},
                                {"key", item.key},
                                {"offset", start + item.offset},
                                {"checksums", std::move(sums)}});
  }
  file.sync();
  result["file"] = name;
  result["bytes"] = start + dataOffset;
  return result;
}

Metadata makeMetadata(const Plan& plan, const std::vector<Json>& written, int worldSize,
                      const SaveOptions& options) {
  Metadata m;
  m.worldSize = worldSize;
  m.layout = options.layout;
  m.createdUnixNanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  m.checksumBlockBytes = options.checksumBlockBytes;
  m.values = plan.values;
  std::map<std::pair<int, std::string>, const Json*> byKey;  // (writer, key) -> its result
  for (size_t r = 0; r < written.size(); ++r) {
    if (written[r].at("file").is_null()) continue;
    m.files.push_back({written[r].at("file").get<std::string>(), static_cast<int>(r),
                       written[r].at("bytes").get<int64_t>()});
    for (const Json& s : written[r].at("slices")) {
      byKey[{static_cast<int>(r), s.at("key").get<std::string>()}] = &s;
    }
  }
  std::map<int, size_t> fileOf;
  for (size_t f = 0; f < m.files.size(); ++f) fileOf[m.files[f].rank] = f;
  for (const auto& [name, typeAndShape] : plan.tensors) {
    m.tensors[name] = SavedTensor{typeAndShape.first, typeAndShape.second, {}};
  }
  for (const UniqueSlice& s : plan.slices) {
    const std::vector<int64_t>& shape = plan.tensors.at(s.name).second;
    SavedSlice saved;
    saved.slice = s.slice;
    saved.key = keyOf(s, shape);
    saved.bytes = s.bytes;
    saved.holders.push_back(s.writer);
    for (int h : s.holders) {
      if (h != s.writer) saved.holders.push_back(h);
    }
    const Json& result = *byKey.at({s.writer, saved.key});
    saved.file = fileOf.at(s.writer);
    saved.offset = result.at("offset").get<int64_t>();
    saved.checksums = result.at("checksums").get<std::vector<uint64_t>>();
    m.tensors[s.name].slices.push_back(std::move(saved));
  }
  return m;
}

void commit(const Metadata& metadata, const std::string& dir, const std::string& partial,
            bool overwrite) {
  // Every file the metadata lists is there, whole: a rank that wrote somewhere else (another
  // file system at the same path) is caught before the checkpoint is committed.
  for (const SavedFile& f : metadata.files) {
    const std::string path = partial + "/" + f.name;
    const int64_t bytes = detail::pathExists(path) ? detail::File::open(path).size() : -1;
    C10D_CHECK(bytes == f.bytes, CheckpointError, "checkpoint::save: rank ", f.rank, " wrote ",
               f.bytes, " bytes into '", path, "', but rank 0 finds ",
               bytes < 0 ? std::string("no such file") : std::to_string(bytes) + " bytes",
               " there: do the ranks see the same file system at this path?");
  }
  detail::writeTextFile(partial + "/" + kMetadataFile, metadataToJson(metadata));
  detail::syncDirectory(partial);
  if (overwrite && detail::pathExists(dir)) {
    // Between the two renames the old checkpoint is dir.old, complete, and latest() finds it.
    const std::string old = dir + ".old";
    if (detail::pathExists(old)) detail::retireFolder(old);
    detail::renamePath(dir, old);
    detail::renamePath(partial, dir);
    detail::syncDirectory(detail::parentOf(dir));
    detail::retireFolder(old);
  } else {
    detail::renamePath(partial, dir);
  }
  detail::syncDirectory(detail::parentOf(dir));
}

}  // namespace

void save(const State& state, const std::string& folder, ProcessGroup* group,
          const SaveOptions& options) {
  const int rank = group ? group->rank() : 0;
  const int size = group ? group->size() : 1;
  const std::string dir = detail::withoutTrailingSlashes(folder);
  const std::string partial = dir + ".partial";

  Json mine;
  detail::Outcome outcome = detail::capture([&] {
    for (const auto& hook : state.saveHooks()) hook();
    C10D_CHECK(!dir.empty() && dir != "/", InvalidArgument, "checkpoint::save: folder '", folder,
               "' cannot hold a checkpoint");
    for (const char* reserved : {".partial", ".old"}) {
      const std::string suffix = reserved;
      C10D_CHECK(dir.size() <= suffix.size() ||
                     dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) != 0,
                 InvalidArgument, "checkpoint::save: folder '", folder, "' ends in '", suffix,
                 "', which names checkpoints in the making or being replaced; choose another name");
    }
    C10D_CHECK(
        options.checksumBlockBytes > 0 && options.checksumBlockBytes <= kMaxChecksumBlockBytes,
        InvalidArgument, "checkpoint::save: checksumBlockBytes is ", options.checksumBlockBytes,
        "; it must be 1 to ", kMaxChecksumBlockBytes);
    if (rank == 0) {
      C10D_CHECK(options.overwrite || !detail::pathExists(dir), CheckpointError,
                 "checkpoint::save: '", dir,
                 "' exists already; save to a new folder or set SaveOptions::overwrite");
      detail::removeTree(partial);  // a save to this folder that died
      detail::makeDirectory(partial);
    }
    mine = describeLocal(state);
    // What every rank must agree on, checked in makePlan.
    mine["folder"] = dir;
    mine["block"] = options.checksumBlockBytes;
    mine["overwrite"] = options.overwrite;
  });
  const std::vector<Json> lists = detail::exchange(group, rank, outcome, mine);
  const Plan plan = makePlan(lists);

  Json written;
  outcome = detail::capture(
      [&] { written = writeFile(state, plan, rank, partial, options.checksumBlockBytes); });
  detail::exchange(group, rank, outcome, Json());
  // Only rank 0 needs what each rank wrote (its checksums are the larger part of it).
  const std::vector<uint8_t> encoded = Json::to_msgpack(written);
  const std::vector<std::string> texts =
      detail::gatherText(group, std::string(encoded.begin(), encoded.end()), 0);

  outcome = detail::capture([&] {
    if (rank != 0) return;
    std::vector<Json> results;
    for (const std::string& text : texts) results.push_back(Json::from_msgpack(text));
    commit(makeMetadata(plan, results, size, options), dir, partial, options.overwrite);
  });
  detail::exchange(group, rank, outcome, Json());
}

}  // namespace c10d::inline v1::checkpoint
