// The raw Gloo path: each op as a Gloo user would write it, on a Gloo context of its own.

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <chrono>
#include <cstdint>
#include <cstring>

#include "backends/common/Dispatch.hpp"
#include "backends/common/Reduce.hpp"
#include "backends/gloo/GlooSetup.hpp"
#include "benchmarks/comm_bench/CommBench.hpp"
#include "c10d/core/Exception.hpp"
#include "store/PrefixStore.hpp"

// Only the transport-independent headers and tcp/device.h (through GlooSetup.hpp): the other
// gloo/transport/tcp headers of Debian's Gloo snapshot do not compile (they include a
// gloo/common/memory.h it lacks).

namespace commbench {
namespace {

struct RawGloo {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::chrono::milliseconds timeout{0};
  // Every operation gets a fresh tag, as c10d gives its own: ops on one tag must not overlap,
  // and fresh ones rule out one op's late message meeting the next op's receive.
  uint32_t tag = 0;
  // Point-to-point slots: below 2^56, so they never meet the collectives' slots.
  uint64_t p2pSlot = 1;
};

// One Gloo context of its own over the process group's store, under a prefix no c10d group uses.
std::shared_ptr<RawGloo> connect(c10d::ProcessGroup& pg) {
  auto raw = std::make_shared<RawGloo>();
  raw->timeout = pg.timeout();
  auto store = std::make_shared<c10d::PrefixStore>("raw-gloo", pg.store());
  c10d::GlooStore adapter(store, pg.timeout(), pg.rank(), pg.size());
  raw->device = gloo::transport::tcp::CreateDevice(c10d::deviceAttributes(*pg.store(), {}));
  raw->context = std::make_shared<gloo::rendezvous::Context>(pg.rank(), pg.size());
  raw->context->setTimeout(pg.timeout());
  raw->context->connectFullMesh(adapter, raw->device);
  return raw;
}

using GlooReduce = void (*)(void*, const void*, const void*, size_t);

template <typename T>
GlooReduce glooKernel(ReduceOp::Kind kind) {
  switch (kind) {
    case ReduceOp::SUM:
      return static_cast<GlooReduce>(&gloo::sum<T>);
    case ReduceOp::PRODUCT:
      return static_cast<GlooReduce>(&gloo::product<T>);
    case ReduceOp::MIN:
      return static_cast<GlooReduce>(&gloo::min<T>);
    case ReduceOp::MAX:
      return static_cast<GlooReduce>(&gloo::max<T>);
    default:
      return nullptr;
  }
}

struct RawKernel {
  GlooReduce fn = nullptr;  // null: raw Gloo cannot do this reduction (avg, premul_sum)
  bool fromGloo = false;    // false: c10d's element kernel stands in for one Gloo lacks
};

// Gloo's own kernels where it has them (sum, product, min, max on its native types). Gloo has
// no bfloat16, bool or bitwise kernels: there a Gloo user must bring their own, and c10d's is
// the natural one to bring. avg and premul_sum are c10d steps around a sum, not Gloo reductions.
RawKernel rawKernel(const ReduceOp& op, ScalarType dtype) {
  ReduceOp::Kind kind = op.kind();
  if (kind == ReduceOp::AVG || kind == ReduceOp::PREMUL_SUM) return {};
  GlooReduce native = nullptr;
  switch (dtype) {
    case ScalarType::Float32:
      native = glooKernel<float>(kind);
      break;
    case ScalarType::Float64:
      native = glooKernel<double>(kind);
      break;
    case ScalarType::Float16:
      native = glooKernel<gloo::float16>(kind);
      break;
    case ScalarType::Int8:
      native = glooKernel<int8_t>(kind);
      break;
    case ScalarType::Int16:
      native = glooKernel<int16_t>(kind);
      break;
    case ScalarType::Int32:
      native = glooKernel<int32_t>(kind);
      break;
    case ScalarType::Int64:
      native = glooKernel<int64_t>(kind);
      break;
    case ScalarType::UInt8:
      native = glooKernel<uint8_t>(kind);
      break;
    case ScalarType::BFloat16:
    case ScalarType::Bool:
      break;
  }
  if (native != nullptr) return {native, true};
  return {c10d::reduceFunction(op, dtype), false};
}

uint8_t* bytesOf(const Tensor& tensor) {
  return static_cast<uint8_t*>(tensor.data());
}

// The op as a Gloo user would write it: the same calls c10d's Gloo backend makes, minus the
// Tensor/Work/queue layer (and minus per-op allocations where the backend makes them).
Runner rawRunner(const std::shared_ptr<RawGloo>& raw, const Case& c, GlooReduce kernel) {
  std::shared_ptr<gloo::Context> context = raw->context;
  uint8_t* input = bytesOf(c.input);
  uint8_t* output = bytesOf(c.output);
  const size_t element = c10d::elementSize(c.dtype);
  const auto count = static_cast<size_t>(c.shape.count);
  const int root = c.root;
  switch (c.op.op) {
    case Op::Allreduce:
      return [raw, context, input, count, element, kernel] {
        gloo::AllreduceOptions options(context);
        c10d::withWordOfSize(element, [&]<typename W>() {
          options.setOutput<W>(reinterpret_cast<W*>(input), count);
        });
        options.setReduceFunction(kernel);
        options.setTag(raw->tag++);
        gloo::allreduce(options);
      };
    case Op::Allgather:
      return [raw, context, input, output, count, element] {
        gloo::AllgatherOptions options(context);
        options.setInput<uint8_t>(input, count * element);
        options.setOutput<uint8_t>(output, count * element * context->size);
        options.setTag(raw->tag++);
        gloo::allgather(options);
      };
    case Op::ReduceScatter: {
      // Gloo 0.5 has no reduce-scatter over unbound buffers: allreduce the whole input in a
      // scratch copy and keep this rank's block, exactly as c10d's Gloo backend does.
      uint8_t* scratch = static_cast<uint8_t*>(c.scratch);
      const size_t total = count * context->size;
      const size_t offset = static_cast<size_t>(context->rank) * count * element;
      return [raw, context, input, output, scratch, count, total, offset, element, kernel] {
        std::memcpy(scratch, input, total * element);
        gloo::AllreduceOptions options(context);
        c10d::withWordOfSize(element, [&]<typename W>() {
          options.setOutput<W>(reinterpret_cast<W*>(scratch), total);
        });
        options.setReduceFunction(kernel);
        options.setTag(raw->tag++);
        gloo::allreduce(options);
        std::memcpy(output, scratch + offset, count * element);
      };
    }
    case Op::Broadcast:
      return [raw, context, input, count, element, root] {
        gloo::BroadcastOptions options(context);
        options.setOutput<uint8_t>(input, count * element);
        options.setRoot(root);
        options.setTag(raw->tag++);
        gloo::broadcast(options);
      };
    case Op::Reduce:
      return [raw, context, input, count, element, root, kernel] {
        gloo::ReduceOptions options(context);
        c10d::withWordOfSize(element, [&]<typename W>() {
          options.setInput<W>(reinterpret_cast<W*>(input), count);
          options.setOutput<W>(reinterpret_cast<W*>(input), count);
        });
        options.setRoot(root);
        options.setReduceFunction(kernel);
        options.setTag(raw->tag++);
        gloo::reduce(options);
      };
    case Op::Alltoall:
      return [raw, context, input, output, count, element] {
        gloo::AlltoallOptions options(context);
        const size_t bytes = count * element * context->size;
        options.setInput<uint8_t>(input, bytes);
        options.setOutput<uint8_t>(output, bytes);
        options.setTag(raw->tag++);
        gloo::alltoall(options);
      };
    case Op::SendRecv: {
      // Registered once per size and reused: unbound buffers allow it, and it is what a Gloo
      // user moving the same buffers repeatedly would do.
      std::shared_ptr<gloo::transport::UnboundBuffer> send =
          context->createUnboundBuffer(input, count * element);
      std::shared_ptr<gloo::transport::UnboundBuffer> recv =
          context->createUnboundBuffer(output, count * element);
      const int to = (c.rank + 1) % c.ranks;
      const int from = (c.rank - 1 + c.ranks) % c.ranks;
      return [raw, send, recv, to, from] {
        uint64_t slot = raw->p2pSlot++;
        recv->recv(from, slot);
        send->send(to, slot);
        C10D_CHECK(recv->waitRecv(raw->timeout) && send->waitSend(raw->timeout), c10d::BackendError,
                   "raw Gloo sendrecv was aborted");
      };
    }
    case Op::Barrier:
      return [raw, context] {
        gloo::BarrierOptions options(context);
        gloo::barrier(options);
      };
  }
  return {};
}

class RawGlooPath : public RawPath {
 public:
  explicit RawGlooPath(c10d::ProcessGroup& pg) : state_(connect(pg)) {}

