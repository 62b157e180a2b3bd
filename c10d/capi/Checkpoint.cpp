// The C API's checkpoints: thin calls into c10d/checkpoint.

#include <algorithm>
#include <utility>

#include "c10d/capi/Handles.hpp"
#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/core/Cuda.hpp"

struct c10d_checkpoint_saver {
  std::shared_ptr<c10d::ProcessGroup> group;  // declared first: it outlives the saver
  std::unique_ptr<c10d::checkpoint::AsyncSaver> saver;
  std::shared_ptr<c10d::Future> last;
};

namespace c10d::capi {
namespace {

const char* textOf(const char* text, const char* call, const char* what) {
  C10D_CHECK(text != nullptr, InvalidArgument, call, ": ", what, " is NULL");
  return text;
}

checkpoint::SaveOptions saveOptionsOf(const c10d_checkpoint_save_options* options,
                                      const char* call) {
  checkpoint::SaveOptions out;
  if (!checkOptions(options, call)) return out;
  out.overwrite = options->overwrite != 0;
  if (options->checksum_block_bytes != 0) out.checksumBlockBytes = options->checksum_block_bytes;
  if (options->layout != nullptr) out.layout = options->layout;
  return out;
}

ProcessGroup* groupOf(c10d_group* group) {
  return group == nullptr ? nullptr : group->group.get();
}

}  // namespace

void waitForStreams(const c10d_checkpoint_state& state) {
  void* previous = currentCudaStream();
  try {
    for (const auto& [device, stream] : state.streams) {
      setCurrentCudaStream(stream);
      synchronizeCurrentStream(device);
    }
  } catch (...) {
    setCurrentCudaStream(previous);
    throw;
  }
  setCurrentCudaStream(previous);
}

}  // namespace c10d::capi

using namespace c10d;
using namespace c10d::capi;

