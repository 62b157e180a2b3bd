// checkpoint::load: three phases, each ending in an exchange among the ranks (Exchange.hpp).
//   match:  every rank reads metadata.json, matches its State against it and works out which
//           bytes of which files its slices overlap; the ranks then check together that no
//           tensor of the checkpoint is left unasked for;
//   read:   every rank reads those blocks, checks their checksums and copies the overlaps into
//           staging memory of its own;
//   fill:   only when every rank read all it needs are the State's tensors written.

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/Exchange.hpp"
#include "c10d/checkpoint/Files.hpp"
#include "c10d/checkpoint/Geometry.hpp"
#include "c10d/checkpoint/Metadata.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v0::checkpoint {
namespace {

using Json = nlohmann::json;

std::string shapeText(ScalarType dtype, const std::vector<int64_t>& shape) {
  std::string text = std::string(c10d::name(dtype)) + "[";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

// Up to ten names of a list, and how many more.
std::string listNames(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 10; ++i) text += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > 10) text += " and " + std::to_string(names.size() - 10) + " more";
  return text;
}

// What one of the State's tensors takes from one stored slice.
struct Piece {
  size_t target;                  // index in State::tensors()
  const std::string* name;        // the tensor's
  const SavedSlice* source;
  std::vector<detail::Overlap> overlaps;  // in elements
};

struct Reads {
  std::vector<Piece> pieces;
  std::vector<std::string> requested;  // the checkpoint's tensors this rank asks for
};

Reads match(const State& state, const Metadata& m, const std::string& dir,
            const LoadOptions& options) {
  Reads reads;
  std::vector<std::string> missing;
  std::set<std::string> asked;
  for (size_t i = 0; i < state.tensors().size(); ++i) {
    const StateTensor& t = state.tensors()[i];
    auto it = m.tensors.find(t.name);
    if (it == m.tensors.end()) {
      missing.push_back(t.name);
      continue;
    }
    const SavedTensor& saved = it->second;
    C10D_CHECK(saved.dtype == t.local.dtype() && saved.shape == t.globalShape, CheckpointError,
               "checkpoint::load: tensor '", t.name, "' is ",
               shapeText(t.local.dtype(), t.globalShape), " in the program but ",
               shapeText(saved.dtype, saved.shape), " in checkpoint '", dir, "'");
    if (asked.insert(t.name).second) reads.requested.push_back(t.name);
    const std::vector<detail::Run> target = detail::runsOf(t.slice, t.globalShape);
    int64_t covered = 0;
    for (const SavedSlice& s : saved.slices) {
      std::vector<detail::Overlap> overlaps =
          detail::overlapsOf(target, detail::runsOf(s.slice, saved.shape));
      if (overlaps.empty()) continue;
      for (const detail::Overlap& o : overlaps) covered += o.length;
      reads.pieces.push_back({i, &it->first, &s, std::move(overlaps)});
    }
    C10D_CHECK(covered == t.local.numel(), CheckpointError, "checkpoint::load: checkpoint '", dir,
               "' holds ", covered, " of the ", t.local.numel(), " elements of slice ",
               t.slice.describe(), " of tensor '", t.name,
               "' (its slices overlap or leave gaps: the metadata was changed)");
  }
  C10D_CHECK(missing.empty() || options.allowMissing, CheckpointError,
             "checkpoint::load: checkpoint '", dir, "' lacks tensor", missing.size() > 1 ? "s " : " ",
             listNames(missing), " that the program asks for (LoadOptions::allowMissing leaves "
             "them as they are)");
  std::vector<std::string> missingValues;
  for (const auto& [name, bytes] : state.values()) {
    if (m.values.count(name) == 0) missingValues.push_back(name);
  }
  C10D_CHECK(missingValues.empty() || options.allowMissing, CheckpointError,
             "checkpoint::load: checkpoint '", dir, "' lacks value",
             missingValues.size() > 1 ? "s " : " ", listNames(missingValues),
             " that the program sets (LoadOptions::allowMissing leaves them as they are)");
  // Every file this rank reads must be there, whole.
  std::set<size_t> files;
  for (const Piece& p : reads.pieces) files.insert(p.source->file);
  for (size_t f : files) {
    const std::string path = dir + "/" + m.files[f].name;
    const int64_t bytes = detail::File::open(path).size();
    C10D_CHECK(bytes == m.files[f].bytes, CheckpointError, "checkpoint::load: file '", path,
               "' is ", bytes, " bytes but the metadata says ", m.files[f].bytes,
               bytes < m.files[f].bytes ? " (truncated)" : "");
  }
  return reads;
}

