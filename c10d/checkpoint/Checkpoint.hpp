#pragma once

/// \file
/// Distributed checkpoints: save and load a State at any world size, in the background, and tools.
///
/// Saving a State (c10d/checkpoint/State.hpp) from every rank of a group into one checkpoint
/// folder, and loading it back at any world size and layout. The format is open
/// (docs/checkpoint.md): one safetensors file per rank that wrote, and metadata.json, which says
/// where every slice of every tensor lies and carries an xxHash (XXH3-64) of every block of it.
///
/// \code
/// checkpoint::save(state, "ckpt/step-000100", &group);   // collective; visible when it returns
/// checkpoint::load(state, *checkpoint::latest("ckpt"), &group);
/// \endcode
///
/// Save. Every rank writes the slices it is assigned into its own file in DIR.partial/: a slice
/// several ranks hold (replicated) is written by one of them, the writing spread over them by
/// bytes. Once every rank's file is durable (fsync), rank 0 writes metadata.json and renames
/// DIR.partial to DIR: that rename is the commit. A crash of any rank, or of all, at any moment
/// leaves DIR absent (or the earlier checkpoint of that name, when overwriting) and the partial
/// one named DIR.partial, which load refuses and latest() skips.
///
/// Load. Every rank reads metadata.json, then only the blocks of the files its slices overlap,
/// checks each block's checksum, and copies the overlaps into its slices, whatever world size and
/// slicing the checkpoint was saved with. Nothing is written into the State's tensors until every
/// rank has read and checked all it needs: a load fails on every rank or on none, and a failed
/// one leaves the tensors as they were (unless a file changes while the load runs: the second
/// reading checks again and names it). It needs no memory of the state's size.
///
/// A group of nullptr means a job of one process. Folders are on a file system every rank sees
/// (one host, or a shared one).
///
/// Errors: CheckpointError for an unusable checkpoint (what() names the folder, tensor, file and
/// offset: see c10d/core/Exception.hpp); InvalidArgument for a State the ranks disagree about
/// (a tensor of another shape or dtype on another rank, a slice partly overlapping another,
/// slices that leave part of a tensor uncovered, a value set differently), naming the tensor and
/// ranks; the group's errors (a rank lost during a save or load is named in the others' errors).
/// Every rank throws when any rank failed, naming that rank.
/// Threading: save and load are collectives over group, made by one thread of each rank.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/Work.hpp"
#include "c10d/checkpoint/State.hpp"

/// Distributed checkpoints: a State of named tensor slices and values, saved by every rank into
/// one folder (safetensors files and metadata.json) and loaded at any world size and slicing.
namespace c10d::inline v1::checkpoint {

/// How save() writes a checkpoint; the same on every rank (checked).
struct SaveOptions {
  /// Replace a complete checkpoint already at DIR (the old one stays loadable until the new one
  /// is committed; between the two renames DIR is briefly absent, and DIR.old holds it). Off: a
  /// save to an existing checkpoint is refused.
  bool overwrite = false;
  /// Bytes covered by each checksum (1 to 256 MiB): a load reads and checks whole blocks, so
  /// smaller blocks read less around a small overlap, larger ones store fewer checksums.
  int64_t checksumBlockBytes = int64_t{1} << 20;
  /// How the job was laid out ("data=2 tensor=2 pipeline=1"), kept in the metadata for inspect.
  std::string layout;
};

/// What load() accepts.
struct LoadOptions {
  /// Let the checkpoint hold tensors that no rank of the program asks for (a load of the model
  /// without its optimizer). Off: such a checkpoint is refused, naming them. (The checkpoint's
  /// values are all loaded into the state, asked for or not.)
  bool allowUnexpected = false;
  /// Let the program ask for tensors and values the checkpoint lacks; those are left as they are.
  /// Off: refused, naming them.
  bool allowMissing = false;
  /// Read and check every block before writing any tensor, then read (from the page cache) and
  /// copy: a damaged checkpoint leaves the tensors as they were. Off: one reading, each block
  /// checked as it is copied, faster (measured: docs/performance-history.md, "Figures that lived
  /// in code comments"), and a damaged block fails the load (on every rank, naming it) with the
  /// tensors partly written: for programs that load into fresh tensors, or that start over when
  /// a load fails.
  bool checkFirst = true;
};

/// Collective over group (or this process alone): writes state to dir and returns once the
/// checkpoint is committed. Every rank passes the same dir and options (checked). A dir ending in
/// ".partial" or ".old" is refused: those suffixes name checkpoints in the making or replaced.
/// \param state this rank's slices and values; its beforeSave hooks run first.
/// \param dir the checkpoint folder to create, with its parents (a trailing '/' is ignored).
/// \param group the ranks that save together; nullptr: this process alone.
/// \param options how to write.
/// \throws InvalidArgument for a bad dir or options, or a State the ranks disagree about;
///         CheckpointError when dir exists without SaveOptions::overwrite, or a write fails.
void save(const State& state, const std::string& dir, ProcessGroup* group = nullptr,
          const SaveOptions& options = {});

/// Collective over group (or this process alone): fills state's tensors and values from dir, then
/// runs its load hooks.
/// \param state the tensors to fill (this rank's slices); every value the checkpoint holds is
///        set in it (replaced, or added), the others stay.
/// \param dir a complete checkpoint folder.
/// \param group the ranks that load together; nullptr: this process alone.
/// \param options what to accept.
/// \throws CheckpointError for an unusable or damaged checkpoint, a tensor of another dtype or
///         shape, and tensors unexpected or tensors and values missing that options do not
///         allow (a value the program does not set is never refused: it is added).
void load(State& state, const std::string& dir, ProcessGroup* group = nullptr,
          const LoadOptions& options = {});

/// Saves in the background: save() copies the rank's slices into host memory kept between saves
/// (the only part the caller waits for), then a thread of this rank ("c10d-ckpt-save") writes
/// and commits the checkpoint over a group of its own, so training's collectives and the save's
/// never interleave on one group. The returned Future completes when the checkpoint is committed,
/// or with the save's error.
///
/// A save while the previous one runs waits for it (or, with refuseWhileBusy, throws StateError
/// on every rank when it still runs on any); a previous save's error is thrown by the next save()
/// or wait(), whether or not its Future was waited on.
///
/// Construction is collective over group (it creates the saver's own group), and so is save():
/// before any rank starts writing, the ranks agree over group that every one staged its slices
/// (an error on one is thrown on all, naming it). group must outlive the saver. Threading: one
/// thread calls save() and wait(); the destructor waits for a save in flight.
class AsyncSaver {
 public:
  /// \param group the ranks that save together; must outlive the saver.
  /// \param refuseWhileBusy true: a save() while the previous one runs on any rank throws
  ///        StateError instead of waiting for it.
  explicit AsyncSaver(ProcessGroup& group, bool refuseWhileBusy = false);
  ~AsyncSaver();
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;

