// checkpoint::load: three phases, each ending in an exchange among the ranks (Exchange.hpp).
//   match:  every rank reads metadata.json, matches its State against it and works out which
//           bytes of which files its slices overlap; the ranks then check together that no
//           tensor of the checkpoint is left unasked for;
//   check:  every rank reads those blocks and checks their checksums;
//   fill:   only when every rank has checked all it needs are the blocks read again (from the
//           page cache by now), checked again and copied into the State's tensors.

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/Exchange.hpp"
#include "c10d/checkpoint/Files.hpp"
#include "c10d/checkpoint/Geometry.hpp"
#include "c10d/checkpoint/Metadata.hpp"
#include "c10d/core/Cores.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1::checkpoint {
namespace {

using Json = nlohmann::json;

// Up to ten names of a list, and how many more.
std::string listNames(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 10; ++i) text += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > 10) text += " and " + std::to_string(names.size() - 10) + " more";
  return text;
}

// What one of the State's tensors takes from one stored slice.
struct Piece {
  size_t target;            // index in State::tensors()
  const std::string* name;  // the tensor's
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
             "checkpoint::load: checkpoint '", dir, "' lacks tensor",
             missing.size() > 1 ? "s " : " ", listNames(missing),
             " that the program asks for (LoadOptions::allowMissing leaves "
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

// Which reading of a load: what a bad block means for the tensors.
enum class Pass {
  Check,           // the first of two: nothing written yet
  FillAfterCheck,  // the second: a difference now is a file changed during the load
  FillOnly,        // LoadOptions::checkFirst off: tensors are written as blocks are checked
};

// A load reads and checks this much at a time (rounded up to whole blocks): small enough that
// the checksum reads bytes the read just left in the core's 1 MiB L2 cache; with reads straight
// into the tensors this beat 8 MiB reads through a buffer (measured:
// docs/performance-history.md, "Figures that lived in code comments").
constexpr int64_t kLoadChunkBytes = int64_t{1} << 20;

// Reads the blocks of stored slices, a chunk at a time, checking each block's checksum.
class BlockReader {
 public:
  BlockReader(const Metadata& m, const std::string& dir)
      : m_(m),
        dir_(dir),
        block_(m.checksumBlockBytes),
        chunk_(std::max(block_, kLoadChunkBytes / block_ * block_)) {}

  const detail::File& file(size_t index) {
    auto& file = open_[index];
    if (!file)
      file = std::make_unique<detail::File>(detail::File::open(dir_ + "/" + m_.files[index].name));
    return *file;
  }

  // Bytes [lo, hi) of p's stored slice, a chunk at a time (begin and end block-aligned): every
  // block they touch read and checked. A chunk for which placeOf(begin, end) names where its
  // bytes go is read straight there; any other is read into a buffer and handed to
  // use(begin, end, data).
  template <typename PlaceOf, typename Use>
  void readThrough(const Piece& p, int64_t lo, int64_t hi, Pass pass, PlaceOf&& placeOf,
                   Use&& use) {
    const detail::File& f = file(p.source->file);
    // The blocks touching [lo, hi): from the one holding lo to the one holding hi - 1.
    const int64_t stop = std::min(p.source->bytes, (hi - 1) / block_ * block_ + block_);
    for (int64_t begin = lo / block_ * block_; begin < hi; begin += chunk_) {
      const int64_t end = std::min(stop, begin + chunk_);
      char* place = placeOf(begin, end);
      if (!place && buffer_.size() < static_cast<size_t>(end - begin)) {
        buffer_.resize(static_cast<size_t>(end - begin));
      }
      char* data = place ? place : buffer_.data();
      try {
        f.readAt(data, end - begin, p.source->offset + begin);
      } catch (const CheckpointError& e) {
        C10D_THROW(CheckpointError, "checkpoint::load: tensor '", *p.name, "', slice ",
                   p.source->slice.describe(), ": ", e.what(), partly(pass));
      }
      check(p, f, begin, end, data, pass);
      if (!place) use(begin, end, data);
    }
  }

 private:
  static const char* partly(Pass pass) {
    switch (pass) {
      case Pass::Check:
        return "";
      case Pass::FillAfterCheck:
        return " (the file changed during the load, which left this rank's tensors partly "
               "loaded)";
      case Pass::FillOnly:
        return " (LoadOptions::checkFirst was off: this rank's tensors are partly loaded)";
    }
    return "";
  }

