#include "benchmarks/comm_bench/Ops.hpp"

#include <cstdlib>
#include <memory>
#include <utility>

#include "c10d/Work.hpp"
#include "c10d/core/Cuda.hpp"

namespace commbench {

const OpInfo& info(Op op) {
  for (const OpInfo& entry : kOps) {
    if (entry.op == op) return entry;
  }
  std::abort();  // every Op is in kOps
}

double busFactor(Op op, int ranks) {
  double n = ranks;
  switch (op) {
    case Op::Allreduce:
      return 2.0 * (n - 1) / n;
    case Op::Allgather:
    case Op::ReduceScatter:
    case Op::Alltoall:
      return (n - 1) / n;
    case Op::Broadcast:
    case Op::Reduce:
    case Op::SendRecv:
      return 1.0;
    case Op::Barrier:
      return 0.0;
  }
  return 1.0;
}

Shape shapeFor(Op op, int64_t bytes, int ranks, size_t elementSize) {
  auto element = static_cast<int64_t>(elementSize);
  Shape shape;
  switch (op) {
    case Op::Allreduce:
    case Op::Broadcast:
    case Op::Reduce:
      shape.count = bytes / element;
      shape.inputCount = shape.count;
      shape.bytes = shape.count * element;
      break;
    case Op::SendRecv:
      shape.count = bytes / element;
      shape.inputCount = shape.outputCount = shape.count;
      shape.bytes = shape.count * element;
      break;
    case Op::Allgather:
      shape.count = bytes / (element * ranks);
      shape.inputCount = shape.count;
      shape.outputCount = shape.count * ranks;
      shape.bytes = shape.outputCount * element;
      break;
    case Op::ReduceScatter:
      shape.count = bytes / (element * ranks);
      shape.inputCount = shape.count * ranks;
      shape.outputCount = shape.count;
      shape.bytes = shape.inputCount * element;
      break;
    case Op::Alltoall:
      shape.count = bytes / (element * ranks);
      shape.inputCount = shape.outputCount = shape.count * ranks;
      shape.bytes = shape.inputCount * element;
      break;
    case Op::Barrier:
      shape.count = 1;  // a row to time; no buffer is touched
      shape.inputCount = 1;
      shape.bytes = 0;
      break;
  }
  return shape;
}

Runner c10dRunner(c10d::ProcessGroup& pg, const Case& c) {
  Tensor input = c.input;
  Tensor output = c.output;
  ReduceOp redop = c.redop;
  int root = c.root;
  std::chrono::milliseconds t = c.timeout;
  switch (c.op.op) {
    case Op::Allreduce:
      return [&pg, input, redop, t] {
        pg.allreduce(input, {.reduceOp = redop, .timeout = t})->wait();
      };
    case Op::Allgather:
      return [&pg, input, output, t] {
        pg.allgatherIntoTensor(output, input, {.timeout = t})->wait();
      };
    case Op::ReduceScatter:
      return [&pg, input, output, redop, t] {
        pg.reduceScatterTensor(output, input, {.reduceOp = redop, .timeout = t})->wait();
      };
    case Op::Broadcast:
      return
          [&pg, input, root, t] { pg.broadcast(input, {.rootRank = root, .timeout = t})->wait(); };
    case Op::Reduce:
      return [&pg, input, redop, root, t] {
        pg.reduce(input, {.reduceOp = redop, .rootRank = root, .timeout = t})->wait();
      };
    case Op::Alltoall:
      return [&pg, input, output, t] {
        pg.alltoallBase(output, input, {}, {}, {.timeout = t})->wait();
      };
    case Op::SendRecv: {
      // Both posted before either is waited for, as nccl-tests groups its send and recv; the
      // receive first, in the same order as the raw path, so Gloo's rendezvous is the same.
      int to = (c.rank + 1) % c.ranks;
      int from = (c.rank - 1 + c.ranks) % c.ranks;
      return [&pg, input, output, to, from, t] {
        std::shared_ptr<c10d::Work> recv = pg.recv(output, from, 0, t);
        std::shared_ptr<c10d::Work> send = pg.send(input, to, 0, t);
        recv->wait();
        send->wait();
      };
    }
    case Op::Barrier:
      return [&pg, t] { pg.barrier({.timeout = t})->wait(); };
  }
  return {};
}

Runner onDevice(Runner run, const c10d::Device& device) {
  if (device.isCPU()) return run;
  return [run = std::move(run), device] {
    run();
    c10d::synchronizeCurrentStream(device);
  };
}

}  // namespace commbench
