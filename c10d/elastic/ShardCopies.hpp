#pragma once

/// \file
/// ShardCopies: each member keeps a copy of its ring neighbour's slices, to reshard after a loss.
///
/// Redundancy for sharded state (ZeroOptimizer's and FullyShardedLayers' slices, any sliced
/// tensor of a checkpoint::State): each member keeps a copy of the next member's slices, so that
/// the slices of a lost rank survive on the rank before it in the ring, and a re-formed group
/// reshards them onto its members without disk.
///
/// \code
/// elastic::ShardCopies copies(*elastic);
/// checkpoint::State sharded;  zero->addToState(sharded);     // this generation's slices
/// ... each committed step:   optimizer step, then copies.refresh(sharded);
/// ... after reform (r):      auto newZero = <ZeroOptimizer over elastic->group()>;
/// \endcode
///                              checkpoint::State next;  newZero->addToState(next);
///                              copies.restore(sharded, next, r);   // then use newZero
///
/// refresh snapshots this rank's slices and starts sending them to the previous member while the
/// next step computes (the exchange completes at the next refresh or at restore). Memory: three
/// times this rank's slices (the snapshot being sent, the neighbour's copy, and the one arriving).
///
/// restore fills the new slices from the old generation's: every survivor gives its own, and the
/// holder of each lost member's copy gives that one; each tensor then travels as one allreduce of
/// its whole size. It throws StateError, on every member alike, when a lost member's copy is gone
/// too (two neighbours lost at once, or the holder was restarted) or when the copies are not from
/// the members' committed step (a rank died between the step's commit and its refresh): load the
/// sharded state from a checkpoint then (c10d/checkpoint/Checkpoint.hpp, any world size).
///
/// Threading: the thread that drives the ElasticGroup.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "c10d/checkpoint/State.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {
class Work;
}

namespace c10d::inline v1::elastic {

class ElasticGroup;
struct Reformation;

/// In-memory redundancy for the sharded tensors of a State over an ElasticGroup: see the file's
/// overview.
class ShardCopies {
 public:
  /// elastic must outlive this.
  /// \param elastic the group whose members keep each other's copies.
  explicit ShardCopies(ElasticGroup& elastic);
  ~ShardCopies();
  ShardCopies(const ShardCopies&) = delete;
  ShardCopies& operator=(const ShardCopies&) = delete;

  /// After the step's update: snapshots state's sliced tensors and starts the ring exchange.
  /// Collective over the group. The first call of each generation exchanges the slices' shapes
  /// (blocking); the tensors and slices must stay the same until the next reform.
  /// \param state this rank's state; only its sliced tensors (not whole ones) are copied.
  /// \throws InvalidArgument when the number of sliced tensors changed within a generation;
  ///         StateError as ElasticGroup::group() does; the store's errors while the shapes are
  ///         exchanged.
  void refresh(const checkpoint::State& state);

  /// After a reform, once per generation: fills now's sliced tensors (the new group's slices; the
  /// members may hold different tensors, as ZeroOptimizer's do) from old (this rank's slices as
  /// of its last refresh or restore; empty on a newcomer) and the copies. Collective over the new
  /// group; throws StateError as said above, on every member alike. Afterwards no copies are
  /// held until the next refresh: a loss before it fails the next restore.
  /// \param old this rank's slices of the old generation.
  /// \param now the new group's slices on this rank, filled.
  /// \param r what reform (or join) returned: a member of the old ring listed in r.joined is a
  ///        restart, whose slices count as lost.
  /// \throws StateError as said above, also when a tensor has other shapes or dtypes on other
  ///         members; the group's errors.
  void restore(const checkpoint::State& old, checkpoint::State& now, const Reformation& r);

  /// Completes the exchange in flight (refresh and restore do it first anyway): for a program
  /// that wants its copies current before it goes on. Returns whether it succeeded; on failure
  /// (a neighbour died) the copies of the refresh before stay.
  /// \return true when the exchange completed, or none was in flight; false when the copies
  ///         did not arrive.
  bool wait();

  /// Host bytes held for the copies and snapshots.
  /// \return Those bytes.
  size_t bytes() const;

 private:
  struct Entry {  // one sliced tensor of a State, as members tell each other
    std::string name;
    ScalarType dtype = ScalarType::Float32;
    std::vector<int64_t> globalShape;
    checkpoint::Slice slice;
  };
  struct Copy {  // a neighbour's slice of one tensor
    Entry entry;
    Tensor held;      ///< as of heldStep_
    Tensor arriving;  ///< of the exchange in flight
  };
  static std::string encode(const std::vector<Entry>& entries);
  static std::vector<Entry> decode(const std::string& text);
  static std::vector<Entry> entriesOf(const checkpoint::State& state);
  void exchangeShapes(const checkpoint::State& state);
  /// Waits for the exchange in flight; when every copy arrived, they become the held ones.
  bool finishExchange();
  /// After a restore (or before any refresh): no copies; this rank's slices are the step's.
  void forgetCopies(int64_t ownStep);

  ElasticGroup& elastic_;
  uint64_t generation_ = UINT64_MAX;  ///< of the shapes exchanged; MAX: exchange at next refresh
  std::vector<int> ring_;             ///< ids of the generation this rank's slices are from
  std::vector<Copy> copies_;          ///< the next member's slices, when haveCopies_
  bool haveCopies_ = false;
  std::vector<Tensor> snapshots_;  ///< this rank's slices, being sent
  std::vector<std::shared_ptr<Work>> sends_, receives_;
  int64_t inflightStep_ = -1;
  int64_t heldStep_ = -1;  ///< the committed step the held copies are from
  int64_t ownStep_ = -1;   ///< the committed step of this rank's slices (at the last refresh)
};

}  // namespace c10d::inline v1::elastic
