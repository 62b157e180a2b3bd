#include "c10d/elastic/ShardCopies.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "c10d/ProcessGroup.hpp"
#include "c10d/Work.hpp"
#include "c10d/checkpoint/Geometry.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/elastic/ElasticGroup.hpp"

namespace c10d::inline v0::elastic {
namespace {

using checkpoint::Slice;
using checkpoint::StateTensor;

// Tags of ShardCopies' point-to-point traffic, apart from a program's own small tags.
constexpr int kShapesTag = 0x5c0b1;
constexpr int kCopyTag = 0x5c0b2;

bool isSliced(const StateTensor& t) {
  return !(t.slice == Slice::whole(t.globalShape));
}

std::vector<const StateTensor*> slicedOf(const checkpoint::State& state) {
  std::vector<const StateTensor*> out;
  for (const StateTensor& t : state.tensors()) {
    if (isSliced(t)) out.push_back(&t);
  }
  return out;
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

// A slice as int64s: kind, dimensions, offsets, sizes.
void encode(const Slice& slice, std::vector<int64_t>& out) {
  out.push_back(slice.kind == Slice::Kind::Flat ? 1 : 0);
  out.push_back(static_cast<int64_t>(slice.offsets.size()));
  out.insert(out.end(), slice.offsets.begin(), slice.offsets.end());
  out.insert(out.end(), slice.sizes.begin(), slice.sizes.end());
}

Slice decode(const std::vector<int64_t>& words, size_t& at) {
  C10D_CHECK(at + 2 <= words.size(), StateError, "ShardCopies: malformed slice shapes");
  Slice slice;
  slice.kind = words[at] == 1 ? Slice::Kind::Flat : Slice::Kind::Box;
  const auto dims = static_cast<size_t>(words[at + 1]);
  at += 2;
  C10D_CHECK(at + 2 * dims <= words.size(), StateError, "ShardCopies: malformed slice shapes");
  slice.offsets.assign(words.begin() + at, words.begin() + at + dims);
  slice.sizes.assign(words.begin() + at + dims, words.begin() + at + 2 * dims);
  at += 2 * dims;
  return slice;
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

std::string idList(const std::vector<int>& ids) {
  std::string text;
  for (int id : ids) text += (text.empty() ? "" : ", ") + std::to_string(id);
  return text;
}

}  // namespace

ShardCopies::ShardCopies(ElasticGroup& elastic) : elastic_(elastic) {}

ShardCopies::~ShardCopies() {
  for (auto& work : inflight_) {
    try {
      work->wait();
    } catch (const Error&) {  // the group broke; nothing is held from it
    }
  }
}

void ShardCopies::exchangeShapes(const checkpoint::State& state) {
  ProcessGroup& pg = elastic_.group();
  finishExchange();
  generation_ = elastic_.generation();
  ring_ = elastic_.members();
  copies_.clear();
  snapshots_.clear();
  heldStep_ = -1;
  neighbourId_ = -1;
  const int n = pg.size();
  if (n == 1) return;
  const int previous = (pg.rank() + n - 1) % n, next = (pg.rank() + 1) % n;
  const std::vector<const StateTensor*> mine = slicedOf(state);
  std::vector<int64_t> words;
  for (const StateTensor* t : mine) encode(t->slice, words);
  int64_t count = static_cast<int64_t>(words.size()), theirCount = 0;
  auto sent = pg.send(Tensor::fromBlob(&count, ScalarType::Int64, {1}), previous, kShapesTag);
  pg.recv(Tensor::fromBlob(&theirCount, ScalarType::Int64, {1}), next, kShapesTag)->wait();
  sent->wait();
  std::vector<int64_t> theirs(static_cast<size_t>(theirCount));
  sent = pg.send(Tensor::fromBlob(words.data(), ScalarType::Int64, {count}), previous, kShapesTag);
  pg.recv(Tensor::fromBlob(theirs.data(), ScalarType::Int64, {theirCount}), next, kShapesTag)
      ->wait();
  sent->wait();
  size_t at = 0;
  for (const StateTensor* t : mine) {
    Copy copy{t->name, t->globalShape, decode(theirs, at), {}, {}};
    copy.held = Tensor::empty({copy.slice.numel()}, t->local.dtype());
    copy.arriving = Tensor::empty({copy.slice.numel()}, t->local.dtype());
    copies_.push_back(std::move(copy));
    snapshots_.push_back(Tensor::empty({t->slice.numel()}, t->local.dtype()));
  }
  C10D_CHECK(at == theirs.size(), StateError, "ShardCopies: rank ", next,
             " has other sliced "
             "tensors than rank ",
             pg.rank(), " (every member must refresh the same State layout)");
  neighbourId_ = ring_[static_cast<size_t>(next)];
}

bool ShardCopies::wait() {
  return finishExchange();
}

bool ShardCopies::finishExchange() {
  if (inflight_.empty()) return true;
  bool ok = true;
  for (auto& work : inflight_) {
    try {
      work->wait();
    } catch (const Error&) {
      ok = false;  // the neighbour died: the copies held stay those of the step before
    }
  }
  inflight_.clear();
  if (!ok) return false;
  for (Copy& copy : copies_) std::swap(copy.held, copy.arriving);
  heldStep_ = inflightStep_;
  return true;
}

void ShardCopies::refresh(const checkpoint::State& state) {
  if (elastic_.generation() != generation_) exchangeShapes(state);
  finishExchange();
  ProcessGroup& pg = elastic_.group();
  const int n = pg.size();
  if (n == 1) {
    heldStep_ = elastic_.step();  // alone, its own slices are all there is
    return;
  }
  const std::vector<const StateTensor*> mine = slicedOf(state);
  C10D_CHECK(mine.size() == snapshots_.size(), InvalidArgument,
             "ShardCopies::refresh: the State "
             "has ",
             mine.size(), " sliced tensors, ", snapshots_.size(),
             " at this generation's "
             "first refresh (the layout may change only at a reform)");
  const int previous = (pg.rank() + n - 1) % n, next = (pg.rank() + 1) % n;
  for (size_t k = 0; k < mine.size(); ++k) {
    copyTensor(snapshots_[k], mine[k]->local);  // the next step may change the slice
    inflight_.push_back(pg.send(snapshots_[k], previous, kCopyTag));
    inflight_.push_back(pg.recv(copies_[k].arriving, next, kCopyTag));
  }
  inflightStep_ = elastic_.step();
}

void ShardCopies::restore(const checkpoint::State& old, checkpoint::State& now,
                          const Reformation& r) {
  finishExchange();
  ProcessGroup& pg = elastic_.group();
  const std::vector<int>& members = elastic_.members();
  // The ids of the copies' generation whose slices are gone with their process.
  std::vector<int> gone;
  for (int id : ring_) {
    const bool member = std::find(members.begin(), members.end(), id) != members.end();
    const bool restarted = std::find(r.joined.begin(), r.joined.end(), id) != r.joined.end();
    if (!member || restarted) gone.push_back(id);
  }
  auto isGone = [&](int id) { return std::find(gone.begin(), gone.end(), id) != gone.end(); };
  std::vector<int> unheld, holders;
  for (size_t k = 0; k < ring_.size(); ++k) {
    const int holder = ring_[(k + ring_.size() - 1) % ring_.size()];
    if (isGone(ring_[k]) && (isGone(holder) || ring_.size() == 1)) {
      unheld.push_back(ring_[k]);
      holders.push_back(holder);
    }
  }
  C10D_CHECK(unheld.empty(), StateError, "elastic: the slices of lost id(s) ", idList(unheld),
             " were held only by id(s) ", idList(holders),
             ", lost too: no member has them; load "
             "the sharded state from a checkpoint");
  const bool contributes =
      std::find(ring_.begin(), ring_.end(), elastic_.id()) != ring_.end() && !isGone(elastic_.id());
  // {min copies' step, -max copies' step, min step, -max step} over the members.
  int64_t steps[4] = {contributes ? heldStep_ : INT64_MAX, contributes ? -heldStep_ : INT64_MAX,
                      elastic_.step(), -elastic_.step()};
  pg.allreduce(Tensor::fromBlob(steps, ScalarType::Int64, {4}),
               AllreduceOptions{.reduceOp = ReduceOp::MIN})
      ->wait();
  C10D_CHECK(steps[0] == -steps[1] && steps[2] == -steps[3] && steps[0] == steps[2], StateError,
             "elastic: the shard copies are from steps ", steps[0], " to ", -steps[1],
             ", the members are at steps ", steps[2], " to ", -steps[3],
             " (a rank died between "
             "a step's commit and its refresh); load the sharded state from a checkpoint");
  const bool holdsGone = contributes && neighbourId_ >= 0 && isGone(neighbourId_);
  for (const StateTensor* t : slicedOf(now)) {
    int64_t numel = 1;
    for (int64_t s : t->globalShape) numel *= s;
    Tensor whole = Tensor::zeros({numel}, t->local.dtype());
    if (contributes) {
      const StateTensor* mine = named(old, t->name);
      C10D_CHECK(mine != nullptr && mine->globalShape == t->globalShape, StateError,
                 "ShardCopies::restore: tensor '", t->name,
                 "' of the new State is not in the "
                 "old one with the same shape on id ",
                 elastic_.id());
      copyRuns(mine->slice, mine->globalShape, onHost(mine->local), whole, true);
    }
    if (holdsGone) {
      auto copy = std::find_if(copies_.begin(), copies_.end(),
                               [&](const Copy& c) { return c.name == t->name; });
      C10D_CHECK(copy != copies_.end(), StateError, "ShardCopies::restore: no copy of tensor '",
                 t->name, "' (refresh the same State layout that restore fills)");
      copyRuns(copy->slice, copy->globalShape, copy->held, whole, true);
    }
    // Every element comes from one member and is zero on the others: the sum is exact.
    pg.allreduce(whole)->wait();
    Tensor target = onHost(t->local);
    copyRuns(t->slice, t->globalShape, target, whole, false);
    if (target.data() != t->local.data()) copyTensor(t->local, target);
  }
}

size_t ShardCopies::bytes() const {
  size_t total = 0;
  for (const Copy& copy : copies_) total += copy.held.nbytes() + copy.arriving.nbytes();
  for (const Tensor& t : snapshots_) total += t.nbytes();
  return total;
}

}  // namespace c10d::inline v0::elastic
