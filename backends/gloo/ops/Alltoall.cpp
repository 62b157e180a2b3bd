// alltoall (lists), and alltoall_base: equal splits on the mesh (pairwise exchange) or over
// gloo::alltoall, uneven ones (AlltoAllV) over gloo::alltoallv.

#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>

#include <cstring>

#include "backends/gloo/ops/Collectives.hpp"

namespace c10d::inline v1::gloo_ops {
namespace {

void alltoallEqual(Runtime& runtime, const Op& op, uint8_t* input, uint8_t* output, size_t bytes) {
  if (runtime.size == 1 || bytes == 0) {
    copyBytes(output, input, bytes);
    return;
  }
  if (MeshAlgorithms* fast = runtime.fastPath(bytes)) {
    fast->alltoall(input, output, bytes / runtime.size);
    return;
  }
  const auto tag = static_cast<uint32_t>(op.seq);
  gloo::AlltoallOptions options(runtime.context());
  options.setInput<uint8_t>(input, bytes);
  options.setOutput<uint8_t>(output, bytes);
  options.setTag(tag);
  options.setTimeout(op.timeout);
  runtime.agree(tag, op.timeout);
  gloo::alltoall(options);
}

// Gloo's alltoallv with the bytes this rank sends to and expects from each rank, agreed first.
void alltoallv(Runtime& runtime, const Op& op, uint8_t* input, std::vector<int64_t>& sendBytes,
               uint8_t* output, std::vector<int64_t>& recvBytes) {
  // Gloo's unbound buffers need memory even when every count is zero.
  uint8_t dummyIn = 0, dummyOut = 0;
  const auto tag = static_cast<uint32_t>(op.seq);
  gloo::AlltoallvOptions gloo(runtime.context());
  gloo.setInput<uint8_t>(input != nullptr ? input : &dummyIn, sendBytes);
  gloo.setOutput<uint8_t>(output != nullptr ? output : &dummyOut, recvBytes);
  gloo.setTag(tag);
  gloo.setTimeout(op.timeout);
  runtime.agree(tag, op.timeout, &sendBytes, &recvBytes);
  gloo::alltoallv(gloo);
}

}  // namespace

void alltoall(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const std::vector<Tensor>& inputs = *tensors.inputs;
  const std::vector<Tensor>& outputs = *tensors.outputs;
  // Lists may differ in size per peer: pack them and go through alltoallv. Counts may differ
  // between ranks, so the bytes each pair exchanges are agreed before it instead of on the wire.
  std::vector<int64_t> sendBytes, recvBytes;
  size_t in = 0, out = 0;
  for (const Tensor& t : inputs) {
    sendBytes.push_back(static_cast<int64_t>(t.nbytes()));
    in += t.nbytes();
  }
  for (const Tensor& t : outputs) {
    recvBytes.push_back(static_cast<int64_t>(t.nbytes()));
    out += t.nbytes();
  }
  uint8_t* packed = runtime.scratch(in + out);
  size_t offset = 0;
  for (const Tensor& t : inputs) {
    copyBytes(packed + offset, t.data(), t.nbytes());
    offset += t.nbytes();
  }
  uint8_t* received = packed + in;
  if (runtime.size == 1) {
    copyBytes(received, packed, in);
  } else {
    alltoallv(runtime, op, in ? packed : nullptr, sendBytes, out ? received : nullptr, recvBytes);
  }
  offset = 0;
  for (const Tensor& t : outputs) {
    copyBytes(t.data(), received + offset, t.nbytes());
    offset += t.nbytes();
  }
}

void alltoallBase(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const Tensor& input = *tensors.input;
  const Tensor& output = *tensors.output;
  const std::vector<int64_t>& inputSplits = *tensors.inputSplits;
  const std::vector<int64_t>& outputSplits = *tensors.outputSplits;
  if (outputSplits.empty() && inputSplits.empty()) {
    alltoallEqual(runtime, op, bytesOf(input), bytesOf(output), input.nbytes());
    return;
  }
  // Splits are rows of dim 0; Gloo wants bytes per rank.
  auto bytesPerRank = [&](const std::vector<int64_t>& splits, const Tensor& t) {
    const int64_t rows = t.dim() == 0 ? 1 : t.sizes()[0];
    const int64_t rowBytes = rows == 0 ? 0 : static_cast<int64_t>(t.nbytes()) / rows;
    std::vector<int64_t> bytes(runtime.size, static_cast<int64_t>(t.nbytes()) / runtime.size);
    if (!splits.empty()) {
      for (int r = 0; r < runtime.size; ++r) bytes[r] = splits[r] * rowBytes;
    }
    return bytes;
  };
  std::vector<int64_t> sendBytes = bytesPerRank(inputSplits, input);
  std::vector<int64_t> recvBytes = bytesPerRank(outputSplits, output);
  if (runtime.size == 1) {
    copyBytes(output.data(), input.data(), static_cast<size_t>(sendBytes[0]));
    return;
  }
  alltoallv(runtime, op, input.nbytes() ? bytesOf(input) : nullptr, sendBytes,
            output.nbytes() ? bytesOf(output) : nullptr, recvBytes);
}

}  // namespace c10d::inline v1::gloo_ops
