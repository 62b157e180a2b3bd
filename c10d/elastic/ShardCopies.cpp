#include "c10d/elastic/ShardCopies.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <sstream>

#include "c10d/ProcessGroup.hpp"
#include "c10d/Work.hpp"
#include "c10d/checkpoint/Geometry.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/elastic/ElasticGroup.hpp"
#include "c10d/elastic/IdList.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1::elastic {
namespace {

using checkpoint::Slice;
using checkpoint::StateTensor;

// Tag of ShardCopies' point-to-point traffic, apart from a program's own small tags.
constexpr int kCopyTag = 0x5c0b2;

bool isSliced(const StateTensor& t) {
  return !(t.slice == Slice::whole(t.globalShape));
}

const StateTensor* named(const checkpoint::State& state, const std::string& name) {
  for (const StateTensor& t : state.tensors()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Tensor onHost(const Tensor& t) {
  if (!t.device().isCUDA()) return t;
  Tensor host = Tensor::empty(t.sizes(), t.dtype());
  copyTensor(host, t);
  return host;
}

// Copies a slice's elements between its local tensor (host memory) and the whole tensor.
void copyRuns(const Slice& slice, const std::vector<int64_t>& shape, const Tensor& local,
              const Tensor& whole, bool intoWhole) {
  const size_t size = local.elementSize();
  auto* l = static_cast<uint8_t*>(local.data());
  auto* w = static_cast<uint8_t*>(whole.data());
  for (const checkpoint::detail::Run& run : checkpoint::detail::runsOf(slice, shape)) {
    uint8_t* a = w + run.global * size;
    uint8_t* b = l + run.local * size;
    if (intoWhole) {
      std::memcpy(a, b, run.length * size);
    } else {
      std::memcpy(b, a, run.length * size);
    }
  }
}

}  // namespace

ShardCopies::ShardCopies(ElasticGroup& elastic) : elastic_(elastic) {}

ShardCopies::~ShardCopies() {
  finishExchange();  // the Works' tensors are this object's
}

std::vector<ShardCopies::Entry> ShardCopies::entriesOf(const checkpoint::State& state) {
  std::vector<Entry> entries;
  for (const StateTensor& t : state.tensors()) {
    if (isSliced(t)) entries.push_back({t.name, t.local.dtype(), t.globalShape, t.slice});
  }
  return entries;
}

// One line per entry: "<name length>:<name> <dtype> <dims> <shape...> <kind> <dims> <offsets...>
// <sizes...>".
std::string ShardCopies::encode(const std::vector<Entry>& entries) {
  std::ostringstream out;
  for (const Entry& e : entries) {
    out << e.name.size() << ':' << e.name << ' ' << static_cast<int>(e.dtype) << ' '
        << e.globalShape.size();
    for (int64_t d : e.globalShape) out << ' ' << d;
    out << ' ' << (e.slice.kind == Slice::Kind::Flat ? 1 : 0) << ' ' << e.slice.offsets.size();
    for (int64_t o : e.slice.offsets) out << ' ' << o;
    for (int64_t z : e.slice.sizes) out << ' ' << z;
    out << '\n';
  }
  return out.str();
}

std::vector<ShardCopies::Entry> ShardCopies::decode(const std::string& text) {
  std::vector<Entry> entries;
  std::istringstream in(text);
  size_t length = 0;
  char colon = 0;
  while (in >> length >> colon) {
    Entry e;
    e.name.resize(length);
    in.read(e.name.data(), static_cast<std::streamsize>(length));
    int dtype = 0, kind = 0;
    size_t dims = 0, sliceDims = 0;
    in >> dtype >> dims;
    e.dtype = static_cast<ScalarType>(dtype);
    e.globalShape.resize(dims);
    for (int64_t& d : e.globalShape) in >> d;
    in >> kind >> sliceDims;
    e.slice.kind = kind == 1 ? Slice::Kind::Flat : Slice::Kind::Box;
    e.slice.offsets.resize(sliceDims);
    e.slice.sizes.resize(sliceDims);
    for (int64_t& o : e.slice.offsets) in >> o;
    for (int64_t& z : e.slice.sizes) in >> z;
    C10D_CHECK(in && colon == ':', StateError, "ShardCopies: malformed slice shapes in the store");
    entries.push_back(std::move(e));
  }
  return entries;
}

void ShardCopies::forgetCopies(int64_t ownStep) {
  copies_.clear();
  snapshots_.clear();
  haveCopies_ = false;
  heldStep_ = -1;
  ownStep_ = ownStep;
  generation_ = UINT64_MAX;
  ring_ = elastic_.members();
}

void ShardCopies::exchangeShapes(const checkpoint::State& state) {
  ProcessGroup& pg = elastic_.group();
  finishExchange();
  forgetCopies(-1);
  generation_ = elastic_.generation();
  const int n = pg.size();
  if (n == 1) return;
  // The generation's store: its keys are this generation's alone, and its waits end when a
  // member dies.
  const std::vector<Entry> mine = entriesOf(state);
  pg.store()->set("shard-copies/" + std::to_string(pg.rank()), toBytes(encode(mine)));
  const std::vector<Entry> theirs =
      decode(toString(pg.store()->get("shard-copies/" + std::to_string((pg.rank() + 1) % n))));
  for (const Entry& e : theirs) {
    Copy copy{e, Tensor::empty({e.slice.numel()}, e.dtype),
              Tensor::empty({e.slice.numel()}, e.dtype)};
    copies_.push_back(std::move(copy));
  }
  for (const Entry& e : mine) snapshots_.push_back(Tensor::empty({e.slice.numel()}, e.dtype));
}

bool ShardCopies::wait() {
  return finishExchange();
}

bool ShardCopies::finishExchange() {
  if (sends_.empty() && receives_.empty()) return true;
  bool received = true;
  for (auto& work : receives_) {
    try {
      work->wait();
    } catch (const Error&) {
      received = false;  // the next member died: the copies held stay those of before
    }
  }
  for (auto& work : sends_) {
    try {
      work->wait();
    } catch (const Error&) {  // the previous member died: it needs no copy any more
    }
  }
  sends_.clear();
  receives_.clear();
  if (!received) return false;
  for (Copy& copy : copies_) std::swap(copy.held, copy.arriving);
  heldStep_ = inflightStep_;
  haveCopies_ = true;
  return true;
}

void ShardCopies::refresh(const checkpoint::State& state) {
  if (elastic_.generation() != generation_) exchangeShapes(state);
  finishExchange();
  ProcessGroup& pg = elastic_.group();
  const int n = pg.size();
  ownStep_ = elastic_.step();
  if (n == 1) return;  // alone, its own slices are all there is
  std::vector<const StateTensor*> mine;
  for (const StateTensor& t : state.tensors()) {
    if (isSliced(t)) mine.push_back(&t);
  }
  C10D_CHECK(mine.size() == snapshots_.size(), InvalidArgument,
             "ShardCopies::refresh: the State "
             "has ",
             mine.size(), " sliced tensors, ", snapshots_.size(),
             " at this generation's "
             "first refresh (the layout may change only at a reform)");
  const int previous = (pg.rank() + n - 1) % n, next = (pg.rank() + 1) % n;
  for (size_t k = 0; k < mine.size(); ++k) {
    copyTensor(snapshots_[k], mine[k]->local);  // the next step may change the slice
    sends_.push_back(pg.send(snapshots_[k], previous, kCopyTag));
  }
  for (Copy& copy : copies_) receives_.push_back(pg.recv(copy.arriving, next, kCopyTag));
  inflightStep_ = elastic_.step();
}

void ShardCopies::restore(const checkpoint::State& old, checkpoint::State& now,
                          const Reformation& r) {
  finishExchange();
  ProcessGroup& pg = elastic_.group();
  const std::vector<int>& members = elastic_.members();
  const int64_t step = elastic_.step();
  // The ids of the last ring whose slices are gone with their process (none known on a
  // newcomer, whose ring is empty).
  std::vector<int> gone;
  for (int id : ring_) {
    const bool member = std::find(members.begin(), members.end(), id) != members.end();
    const bool restarted = std::find(r.joined.begin(), r.joined.end(), id) != r.joined.end();
    if (!member || restarted) gone.push_back(id);
  }
  auto isGone = [&](int id) { return std::find(gone.begin(), gone.end(), id) != gone.end(); };
  const auto self = std::find(ring_.begin(), ring_.end(), elastic_.id());
  const bool contributes = self != ring_.end() && !isGone(elastic_.id());
  // This rank's own problem, if any; every member learns below whether any has one.
  std::string problem;
  std::vector<int> unheld, holders;
  for (size_t k = 0; k < ring_.size(); ++k) {
    const int holder = ring_[(k + ring_.size() - 1) % ring_.size()];
    if (isGone(ring_[k]) && (isGone(holder) || ring_.size() == 1)) {
      unheld.push_back(ring_[k]);
      holders.push_back(holder);
    }
  }
  if (!unheld.empty()) {
    problem =
        detail::concat("the slices of lost id(s) ", idList(unheld), " were held only by id(s) ",
                       idList(holders), ", lost too: no member has them");
  }
  bool holdsGone = false;
  if (contributes && ring_.size() > 1) {
    const size_t at = static_cast<size_t>(self - ring_.begin());
    const int next = ring_[(at + 1) % ring_.size()];
    holdsGone = isGone(next);
    if (ownStep_ != step && problem.empty()) {
      problem = detail::concat("id ", elastic_.id(), "'s slices are from step ", ownStep_,
                               ", the members are at step ", step,
                               " (a rank died between a step's commit and its refresh)");
    }
    if (holdsGone && problem.empty() && (!haveCopies_ || heldStep_ != step)) {
      problem = detail::concat("id ", elastic_.id(), " holds ", haveCopies_ ? "" : "no ",
                               "copy of lost id ", next, "'s slices",
                               haveCopies_ ? detail::concat(" from step ", heldStep_) : "",
                               ", the members are at step ", step);
    }
  }
  // Every member's tensors of the new slicing, so that all run the same allreduces even where
  // they hold different tensors (ZeroOptimizer's optimizer state).
  pg.store()->set("shard-copies/restore/" + std::to_string(pg.rank()),
                  toBytes(encode(entriesOf(now))));
  std::vector<std::string> keys;
  for (int rank = 0; rank < pg.size(); ++rank) {
    keys.push_back("shard-copies/restore/" + std::to_string(rank));
  }
  std::map<std::string, Entry> all;
  for (const Store::Bytes& theirs : pg.store()->multiGet(keys)) {
    for (Entry& e : decode(toString(theirs))) {
      auto [it, added] = all.emplace(e.name, e);
      if (!added && (it->second.dtype != e.dtype || it->second.globalShape != e.globalShape) &&
          problem.empty()) {
        problem = detail::concat("tensor '", e.name, "' has other shapes or dtypes on other ranks");
      }
    }
  }
  int32_t failed = problem.empty() ? 0 : 1;
  pg.allreduce(Tensor::fromBlob(&failed, ScalarType::Int32, {1}),
               AllreduceOptions{.reduceOp = ReduceOp::MAX})
      ->wait();
  if (failed != 0) {
    C10D_THROW(StateError, "elastic: ShardCopies::restore: ",
               problem.empty() ? "another member could not restore (its error says why)" : problem,
               "; load the sharded state from a checkpoint");
  }
  for (const auto& [name, entry] : all) {
    Tensor whole = Tensor::zeros({Slice::whole(entry.globalShape).numel()}, entry.dtype);
    if (contributes) {
      const StateTensor* mine = named(old, name);
      if (mine != nullptr && isSliced(*mine) && mine->globalShape == entry.globalShape) {
        copyRuns(mine->slice, mine->globalShape, onHost(mine->local), whole, true);
      }
    }
    if (holdsGone) {
      for (const Copy& copy : copies_) {
        if (copy.entry.name == name && copy.entry.globalShape == entry.globalShape) {
          copyRuns(copy.entry.slice, copy.entry.globalShape, copy.held, whole, true);
        }
      }
    }
    // Every element comes from one member and is zero on the others: the sum is exact.
    pg.allreduce(whole)->wait();
    if (const StateTensor* target = named(now, name); target != nullptr && isSliced(*target)) {
      Tensor host = onHost(target->local);
      copyRuns(target->slice, target->globalShape, host, whole, false);
      if (host.data() != target->local.data()) copyTensor(target->local, host);
    }
  }
  forgetCopies(step);
}

size_t ShardCopies::bytes() const {
  size_t total = 0;
  for (const Copy& copy : copies_) total += copy.held.nbytes() + copy.arriving.nbytes();
  for (const Tensor& t : snapshots_) total += t.nbytes();
  return total;
}

}  // namespace c10d::inline v1::elastic