  /// Stages this rank's slices and starts writing them in the background, as checkpoint::save.
  /// \param state this rank's slices and values; copied (after its beforeSave hooks), so the
  ///        program may change its tensors once save() returns.
  /// \param dir the checkpoint folder, as for checkpoint::save.
  /// \param options how to write, as for checkpoint::save.
  /// \return A Future that completes when the checkpoint is committed, or with the save's error.
  /// \throws StateError when refuseWhileBusy and the previous save still runs on a rank; the
  ///         previous save's error; what staging threw on any rank.
  std::shared_ptr<Future> save(const State& state, const std::string& dir,
                               const SaveOptions& options = {});
  /// Waits for the save in flight, if any; throws its error (once).
  void wait();
  /// Bytes of host memory held for staging.
  /// \return Those bytes: the largest save's so far (0 before the first).
  size_t stagingBytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Progress of a long call: bytes done of total.
using Progress = std::function<void(int64_t done, int64_t total)>;

/// Reads every block of every slice of dir and checks it against its checksum, and every file's
/// size. Returns what is wrong, one line each, naming the tensor, file and byte offset; empty
/// when the checkpoint is sound. Throws CheckpointError when dir is not a complete checkpoint.
/// \param dir the checkpoint folder.
/// \param progress called as blocks are read, with bytes read of Metadata::dataBytes; may be
///        empty.
/// \return The problems found, one line each; empty when none.
/// \throws CheckpointError when dir is not a complete checkpoint or its metadata is bad.
std::vector<std::string> verify(const std::string& dir, const Progress& progress = nullptr);

/// Writes every tensor of dir whole, in one safetensors file at out (written as out.partial, then
/// renamed), for inference or a program without c10d; the values go into its "__metadata__"
/// (integers as decimal text, other bytes as base64). Reads and checks as load does, one tensor
/// at a time. Throws CheckpointError as load does, and for an out that exists.
/// \param dir the checkpoint folder.
/// \param out the safetensors file to write; must not exist.
/// \param progress called after each tensor, with bytes written of Metadata::dataBytes; may be
///        empty.
/// \throws CheckpointError for a damaged checkpoint, an out that exists, or a failed write.
void consolidate(const std::string& dir, const std::string& out,
                 const Progress& progress = nullptr);

/// Folders holding checkpoints: the complete ones under root (folders whose metadata.json exists
/// and reads; a folder named *.partial never is), newest last: by the value "step" when every one
/// has it as an integer, else by the time of their commit.
/// \param root the folder whose direct subfolders are looked at.
/// \return Their paths (root/name), oldest first.
/// \throws CheckpointError when root cannot be listed.
std::vector<std::string> completeCheckpoints(const std::string& root);
/// The newest complete checkpoint under root, or nullopt.
/// \param root the folder whose direct subfolders are looked at.
/// \return Its path (root/name); nullopt when there is none or root does not exist.
/// \throws CheckpointError when root exists but cannot be listed.
std::optional<std::string> latest(const std::string& root);
/// Removes all but the newest keep complete checkpoints under root and every partial folder there
/// (call it between saves: a save in flight under root is a partial folder). Returns the folders
/// removed.
/// \param root the folder whose direct subfolders are looked at.
/// \param keep how many of the newest complete checkpoints stay; 0 removes them all.
/// \return The paths removed.
/// \throws CheckpointError when root cannot be listed or a folder cannot be removed.
std::vector<std::string> keepLast(const std::string& root, size_t keep);

}  // namespace c10d::inline v1::checkpoint