  void check(const Piece& p, const detail::File& f, int64_t begin, int64_t end, const char* data,
             Pass pass) const {
    for (int64_t at = begin; at < end; at += block_) {
      const int64_t n = std::min(block_, end - at);
      const uint64_t found = XXH3_64bits(data + (at - begin), static_cast<size_t>(n));
      C10D_CHECK(found == p.source->checksums.at(static_cast<size_t>(at / block_)), CheckpointError,
                 "checkpoint::load: tensor '", *p.name, "', slice ", p.source->slice.describe(),
                 ": bytes ", p.source->offset + at, " to ", p.source->offset + at + n, " of file '",
                 f.path(),
                 pass == Pass::FillAfterCheck
                     ? "' no longer match their checksum: the file was changed during the "
                       "load, which left this rank's tensors partly loaded"
                     : "' do not match their checksum (the file was changed or damaged)",
                 pass == Pass::FillOnly ? partly(pass) : "");
    }
  }

  const Metadata& m_;
  const std::string& dir_;
  const int64_t block_;
  const int64_t chunk_;
  std::map<size_t, std::unique_ptr<detail::File>> open_;
  std::vector<char> buffer_;
};

// Copies bytes [begin, end) of a stored slice, at data, into the parts of the target that the
// overlaps from index next on cover, clipped to [lo, hi); advances next past the overlaps that
// end there.
void copyOverlaps(const Piece& p, int64_t element, const Tensor& local, size_t& next,
                  int64_t chunkBegin, int64_t chunkEnd, const char* data, int64_t lo, int64_t hi) {
  char* target = static_cast<char*>(local.data());
  const int64_t begin = std::max(chunkBegin, lo);
  const int64_t end = std::min(chunkEnd, hi);
  for (size_t o = next; o < p.overlaps.size() && begin < end; ++o) {
    const detail::Overlap& overlap = p.overlaps[o];
    const int64_t from = overlap.source * element;
    const int64_t to = from + overlap.length * element;
    if (from >= end) break;
    if (to <= begin) {
      next = o + 1;
      continue;
    }
    const int64_t a = std::max(from, begin), b = std::min(to, end);
    char* into = target + overlap.target * element + (a - from);
    const char* source = data + (a - chunkBegin);
    if (local.device().isCPU()) {
      std::memcpy(into, source, static_cast<size_t>(b - a));
    } else {
      copyTensor(Tensor::fromBlob(into, ScalarType::UInt8, {b - a}, local.device()),
                 Tensor::fromBlob(const_cast<char*>(source), ScalarType::UInt8, {b - a}));
    }
  }
}

// Where bytes [begin, end) of p's stored slice go in local when they are one run of it that the
// task [lo, hi) owns whole, so that they can be read straight there; null otherwise (a chunk
// split between runs, reaching outside the task, or bound for a device).
char* placeOf(const Piece& p, int64_t element, const Tensor& local, int64_t begin, int64_t end,
              int64_t lo, int64_t hi) {
  if (begin < lo || end > hi || !local.device().isCPU()) return nullptr;
  // The overlaps are in increasing source order; the one holding begin is the last that starts
  // at or before it.
  auto after = std::upper_bound(
      p.overlaps.begin(), p.overlaps.end(), begin,
      [element](int64_t at, const detail::Overlap& o) { return at < o.source * element; });
  if (after == p.overlaps.begin()) return nullptr;
  const detail::Overlap& o = *std::prev(after);
  const int64_t from = o.source * element;
  if (end > from + o.length * element) return nullptr;
  return static_cast<char*>(local.data()) + o.target * element + (begin - from);
}

// Bytes [lo, hi) of one piece's stored slice: what one reading thread takes at a time.
struct Task {
  const Piece* piece;
  int64_t element;
  int64_t lo, hi;
};

// Tasks of this many bytes (rounded to whole blocks) keep every reading thread busy to the end
// without a task per block.
constexpr int64_t kTaskBytes = int64_t{32} << 20;
// Reading threads per rank at most: reads from the page cache are copies, and a few threads
// reach the memory's bandwidth.
constexpr unsigned kMaxReadThreads = 4;

// One pass over the bytes the pieces need, on up to kMaxReadThreads threads: every block read
// and checked, and unless pass is Check, the overlaps copied into the State's tensors. Tasks
// split at block boundaries, so no two threads read a block for the same target, nor write the
// same bytes. Throws the error of the first task (in order) that failed.
void readPass(const Reads& reads, const Metadata& m, const std::string& dir, const State& state,
              Pass pass) {
  const int64_t block = m.checksumBlockBytes;
  const int64_t step = std::max(block, kTaskBytes / block * block);
  std::vector<Task> tasks;
  {
    BlockReader hints(m, dir);
    for (const Piece& p : reads.pieces) {
      const int64_t element = static_cast<int64_t>(elementSize(m.tensors.at(*p.name).dtype));
      // The overlaps are in increasing source order: bytes [first, last) of the stored slice.
      const int64_t first = p.overlaps.front().source * element;
      const int64_t last = (p.overlaps.back().source + p.overlaps.back().length) * element;
      // Reads ahead, so that the disk reads on while blocks are checked (the second reading of
      // a checked load finds them in the page cache).
      if (pass != Pass::FillAfterCheck) {
        hints.file(p.source->file).willNeed(p.source->offset + first, last - first);
      }
      for (int64_t lo = first; lo < last;) {
        const int64_t hi = std::min(last, (lo / step + 1) * step);
        tasks.push_back({&p, element, lo, hi});
        lo = hi;
      }
    }
  }
  const unsigned threads = static_cast<unsigned>(
      std::min<size_t>({tasks.size(), kMaxReadThreads, c10d::detail::usableCores().usable}));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> errors(tasks.size());
  auto work = [&] {
    BlockReader reader(m, dir);
    for (size_t i = next++; i < tasks.size() && !failed; i = next++) {
      const Task& t = tasks[i];
      try {
        const Tensor& local = state.tensors()[t.piece->target].local;
        size_t overlap = 0;
        reader.readThrough(
            *t.piece, t.lo, t.hi, pass,
            [&](int64_t begin, int64_t end) -> char* {
              if (pass == Pass::Check) return nullptr;
              return placeOf(*t.piece, t.element, local, begin, end, t.lo, t.hi);
            },
            [&](int64_t begin, int64_t end, const char* data) {
              if (pass == Pass::Check) return;
              copyOverlaps(*t.piece, t.element, local, overlap, begin, end, data, t.lo, t.hi);
            });
      } catch (...) {
        errors[i] = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> helpers;
  for (unsigned k = 1; k < threads; ++k) {
    helpers.emplace_back([&work] {
      c10d::detail::nameThisThread("c10d-ckpt-read");
      work();
    });
  }
  work();
  for (std::thread& helper : helpers) helper.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace

void load(State& state, const std::string& dir, ProcessGroup* group, const LoadOptions& options) {
  const int rank = group ? group->rank() : 0;
  const auto start = std::chrono::steady_clock::now();
  auto since = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Metadata m;
  Reads reads;
  detail::Outcome outcome = detail::capture([&] {
    m = readMetadata(dir);
    reads = match(state, m, dir, options);
  });
  const std::vector<Json> asked = detail::exchange(group, rank, outcome, reads.requested);

  const double matched = since();
  // With checkFirst, every block this rank needs is read and checked first, on every rank; only
  // then are they read again (from the page cache, now) and copied into the tensors. Twice the
  // reading costs less than staging the whole state in memory first: no memory of the state's
  // size, no faults on it, and a read from the cache runs at memcpy's speed.
  outcome = detail::capture([&] {
    // Decided inside the phase, so that ranks loading with different options all fail.
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
    if (options.checkFirst) readPass(reads, m, dir, state, Pass::Check);
  });
  detail::exchange(group, rank, outcome, Json());
  const double read = since();
  outcome = detail::capture([&] {
    readPass(reads, m, dir, state, options.checkFirst ? Pass::FillAfterCheck : Pass::FillOnly);
  });
  detail::exchange(group, rank, outcome, Json());
  for (const auto& [name, bytes] : m.values) state.mutableValues()[name] = bytes;
  for (const auto& hook : state.loadHooks()) hook(state);
  C10D_LOG(Debug, "checkpoint::load of '", dir, "' on rank ", rank, ": matched in ", matched,
           " s, checked by ", read, " s, filled by ", since(), " s");
}

}  // namespace c10d::inline v1::checkpoint
