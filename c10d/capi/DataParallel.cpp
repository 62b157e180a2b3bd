// The C API's data-parallel reducer, over c10d::DistributedDataParallel.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c10d/capi/Handles.hpp"
#include "c10d/training/DistributedDataParallel.hpp"

// Members go in reverse order: the no-sync scope before the reducer it refers to, the reducer
// before the group it refers to.
struct c10d_ddp {
  std::shared_ptr<c10d::ProcessGroup> group;
  std::unique_ptr<c10d::DistributedDataParallel> ddp;
  std::optional<c10d::DistributedDataParallel::NoSync> noSync;
};

using namespace c10d;
using namespace c10d::capi;

namespace {

DistributedDataParallel& reducerOf(c10d_ddp* ddp, const char* call) {
  return *deref(ddp, call, "ddp").ddp;
}

}  // namespace

extern "C" {

c10d_status c10d_ddp_create(c10d_group* group, const c10d_ddp_parameter* parameters,
                            size_t num_parameters, const c10d_ddp_options* options,
                            c10d_ddp** out) {
  return guarded([&] {
    const char* call = "c10d_ddp_create";
    std::shared_ptr<ProcessGroup> pg = deref(group, call, "group").group;
    outOf(out, call);
    C10D_CHECK(parameters != nullptr || num_parameters == 0, InvalidArgument, call,
               ": parameters is NULL with ", num_parameters, " parameters");
    DataParallelOptions ddpOptions;
    if (checkOptions(options, call)) {
      ddpOptions.firstBucketBytes = options->first_bucket_bytes;
      ddpOptions.bucketCapBytes = options->bucket_cap_bytes;
      ddpOptions.findUnusedParameters = options->find_unused_parameters != 0;
      ddpOptions.gradientAsBucketView = options->gradient_as_bucket_view != 0;
      ddpOptions.divideByInitialWorldSize = options->divide_by_initial_world_size != 0;
      ddpOptions.rebuildBuckets = options->rebuild_buckets != 0;
      switch (options->hook) {
        case C10D_DDP_ALLREDUCE:
          break;
        case C10D_DDP_FP16:
          ddpOptions.commHook = fp16CompressHook;
          break;
        case C10D_DDP_BF16:
          ddpOptions.commHook = bf16CompressHook;
          break;
        default:
          C10D_THROW(InvalidArgument, call, ": options->hook is ", static_cast<int>(options->hook),
                     ", not a c10d_ddp_hook (0 to 2)");
      }
    }
    std::vector<DataParallelParameter> registered;
    registered.reserve(num_parameters);
    for (size_t i = 0; i < num_parameters; ++i) {
      std::string at = "parameters[" + std::to_string(i) + "]";
      const c10d_ddp_parameter& p = parameters[i];
      Tensor value = tensorOf(&p.value, call, (at + ".value").c_str());
      Tensor grad;
      if (p.grad.data != nullptr) grad = tensorOf(&p.grad, call, (at + ".grad").c_str());
      registered.push_back({value, grad, p.name != nullptr ? p.name : at});
    }
    auto reducer =
        std::make_unique<DistributedDataParallel>(*pg, std::move(registered), ddpOptions);
    *out = new c10d_ddp{pg, std::move(reducer), std::nullopt};
  });
}

c10d_status c10d_ddp_sync_parameters(c10d_ddp* ddp, const c10d_buffer* buffers, size_t num_buffers,
                                     int root) {
  return guarded([&] {
    const char* call = "c10d_ddp_sync_parameters";
    DistributedDataParallel& reducer = reducerOf(ddp, call);
    reducer.syncParameters(tensorsOf(buffers, num_buffers, call, "buffers"), root);
  });
}

c10d_status c10d_ddp_prepare_for_backward(c10d_ddp* ddp, int active_ranks) {
  return guarded(
      [&] { reducerOf(ddp, "c10d_ddp_prepare_for_backward").prepareForBackward(active_ranks); });
}

c10d_status c10d_ddp_mark_grad_ready(c10d_ddp* ddp, size_t index) {
  return guarded([&] { reducerOf(ddp, "c10d_ddp_mark_grad_ready").markGradReady(index); });
}

c10d_status c10d_ddp_finalize_backward(c10d_ddp* ddp, int* synced) {
  return guarded([&] {
    bool reduced = reducerOf(ddp, "c10d_ddp_finalize_backward").finalizeBackward();
    if (synced != nullptr) *synced = reduced ? 1 : 0;
  });
}

c10d_status c10d_ddp_shadow_backward(c10d_ddp* ddp) {
  return guarded([&] { reducerOf(ddp, "c10d_ddp_shadow_backward").shadowBackward(); });
}

c10d_status c10d_ddp_set_no_sync(c10d_ddp* ddp, int no_sync) {
  return guarded([&] {
    DistributedDataParallel& reducer = reducerOf(ddp, "c10d_ddp_set_no_sync");
    if (no_sync == 0) {
      ddp->noSync.reset();
    } else if (!ddp->noSync) {
      ddp->noSync.emplace(reducer);
    }
  });
}

c10d_status c10d_ddp_gradient(c10d_ddp* ddp, size_t index, c10d_buffer* out) {
  return guarded([&] {
    const char* call = "c10d_ddp_gradient";
    DistributedDataParallel& reducer = reducerOf(ddp, call);
    outOf(out, call);
    *out = bufferOf(reducer.gradient(index));
  });
}

void c10d_ddp_free(c10d_ddp* ddp) {
  delete ddp;
}

}  // extern "C"