  std::string describe() const override {
    return "raw: the same op straight on Gloo (its own context over the same store, no c10d "
           "layer)";
  }

  bool prepareOp(const OpInfo& op, const ReduceOp& redop, ScalarType dtype,
                 std::vector<std::string>& notes) override {
    kernel_ = {};
    const std::string redopName(c10d::name(redop.kind()));
    if (op.reduces) {
      kernel_ = rawKernel(redop, dtype);
      if (kernel_.fn == nullptr) {
        notes.push_back("raw: Gloo has no " + redopName +
                        " (c10d builds it around a sum); no raw rows");
        return false;
      }
      if (!kernel_.fromGloo) {
        notes.push_back("raw: Gloo has no " + redopName + " kernel for " +
                        std::string(c10d::name(dtype)) +
                        "; raw passes Gloo c10d's element-wise kernel");
      }
    }
    if (op.op == Op::ReduceScatter) {
      notes.push_back(
          "raw: Gloo 0.5 has no reduce-scatter; raw allreduces the whole buffer and keeps its "
          "block, as c10d's Gloo backend does (busbw assumes a real reduce-scatter)");
    }
    return true;
  }

  bool needsScratch(Op op) const override { return op == Op::ReduceScatter; }

  Runner runner(const Case& c) override { return rawRunner(state_, c, kernel_.fn); }

 private:
  std::shared_ptr<RawGloo> state_;
  RawKernel kernel_;
};

}  // namespace

std::unique_ptr<RawPath> connectRawGloo(c10d::ProcessGroup& pg) {
  return std::make_unique<RawGlooPath>(pg);
}

}  // namespace commbench