// Reads and checks the blocks of each piece's stored slice that its overlaps touch, and copies
// the overlaps into staging[target].
void readPieces(const Reads& reads, const Metadata& m, const std::string& dir,
                std::vector<Tensor>& staging) {
  std::map<size_t, std::unique_ptr<detail::File>> open;
  std::vector<char> buffer;
  const int64_t block = m.checksumBlockBytes;
  for (const Piece& p : reads.pieces) {
    const SavedTensor& saved = m.tensors.at(*p.name);
    const int64_t element = static_cast<int64_t>(elementSize(saved.dtype));
    int64_t first = INT64_MAX, last = 0;  // bytes of the stored slice the overlaps touch
    for (const detail::Overlap& o : p.overlaps) {
      first = std::min(first, o.source * element);
      last = std::max(last, (o.source + o.length) * element);
    }
    const int64_t begin = first / block * block;
    const int64_t end = std::min(p.source->bytes, (last + block - 1) / block * block);
    auto& file = open[p.source->file];
    if (!file) {
      file = std::make_unique<detail::File>(
          detail::File::open(dir + "/" + m.files[p.source->file].name));
    }
    buffer.resize(static_cast<size_t>(end - begin));
    file->readAt(buffer.data(), end - begin, p.source->offset + begin);
    for (int64_t at = begin; at < end; at += block) {
      const int64_t n = std::min(block, end - at);
      const uint64_t found = XXH3_64bits(buffer.data() + (at - begin), static_cast<size_t>(n));
      const uint64_t expected = p.source->checksums.at(static_cast<size_t>(at / block));
      C10D_CHECK(found == expected, CheckpointError, "checkpoint::load: tensor '", *p.name,
                 "', slice ", p.source->slice.describe(), ": bytes ", p.source->offset + at,
                 " to ", p.source->offset + at + n, " of file '", file->path(),
                 "' do not match their checksum (the file was changed or damaged)");
    }
    char* target = static_cast<char*>(staging[p.target].data());
    for (const detail::Overlap& o : p.overlaps) {
      std::memcpy(target + o.target * element, buffer.data() + (o.source * element - begin),
                  static_cast<size_t>(o.length * element));
    }
  }
}

}  // namespace

void load(State& state, const std::string& dir, ProcessGroup* group, const LoadOptions& options) {
  const int rank = group ? group->rank() : 0;
  Metadata m;
  Reads reads;
  detail::Outcome outcome = detail::capture([&] {
    m = readMetadata(dir);
    reads = match(state, m, dir, options);
  });
  const std::vector<Json> asked = detail::exchange(group, rank, outcome, reads.requested);
  std::set<std::string> requested;
  for (const Json& list : asked) {
    for (const Json& name : list) requested.insert(name.get<std::string>());
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, saved] : m.tensors) {
    if (requested.count(name) == 0) unexpected.push_back(name);
  }
  C10D_CHECK(unexpected.empty() || options.allowUnexpected, CheckpointError,
             "checkpoint::load: checkpoint '", dir, "' holds tensor",
             unexpected.size() > 1 ? "s " : " ", listNames(unexpected),
             " that no rank asks for (LoadOptions::allowUnexpected loads the rest)");

  std::vector<Tensor> staging(state.tensors().size());
  outcome = detail::capture([&] {
    for (const Piece& p : reads.pieces) {
      const Tensor& local = state.tensors()[p.target].local;
      if (!staging[p.target].defined()) {
        staging[p.target] = Tensor::empty(local.sizes(), local.dtype());
      }
    }
    readPieces(reads, m, dir, staging);
  });
  detail::exchange(group, rank, outcome, Json());

  for (size_t i = 0; i < staging.size(); ++i) {
    if (!staging[i].defined()) continue;
    const Tensor& local = state.tensors()[i].local;
    if (local.device().isCPU()) {
      std::memcpy(local.data(), staging[i].data(), local.nbytes());
    } else {
      copyTensor(local, staging[i]);
    }
  }
  for (const auto& [name, bytes] : m.values) state.mutableValues()[name] = bytes;
  for (const auto& hook : state.loadHooks()) hook();
}

}  // namespace c10d::inline v0::checkpoint
