// The C API's collectives and point-to-point operations: each checks its handle, options and
// buffers, then calls the C++ ProcessGroup, which validates the rest (ranks, sizes, dtypes).

#include <vector>

#include "c10d/capi/Handles.hpp"

using namespace c10d;
using namespace c10d::capi;

namespace {

struct OpOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  int root = 0;
  int tag = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

OpOptions opOptionsOf(const c10d_op_options* options, const char* call) {
  OpOptions op;
  if (!checkOptions(options, call)) return op;
  int kind = options->reduce_op;
  C10D_CHECK(kind >= C10D_SUM && kind <= C10D_PREMUL_SUM, InvalidArgument, call,
             ": options->reduce_op is ", kind, ", not a c10d_reduce_op (0 to ",
             int(C10D_PREMUL_SUM), ")");
  op.reduceOp = kind == C10D_PREMUL_SUM ? ReduceOp::premulSum(options->premul_factor)
                                        : ReduceOp(static_cast<ReduceOp::Kind>(kind));
  op.root = options->root;
  op.tag = options->tag;
  op.timeout = timeoutOf(options->timeout_ms);
  return op;
}

// c10d_reduce_op's values are ReduceOp::Kind's, in the same order.
static_assert(int(C10D_AVG) == int(ReduceOp::AVG) && int(C10D_BXOR) == int(ReduceOp::BXOR) &&
              int(C10D_PREMUL_SUM) == int(ReduceOp::PREMUL_SUM));

const std::shared_ptr<ProcessGroup>& groupOf(c10d_group* group, const char* call) {
  return deref(group, call, "group").group;
}

}  // namespace

