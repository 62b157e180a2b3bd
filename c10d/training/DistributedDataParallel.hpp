#pragma once

/// \file
/// DistributedDataParallel: the data-parallel gradient reducer (buckets, communication hooks,
/// no-sync scopes), its options and the hooks it ships.
///
/// Data-parallel gradient reduction for any framework (PyTorch's DDP reducer without its autograd):
/// the framework registers its parameters once, tells the reducer when each gradient is ready,
/// and finds averaged gradients in place after finalizeBackward(). Gradients travel in buckets
/// (flat buffers of several gradients of one dtype and device), each reduced as soon as it is
/// full, in bucket order, while the framework's backward goes on.
///
/// \code
/// c10d::DistributedDataParallel ddp(*group, {{w1, w1grad, "fc1.weight"}, ...});
/// ddp.syncParameters();                        // rank 0's values everywhere, shapes checked
/// for (...) {
///   forward();
///   backward([&](size_t i) { ddp.markGradReady(i); });  // as each gradient is done
///   ddp.finalizeBackward();                    // waits; gradients are averaged in place
///   optimizer.step();
/// }
/// \endcode
///
/// Every rank must register the same parameters in the same order (syncParameters checks it) and
/// call finalizeBackward() once per backward. Ranks may mark gradients in any order: buckets are
/// reduced in bucket index order, so every rank issues the same collectives in the same order
/// without negotiating. After the first backward the buckets are rebuilt once, from the order in
/// which rank 0 saw the gradients become ready, so that later backwards fill (and send) the first
/// bucket first.
///
/// Every finalizeBackward() ends with a small allreduce of which gradients each rank marked: a
/// gradient some rank did not mark is an InvalidArgument on every rank, listing the parameters
/// and on how many ranks they were used, instead of a hang or silently averaged zeros; with
/// findUnusedParameters a rank that did not use a parameter contributes zeros, and a parameter no
/// rank used keeps its gradient untouched.
///
/// A backward is no-sync when a NoSync scope is open at its first markGradReady (or, without
/// marks, at its finalizeBackward): it sends nothing, and the next synchronised backward reduces
/// what the gradients accumulated, counting a gradient produced in any of those backwards as used.
/// Uneven inputs: pass Join::step()'s count to prepareForBackward and run shadowBackward() inside
/// Join::finish; no-sync backwards cannot be mixed with joined ranks (InvalidArgument).
///
/// Errors: InvalidArgument for bad registration (a dtype that is not floating point, mismatched
/// gradient shapes, memory registered twice), a parameter index out of range or marked twice in
/// one backward, finalizeBackward twice without marks between; the group's errors (TimeoutError
/// naming the op) from the collectives, rethrown by finalizeBackward. The missing-gradient error
/// comes after the reduction: the gradients then hold averages that include zeros. After a
/// collective failed, the ranks' collectives no longer pair up: treat it as fatal for the group.
/// Threading: markGradReady may be called from any thread, concurrently (autograd engines run
/// hooks on several threads); everything else from one thread, between backwards, once every
/// markGradReady of the backward has returned. Hooks run on the thread whose mark filled their
/// bucket, one at a time, in bucket order, outside the reducer's lock; they must not call back
/// into the reducer. CUDA: a bucket's collective is ordered after the current stream of the
/// thread that launches it; gradients written on other streams must be complete when marked.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/Work.hpp"
#include "c10d/checkpoint/State.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

/// One registered parameter. grad: the framework's gradient tensor (same dtype, device and
/// element count as value, contiguous), which the reducer reads when it is marked ready and
/// overwrites with the average; leave it undefined with gradientAsBucketView, where the reducer
/// owns the gradient storage (gradient(i)).
struct DataParallelParameter {
  Tensor value;      ///< the parameter: defined, floating point, contiguous
  Tensor grad;       ///< its gradient; undefined with gradientAsBucketView
  std::string name;  ///< for errors; optional
};

/// The name a checkpoint gives parameter index: its registered name, or "param<index>".
/// \param parameter The registered parameter.
/// \param index Its registration index.
/// \return parameter.name, or "param" followed by index when the name is empty.
std::string parameterName(const DataParallelParameter& parameter, size_t index);

/// A bucket as a communication hook sees it.
struct GradBucket {
  size_t index = 0;  ///< the bucket's position in bucket order (bucketLayout()), from 0
  /// The bucket's gradients, flat; the hook's Future must leave the reduced average here (or
  /// complete with a tensor of the same shape, which the reducer copies here). With
  /// transientBuckets, a Future completing with no tensors means the hook took the average
  /// elsewhere and the gradients keep their local values.
  Tensor buffer;
  /// SUM scaled by 1/divisor before the sum (ReduceOp::premulSum): dividing before reducing keeps
  /// low-precision sums from overflowing.
  ReduceOp average;
  std::vector<size_t> parameters;  ///< registered indices of the gradients in buffer, in order
  std::vector<Tensor> gradients;   ///< views into buffer, shaped like those parameters
  /// A joined rank's zeros (shadowBackward): a stateful hook sends them without state of its own.
  bool shadow = false;
};

