#include <cstring>
#include <mutex>
#include <thread>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/Exchange.hpp"
#include "c10d/checkpoint/Staging.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1::checkpoint {

struct AsyncSaver::Impl {
  ProcessGroup* caller = nullptr;       // the group it was made over: save()'s agreement runs here
  std::shared_ptr<ProcessGroup> group;  // the saver's own: only its thread runs collectives on it
  bool refuseWhileBusy = false;
  std::shared_ptr<void> staging;  // one block for every slice, kept while large enough
  size_t stagingBytes = 0;
  std::thread thread;
  std::shared_ptr<Future> pending;
  std::exception_ptr unreported;  // the last save's error, until save() or wait() throws it

  // Joins the save in flight; keeps its error for the caller.
  void join() {
    if (thread.joinable()) thread.join();
    if (pending && pending->hasError()) unreported = pending->error();
    pending.reset();
  }

  void throwUnreported() {
    if (!unreported) return;
    std::exception_ptr error = unreported;
    unreported = nullptr;
    std::rethrow_exception(error);
  }
};

AsyncSaver::AsyncSaver(ProcessGroup& group, bool refuseWhileBusy)
    : impl_(std::make_unique<Impl>()) {
  std::vector<int> everyone(group.size());
  for (int r = 0; r < group.size(); ++r) everyone[r] = r;
  impl_->caller = &group;
  impl_->group = group.newGroup(everyone);
  impl_->refuseWhileBusy = refuseWhileBusy;
}

AsyncSaver::~AsyncSaver() {
  impl_->join();
  if (impl_->unreported) {
    try {
      std::rethrow_exception(impl_->unreported);
    } catch (const std::exception& e) {
      C10D_LOG(Error, "checkpoint::AsyncSaver: the last save failed and nobody asked: ", e.what());
    }
  }
}

std::shared_ptr<Future> AsyncSaver::save(const State& state, const std::string& dir,
                                         const SaveOptions& options) {
  Impl& impl = *impl_;
  // Whether a save is still running is each rank's own timing, and staging can fail on one rank
  // (memory, a hook, a device copy): the ranks agree on both before any starts a save, so that
  // they all start one or all throw, and no rank's save waits for a partner that never comes.
  const bool busy = impl.refuseWhileBusy && impl.pending && !impl.pending->completed();
  State staged;
  const detail::Outcome outcome = detail::capture([&] {
    if (busy) return;
    impl.join();
    impl.throwUnreported();
    // The blocking part: this rank's slices copied into staging.
    for (const auto& hook : state.saveHooks()) hook();
    std::vector<size_t> sizes, offsets;
    for (const StateTensor& t : state.tensors()) sizes.push_back(t.local.nbytes());
    const size_t bytes = detail::layOut(sizes, offsets);
    if (!impl.staging || impl.stagingBytes < bytes) {
      impl.staging.reset();
      impl.stagingBytes = 0;
      impl.staging = detail::allocateStaging(bytes);
      impl.stagingBytes = bytes;
    }
    for (size_t i = 0; i < state.tensors().size(); ++i) {
      const StateTensor& t = state.tensors()[i];
      Tensor copy =
          Tensor::fromBlob(static_cast<char*>(impl.staging.get()) + offsets[i], t.local.dtype(),
                           t.local.sizes(), Device::cpu(), {}, impl.staging);
      if (t.local.device().isCPU()) {
        std::memcpy(copy.data(), t.local.data(), t.local.nbytes());
      } else {
        copyTensor(copy, t.local);
      }
      staged.addSlice(t.name, copy, t.globalShape, t.slice);
    }
    for (const auto& [name, bytes] : state.values()) staged.setValue(name, bytes);
  });
  const int rank = impl.caller->rank();
  const std::vector<nlohmann::json> agreed =
      detail::exchange(impl.caller, rank, outcome, nlohmann::json{{"busy", busy}});
  for (size_t r = 0; r < agreed.size(); ++r) {
    C10D_CHECK(!agreed[r].at("busy").get<bool>(), StateError,
               "checkpoint::AsyncSaver: the previous save is still running on rank ", r,
               "; wait() for it before saving '", dir, "'");
  }

  auto future = std::make_shared<Future>();
  impl.pending = future;
  impl.thread = std::thread([group = impl.group, staged = std::move(staged), dir, options, future] {
    c10d::detail::nameThisThread("c10d-ckpt-save");
    try {
      checkpoint::save(staged, dir, group.get(), options);
      future->markCompleted();
    } catch (...) {
      future->setError(std::current_exception());
    }
  });
  return future;
}

void AsyncSaver::wait() {
  impl_->join();
  impl_->throwUnreported();
}

size_t AsyncSaver::stagingBytes() const {
  return impl_->stagingBytes;
}

}  // namespace c10d::inline v1::checkpoint