extern "C" {

c10d_status c10d_broadcast(c10d_group* group, const c10d_buffer* buffer,
                           const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_broadcast";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor tensor = tensorOf(buffer, call, "buffer");
    StreamScope stream(call, buffer, 1);
    deliver(pg->broadcast(tensor, BroadcastOptions{op.root, op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_allreduce(c10d_group* group, const c10d_buffer* buffer,
                           const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_allreduce";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor tensor = tensorOf(buffer, call, "buffer");
    StreamScope stream(call, buffer, 1);
    deliver(pg->allreduce(tensor, AllreduceOptions{op.reduceOp, op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_group_start_coalescing(c10d_group* group) {
  return guarded([&] { groupOf(group, "c10d_group_start_coalescing")->startCoalescing(); });
}

c10d_status c10d_group_end_coalescing(c10d_group* group, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_group_end_coalescing";
    auto& pg = groupOf(group, call);
    StreamScope stream(call, nullptr, 0);
    deliver(pg->endCoalescing(), pg, stream, work);
  });
}

c10d_status c10d_allreduce_coalesced(c10d_group* group, const c10d_buffer* buffers,
                                     size_t num_buffers, const c10d_op_options* options,
                                     c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_allreduce_coalesced";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    std::vector<Tensor> tensors = tensorsOf(buffers, num_buffers, call, "buffers");
    StreamScope stream(call, buffers, num_buffers);
    deliver(pg->allreduceCoalesced(tensors, AllreduceOptions{op.reduceOp, op.timeout}), pg, stream,
            work);
  });
}

c10d_status c10d_reduce(c10d_group* group, const c10d_buffer* buffer,
                        const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_reduce";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor tensor = tensorOf(buffer, call, "buffer");
    StreamScope stream(call, buffer, 1);
    deliver(pg->reduce(tensor, ReduceOptions{op.reduceOp, op.root, op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_allgather(c10d_group* group, const c10d_buffer* outputs, size_t num_outputs,
                           const c10d_buffer* input, const c10d_op_options* options,
                           c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_allgather";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    std::vector<Tensor> out = tensorsOf(outputs, num_outputs, call, "outputs");
    Tensor in = tensorOf(input, call, "input");
    StreamScope stream(call, outputs, num_outputs, input, 1);
    deliver(pg->allgather(out, in, AllgatherOptions{op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_allgather_into_tensor(c10d_group* group, const c10d_buffer* output,
                                       const c10d_buffer* input, const c10d_op_options* options,
                                       c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_allgather_into_tensor";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor out = tensorOf(output, call, "output");
    Tensor in = tensorOf(input, call, "input");
    StreamScope stream(call, output, 1, input, 1);
    deliver(pg->allgatherIntoTensor(out, in, AllgatherOptions{op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_gather(c10d_group* group, const c10d_buffer* outputs, size_t num_outputs,
                        const c10d_buffer* input, const c10d_op_options* options,
                        c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_gather";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    std::vector<Tensor> out = tensorsOf(outputs, num_outputs, call, "outputs");
    Tensor in = tensorOf(input, call, "input");
    StreamScope stream(call, outputs, num_outputs, input, 1);
    deliver(pg->gather(out, in, GatherOptions{op.root, op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_scatter(c10d_group* group, const c10d_buffer* output, const c10d_buffer* inputs,
                         size_t num_inputs, const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_scatter";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor out = tensorOf(output, call, "output");
    std::vector<Tensor> in = tensorsOf(inputs, num_inputs, call, "inputs");
    StreamScope stream(call, output, 1, inputs, num_inputs);
    deliver(pg->scatter(out, in, ScatterOptions{op.root, op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_reduce_scatter(c10d_group* group, const c10d_buffer* output,
                                const c10d_buffer* inputs, size_t num_inputs,
                                const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_reduce_scatter";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor out = tensorOf(output, call, "output");
    std::vector<Tensor> in = tensorsOf(inputs, num_inputs, call, "inputs");
    StreamScope stream(call, output, 1, inputs, num_inputs);
    deliver(pg->reduceScatter(out, in, ReduceScatterOptions{op.reduceOp, op.timeout}), pg, stream,
            work);
  });
}

c10d_status c10d_reduce_scatter_tensor(c10d_group* group, const c10d_buffer* output,
                                       const c10d_buffer* input, const c10d_op_options* options,
                                       c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_reduce_scatter_tensor";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor out = tensorOf(output, call, "output");
    Tensor in = tensorOf(input, call, "input");
    StreamScope stream(call, output, 1, input, 1);
    deliver(pg->reduceScatterTensor(out, in, ReduceScatterOptions{op.reduceOp, op.timeout}), pg,
            stream, work);
  });
}

c10d_status c10d_alltoall(c10d_group* group, const c10d_buffer* outputs, size_t num_outputs,
                          const c10d_buffer* inputs, size_t num_inputs,
                          const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_alltoall";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    std::vector<Tensor> out = tensorsOf(outputs, num_outputs, call, "outputs");
    std::vector<Tensor> in = tensorsOf(inputs, num_inputs, call, "inputs");
    StreamScope stream(call, outputs, num_outputs, inputs, num_inputs);
    deliver(pg->alltoall(out, in, AllToAllOptions{op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_alltoall_base(c10d_group* group, const c10d_buffer* output,
                               const c10d_buffer* input, const int64_t* output_splits,
                               const int64_t* input_splits, size_t num_splits,
                               const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_alltoall_base";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor out = tensorOf(output, call, "output");
    Tensor in = tensorOf(input, call, "input");
    C10D_CHECK((output_splits == nullptr) == (input_splits == nullptr), InvalidArgument, call,
               ": give both output_splits and input_splits, or neither (equal splits)");
    std::vector<int64_t> outSplits, inSplits;
    if (output_splits != nullptr) {
      C10D_CHECK(num_splits == static_cast<size_t>(pg->size()), InvalidArgument, call,
                 ": num_splits is ", num_splits, "; it must be the group's size, ", pg->size());
      outSplits.assign(output_splits, output_splits + num_splits);
      inSplits.assign(input_splits, input_splits + num_splits);
    }
    StreamScope stream(call, output, 1, input, 1);
    deliver(pg->alltoallBase(out, in, outSplits, inSplits, AllToAllOptions{op.timeout}), pg, stream,
            work);
  });
}

c10d_status c10d_barrier(c10d_group* group, const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_barrier";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    StreamScope stream(call, nullptr, 0);
    deliver(pg->barrier(BarrierOptions{op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_monitored_barrier(c10d_group* group, int64_t timeout_ms, int wait_all) {
  return guarded([&] {
    auto& pg = groupOf(group, "c10d_monitored_barrier");
    pg->monitoredBarrier(BarrierOptions{timeoutOf(timeout_ms)}, wait_all != 0);
  });
}

c10d_status c10d_send(c10d_group* group, const c10d_buffer* buffer, int dst,
                      const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_send";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor tensor = tensorOf(buffer, call, "buffer");
    StreamScope stream(call, buffer, 1);
    deliver(pg->send(tensor, dst, SendOptions{op.tag, op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_recv(c10d_group* group, const c10d_buffer* buffer, int src,
                      const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_recv";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor tensor = tensorOf(buffer, call, "buffer");
    StreamScope stream(call, buffer, 1);
    deliver(pg->recv(tensor, src, RecvOptions{op.tag, op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_recv_anysource(c10d_group* group, const c10d_buffer* buffer,
                                const c10d_op_options* options, c10d_work** work) {
  return guarded([&] {
    const char* call = "c10d_recv_anysource";
    auto& pg = groupOf(group, call);
    OpOptions op = opOptionsOf(options, call);
    Tensor tensor = tensorOf(buffer, call, "buffer");
    StreamScope stream(call, buffer, 1);
    deliver(pg->recvAnysource(tensor, RecvOptions{op.tag, op.timeout}), pg, stream, work);
  });
}

c10d_status c10d_batch_isend_irecv(c10d_group* group, const c10d_p2p_op* ops, size_t num_ops,
                                   int64_t timeout_ms, c10d_work** works) {
  return guarded([&] {
    const char* call = "c10d_batch_isend_irecv";
    auto& pg = groupOf(group, call);
    C10D_CHECK(ops != nullptr && num_ops > 0, InvalidArgument, call,
               ": no operations (ops is NULL or num_ops is 0)");
    std::vector<P2POp> batch;
    batch.reserve(num_ops);
    std::vector<c10d_buffer> buffers;  // for the stream scope
    buffers.reserve(num_ops);
    for (size_t i = 0; i < num_ops; ++i) {
      std::string what = "ops[" + std::to_string(i) + "].buffer";
      C10D_CHECK(ops[i].kind == C10D_P2P_SEND || ops[i].kind == C10D_P2P_RECV, InvalidArgument,
                 call, ": ops[", i, "].kind is ", static_cast<int>(ops[i].kind),
                 ", not C10D_P2P_SEND (0) or C10D_P2P_RECV (1)");
      batch.push_back(P2POp{ops[i].kind == C10D_P2P_SEND ? P2POp::Send : P2POp::Recv,
                            tensorOf(&ops[i].buffer, call, what.c_str()), ops[i].peer, ops[i].tag});
      buffers.push_back(ops[i].buffer);
    }
    StreamScope stream(call, buffers.data(), buffers.size());
    std::vector<std::shared_ptr<Work>> started =
        pg->batchIsendIrecv(batch, BatchP2POptions{timeoutOf(timeout_ms)});
    // A backend may answer a batch with one Work (NCCL's group call): every op's handle is it.
    C10D_CHECK(started.size() == num_ops || started.size() == 1, Error, call,
               ": the backend "
               "returned ",
               started.size(), " works for ", num_ops, " operations");
    if (works == nullptr) {
      // Every op must be over before the caller may reuse any buffer, also when one failed.
      std::exception_ptr first;
      for (auto& w : started) {
        try {
          w->wait();
        } catch (...) {
          if (!first) first = std::current_exception();
        }
      }
      if (first) std::rethrow_exception(first);
      return;
    }
    for (size_t i = 0; i < num_ops; ++i) {
      works[i] =
          new c10d_work{started[started.size() == 1 ? 0 : i], pg, stream.active(), stream.stream()};
    }
  });
}

// The former names (deprecated in the header, exported for programs built against them).
c10d_status c10d_allgather_into(c10d_group* group, const c10d_buffer* output,
                                const c10d_buffer* input, const c10d_op_options* options,
                                c10d_work** work) {
  return c10d_allgather_into_tensor(group, output, input, options, work);
}

c10d_status c10d_reduce_scatter_into(c10d_group* group, const c10d_buffer* output,
                                     const c10d_buffer* input, const c10d_op_options* options,
                                     c10d_work** work) {
  return c10d_reduce_scatter_tensor(group, output, input, options, work);
}

c10d_status c10d_recv_any(c10d_group* group, const c10d_buffer* buffer,
                          const c10d_op_options* options, c10d_work** work) {
  return c10d_recv_anysource(group, buffer, options, work);
}

c10d_status c10d_alltoall_single(c10d_group* group, const c10d_buffer* output,
                                 const c10d_buffer* input, const int64_t* output_splits,
                                 const int64_t* input_splits, size_t num_splits,
                                 const c10d_op_options* options, c10d_work** work) {
  return c10d_alltoall_base(group, output, input, output_splits, input_splits, num_splits, options,
                            work);
}

}  // extern "C"