extern "C" {

c10d_status c10d_checkpoint_state_new(c10d_checkpoint_state** state) {
  return guarded([&] {
    c10d_checkpoint_state*& slot = outOf(state, "c10d_checkpoint_state_new");
    slot = new c10d_checkpoint_state;
  });
}

void c10d_checkpoint_state_free(c10d_checkpoint_state* state) {
  delete state;
}

c10d_status c10d_checkpoint_state_add(c10d_checkpoint_state* state, const char* name,
                                      const c10d_buffer* local, const int64_t* global_shape,
                                      size_t ndim, c10d_slice_kind kind, const int64_t* offsets,
                                      const int64_t* sizes) {
  const char* call = "c10d_checkpoint_state_add";
  return guarded([&] {
    auto& s = deref(state, call, "state");
    const std::string tensorName = textOf(name, call, "name");
    Tensor tensor = tensorOf(local, call, "local");
    C10D_CHECK(ndim == 0 || global_shape != nullptr, InvalidArgument, call, ": tensor '",
               tensorName, "': global_shape is NULL for ", ndim, " dimensions");
    std::vector<int64_t> shape(global_shape, global_shape + ndim);
    checkpoint::Slice slice;
    if (offsets == nullptr && sizes == nullptr) {
      slice = checkpoint::Slice::whole(shape);
    } else {
      C10D_CHECK(offsets != nullptr && sizes != nullptr, InvalidArgument, call, ": tensor '",
                 tensorName, "': give both offsets and sizes, or neither (the whole tensor)");
      C10D_CHECK(kind == C10D_SLICE_BOX || kind == C10D_SLICE_FLAT, InvalidArgument, call,
                 ": tensor '", tensorName, "': slice kind ", static_cast<int>(kind),
                 " is neither C10D_SLICE_BOX nor C10D_SLICE_FLAT");
      const size_t n = kind == C10D_SLICE_FLAT ? 1 : ndim;
      slice = kind == C10D_SLICE_FLAT
                  ? checkpoint::Slice::flat(offsets[0], sizes[0])
                  : checkpoint::Slice::box({offsets, offsets + n}, {sizes, sizes + n});
    }
    // The buffer's elements, shaped as the slice's (or flat): contiguous either way.
    s.state.addSlice(tensorName, tensor, std::move(shape), std::move(slice));
    if (!tensor.device().isCPU() && local->stream != nullptr) {
      const std::pair<Device, void*> entry{tensor.device(), local->stream};
      if (std::find(s.streams.begin(), s.streams.end(), entry) == s.streams.end()) {
        s.streams.push_back(entry);
      }
    }
  });
}

c10d_status c10d_checkpoint_state_set_value(c10d_checkpoint_state* state, const char* name,
                                            const void* data, size_t size) {
  const char* call = "c10d_checkpoint_state_set_value";
  return guarded([&] {
    C10D_CHECK(data != nullptr || size == 0, InvalidArgument, call, ": data is NULL");
    deref(state, call, "state")
        .state.setValue(textOf(name, call, "name"),
                        std::string(static_cast<const char*>(data), size));
  });
}

c10d_status c10d_checkpoint_state_set_int(c10d_checkpoint_state* state, const char* name,
                                          int64_t value) {
  const char* call = "c10d_checkpoint_state_set_int";
  return guarded(
      [&] { deref(state, call, "state").state.setInt(textOf(name, call, "name"), value); });
}

c10d_status c10d_checkpoint_state_get_int(const c10d_checkpoint_state* state, const char* name,
                                          int64_t* value) {
  const char* call = "c10d_checkpoint_state_get_int";
  return guarded([&] {
    outOf(value, call) = deref(state, call, "state").state.getInt(textOf(name, call, "name"));
  });
}

c10d_status c10d_checkpoint_state_get_value(const c10d_checkpoint_state* state, const char* name,
                                            c10d_bytes* value, int* found) {
  const char* call = "c10d_checkpoint_state_get_value";
  return guarded([&] {
    auto bytes = deref(state, call, "state").state.value(textOf(name, call, "name"));
    c10d_bytes& out = outOf(value, call);
    outOf(found, call) = bytes ? 1 : 0;
    out = bytes ? copyOut(bytes->data(), bytes->size()) : c10d_bytes{nullptr, 0};
  });
}

c10d_status c10d_checkpoint_save(const c10d_checkpoint_state* state, const char* dir,
                                 c10d_group* group, const c10d_checkpoint_save_options* options) {
  const char* call = "c10d_checkpoint_save";
  return guarded([&] {
    const auto& s = deref(state, call, "state");
    waitForStreams(s);
    checkpoint::save(s.state, textOf(dir, call, "dir"), groupOf(group),
                     saveOptionsOf(options, call));
  });
}

c10d_status c10d_checkpoint_load(c10d_checkpoint_state* state, const char* dir, c10d_group* group,
                                 const c10d_checkpoint_load_options* options) {
  const char* call = "c10d_checkpoint_load";
  return guarded([&] {
    checkpoint::LoadOptions load;
    if (checkOptions(options, call)) {
      load.allowUnexpected = options->allow_unexpected != 0;
      load.allowMissing = options->allow_missing != 0;
      load.checkFirst = options->check_first != 0;
    }
    auto& s = deref(state, call, "state");
    waitForStreams(s);
    checkpoint::load(s.state, textOf(dir, call, "dir"), groupOf(group), load);
  });
}

c10d_status c10d_checkpoint_saver_new(c10d_group* group, int refuse_while_busy,
                                      c10d_checkpoint_saver** saver) {
  const char* call = "c10d_checkpoint_saver_new";
  return guarded([&] {
    auto& out = outOf(saver, call);
    auto handle = std::make_unique<c10d_checkpoint_saver>();
    handle->group = deref(group, call, "group").group;
    handle->saver =
        std::make_unique<checkpoint::AsyncSaver>(*handle->group, refuse_while_busy != 0);
    out = handle.release();
  });
}

c10d_status c10d_checkpoint_saver_save(c10d_checkpoint_saver* saver,
                                       const c10d_checkpoint_state* state, const char* dir,
                                       const c10d_checkpoint_save_options* options) {
  const char* call = "c10d_checkpoint_saver_save";
  return guarded([&] {
    auto& s = deref(saver, call, "saver");
    const auto& st = deref(state, call, "state");
    waitForStreams(st);
    s.last = s.saver->save(st.state, textOf(dir, call, "dir"), saveOptionsOf(options, call));
  });
}

c10d_status c10d_checkpoint_saver_done(c10d_checkpoint_saver* saver, int* done) {
  const char* call = "c10d_checkpoint_saver_done";
  return guarded([&] {
    auto& s = deref(saver, call, "saver");
    outOf(done, call) = !s.last || s.last->completed() ? 1 : 0;
  });
}

c10d_status c10d_checkpoint_saver_wait(c10d_checkpoint_saver* saver) {
  return guarded([&] { deref(saver, "c10d_checkpoint_saver_wait", "saver").saver->wait(); });
}

void c10d_checkpoint_saver_free(c10d_checkpoint_saver* saver) {
  delete saver;
}

c10d_status c10d_checkpoint_latest(const char* root, c10d_bytes* path, int* found) {
  const char* call = "c10d_checkpoint_latest";
  return guarded([&] {
    auto newest = checkpoint::latest(textOf(root, call, "root"));
    c10d_bytes& out = outOf(path, call);
    outOf(found, call) = newest ? 1 : 0;
    out = newest ? copyOut(newest->c_str(), newest->size() + 1) : c10d_bytes{nullptr, 0};
    if (newest) out.size -= 1;  // NUL-terminated, size without it
  });
}

c10d_status c10d_checkpoint_keep_last(const char* root, size_t keep) {
  return guarded(
      [&] { checkpoint::keepLast(textOf(root, "c10d_checkpoint_keep_last", "root"), keep); });
}

c10d_status c10d_checkpoint_verify(const char* dir, c10d_bytes* report, int* problems) {
  const char* call = "c10d_checkpoint_verify";
  return guarded([&] {
    const std::vector<std::string> found = checkpoint::verify(textOf(dir, call, "dir"));
    std::string text;
    for (const std::string& line : found) text += line + "\n";
    c10d_bytes& reportSlot = outOf(report, call);
    outOf(problems, call) = static_cast<int>(found.size());
    reportSlot = copyOut(text.c_str(), text.size() + 1);
    report->size -= 1;
  });
}

c10d_status c10d_checkpoint_consolidate(const char* dir, const char* out) {
  const char* call = "c10d_checkpoint_consolidate";
  return guarded(
      [&] { checkpoint::consolidate(textOf(dir, call, "dir"), textOf(out, call, "out")); });
}

}  // extern "C"