/// Reduces a bucket; called in bucket order on the thread that completed it. Runs collectives of
/// the given group only. bucket is valid during the call: capture bucket.buffer, not &bucket.
using CommHook = std::function<std::shared_ptr<Future>(ProcessGroup& group, GradBucket& bucket)>;

/// The hooks the reducer ships. allreduceHook is the default; PowerSGD is
/// c10d/training/PowerSgd.hpp.
/// allreduceHook: one allreduce of bucket.buffer, in place, with bucket.average.
/// \param group The group to reduce over.
/// \param bucket The bucket to reduce.
/// \return The allreduce's Future.
std::shared_ptr<Future> allreduceHook(ProcessGroup& group, GradBucket& bucket);
/// Reduce in float16 (or bfloat16): half the bytes on the wire, the average converted back into
/// the bucket. CPU buckets of float32 or float64; others get InvalidArgument.
/// \param group The group to reduce over.
/// \param bucket The bucket to reduce; its values are scaled by bucket.average's factor while
/// they are converted, before the sum.
/// \return A Future that completes with bucket.buffer once the average is written back there.
/// \throws InvalidArgument for a bucket that is not a CPU float32 or float64 one.
std::shared_ptr<Future> fp16CompressHook(ProcessGroup& group, GradBucket& bucket);
/// fp16CompressHook in bfloat16: float32's range with fewer mantissa bits.
/// \param group The group to reduce over.
/// \param bucket The bucket to reduce.
/// \return A Future that completes with bucket.buffer once the average is written back there.
/// \throws InvalidArgument for a bucket that is not a CPU float32 or float64 one.
std::shared_ptr<Future> bf16CompressHook(ProcessGroup& group, GradBucket& bucket);

/// How a DistributedDataParallel reducer buckets and reduces the gradients.
struct DataParallelOptions {
  /// Bucket sizes: the first bucket (filled by the last layers' gradients, ready first) is small
  /// so communication starts early; the others are capped at bucketCapBytes. A bucket closes
  /// once its gradients reach the cap, so the last one may take it past the cap (as torch's).
  size_t firstBucketBytes = size_t{1} << 20;
  size_t bucketCapBytes = size_t{25} << 20;  ///< the other buckets' cap, in bytes; > 0
  /// Parameters may go unused in a backward on some ranks (see above).
  bool findUnusedParameters = false;
  /// The reducer allocates the gradients as views into its buckets (gradient(i)); nothing is
  /// copied. The framework must write each gradient there (and accumulate there) before marking
  /// it ready.
  bool gradientAsBucketView = false;
  /// With uneven inputs (Join), divide by the world size instead of by the ranks still training.
  bool divideByInitialWorldSize = false;
  /// After the first backward, rebuild the buckets in the order rank 0 saw gradients become ready.
  /// With gradientAsBucketView this moves the gradients: turn it off if the framework keeps the
  /// views gradient(i) returned instead of fetching them after each finalizeBackward().
  bool rebuildBuckets = true;
  /// The buckets hold memory only while they are reduced: a bucket's buffer is allocated when its
  /// first gradient is copied in and handed to the hook at launch, the reducer keeping no
  /// reference, so it is freed when the hook's Future (and what it captured) lets go: for
  /// allreduceHook at finalizeBackward, after the averages are copied out. A hook whose Future
  /// completes with no tensors took the average elsewhere (ZeroOptimizer's stage 2 reduce-scatters
  /// into its shard): its bucket is freed as soon as the hook is done, and its gradients are not
  /// written back. Costs an allocation per bucket per backward (reused from the host block cache);
  /// not with gradientAsBucketView (InvalidArgument), whose gradients live in the buckets.
  bool transientBuckets = false;
  CommHook commHook;  ///< null: allreduceHook
};

/// The data-parallel gradient reducer: registered parameters' gradients, marked ready as the
/// framework's backward produces them, are averaged across the group in buckets. markGradReady
/// may be called from any thread; everything else from one thread, between backwards.
class DistributedDataParallel {
 public:
  /// group must outlive the reducer. Throws InvalidArgument naming the parameter for one that is
  /// undefined, not floating point, not contiguous, on a device the group has no backend for, or
  /// whose grad does not match it. Not collective: it builds the first bucket layout locally.
  /// \param group The group whose ranks average the gradients; this rank must be a member.
  /// \param parameters The parameters, in the same order on every rank; not empty.
  /// \param options Bucketing and reduction options.
  /// \throws InvalidArgument also for no parameters, a bucket size of 0, memory registered twice,
  /// a grad given with gradientAsBucketView (or none without it), gradientAsBucketView with
  /// transientBuckets, or a group this rank is not a member of.
  DistributedDataParallel(ProcessGroup& group, std::vector<DataParallelParameter> parameters,
                          DataParallelOptions options = {});
  /// Waits for the collectives still in flight (each up to the group's timeout), which write into
  /// the buckets, ignoring their errors.
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// \return How many parameters were registered.
  size_t parameterCount() const;
  /// The value of parameter i, as registered.
  /// \param i The registration index, below parameterCount().
  /// \return The registered tensor (sharing its storage).
  /// \throws InvalidArgument for i out of range.
  Tensor parameter(size_t i) const;
  /// Its name as a checkpoint knows it (parameterName).
  /// \param i The registration index, below parameterCount().
  /// \return The registered name, or "param" followed by i when it is empty.
  /// \throws InvalidArgument for i out of range.
  std::string parameterName(size_t i) const;
  /// Adds every parameter, whole, to a checkpoint as "<prefix><name>" (replicated: a save writes
  /// each once). DataParallelOptimizer::addToState adds them with the optimizer's state instead.
  /// \param state The checkpoint state to add to.
  /// \param prefix Prepended to every name.
  void addToState(checkpoint::State& state, const std::string& prefix = "") const;
  /// The gradient storage of parameter i: the registered grad, or with gradientAsBucketView the
  /// reducer's view into its bucket. The view changes once, when the buckets are rebuilt after the
  /// first backward: fetch it again after each finalizeBackward().
  /// \param i The registration index, below parameterCount().
  /// \return The registered grad as given, or with gradientAsBucketView the view, shaped like the
  ///   parameter.
  /// \throws InvalidArgument for i out of range.
  Tensor gradient(size_t i) const;

  /// Collective: checks that every rank registered the same parameters (count, dtype, shape; the
  /// error names the first difference and the ranks), then broadcasts the parameters and buffers
  /// from root, coalesced into one broadcast per dtype and device.
  /// \param buffers Further tensors to broadcast from root (e.g. running statistics): defined,
  /// contiguous, the same on every rank.
  /// \param root The rank whose values every rank takes, in [0, group size).
  /// \throws InvalidArgument for a root out of range, an undefined or non-contiguous buffer, or
  /// ranks whose registrations differ (on every rank); the group's errors from the collectives.
  void syncParameters(const std::vector<Tensor>& buffers = {}, int root = 0);

  /// Optional, before a backward: activeRanks is how many ranks run it (Join::step()'s result;
  /// the divisor unless divideByInitialWorldSize). Without it, the world size.
  /// \param activeRanks In [1, world size], or -1 for the world size. Applies to the next
  /// backward only.
  /// \throws InvalidArgument for a count out of range, or fewer than every rank while a NoSync
  /// scope is open.
  void prepareForBackward(int activeRanks = -1);
  /// Gradient i is final for this backward. Any thread, any order; a bucket whose gradients are
  /// all ready is reduced (after the buckets before it).
  /// \param i The registration index, below parameterCount().
  /// \throws InvalidArgument for i out of range or marked twice in this backward. If copying the
  /// gradient into its bucket throws, the mark is undone and the error propagates. A hook's
  /// failure is not thrown here but by finalizeBackward.
  void markGradReady(size_t i);
  /// Reduces what is left, waits for every bucket, and leaves the averages in the gradients.
  /// Returns false for a no-sync backward (nothing was reduced), true otherwise.
  /// \return false for a no-sync backward, true when the gradients were averaged.
  /// \throws InvalidArgument when called again without a mark since the last one, or (after the
  /// reduction) for gradients some rank did not mark without findUnusedParameters; the group's
  /// or the hook's errors from the collectives. Unless it refused a second call, the backward is
  /// over when it throws.
  bool finalizeBackward();
  /// On a rank that ran out of data (inside Join::finish): runs the collectives of one backward
  /// with zero gradients, so the ranks still training are not left waiting. Its own gradients
  /// are not touched.
  void shadowBackward();

  /// While the returned scope lives, backwards do not communicate: gradients accumulate locally
  /// and the first backward after it reduces the sums (one collective per bucket). The scope must
  /// not outlive the reducer.
  class NoSync {
   public:
    /// Opens a scope on ddp; scopes may nest (backwards sync again once all are closed).
    /// \param ddp The reducer; it must outlive the scope.
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  /// Opens a NoSync scope on this reducer.
  /// \return The scope: keep it alive while the backwards that must not communicate run.
  NoSync noSync() { return NoSync(*this); }

  /// The buckets' parameter indices, in bucket order (for tests and tuning).
  /// \return One list of registration indices per bucket, each in its order within the bucket.
  std::vector<std::vector<size_t>> bucketLayout() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

namespace detail {
/// Groups parameters into buckets: in the given order, one run per (dtype, device) kind, the first
/// bucket of each kind up to firstCap bytes and the others up to cap. Pure; unit-tested.
std::vector<std::vector<size_t>> assignBuckets(const std::vector<Tensor>& parameters,
                                               const std::vector<size_t>& order, size_t firstCap,
                                               size_t cap);
}  // namespace detail

}  // namespace c10d::inline v1
