// alltoall (lists), and alltoall_base: equal splits over gloo::alltoall, uneven ones (AlltoAllV)
// over gloo::alltoallv.

#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>

#include <cstring>

#include "backends/gloo/GlooRuntime.hpp"

namespace c10d::inline v0 {
namespace {

void alltoallEqual(GlooBackend::Runtime& runtime, uint8_t* input, uint8_t* output, size_t bytes,
                   uint32_t tag, std::chrono::milliseconds timeout) {
  if (runtime.size == 1 || bytes == 0) {
    copyBytes(output, input, bytes);
    return;
  }
  if (SyncMesh* fast = runtime.fastPath(timeout, bytes)) {
    fast->alltoall(input, output, bytes / runtime.size);
    return;
  }
  gloo::AlltoallOptions options(runtime.context);
  options.setInput<uint8_t>(input, bytes);
  options.setOutput<uint8_t>(output, bytes);
  options.setTag(tag);
  options.setTimeout(timeout);
  runtime.agree(tag, timeout);
  gloo::alltoall(options);
}

}  // namespace

std::shared_ptr<Work> GlooBackend::alltoall(const std::vector<Tensor>& outputs,
                                            const std::vector<Tensor>& inputs,
                                            const AllToAllOptions& options) {
  checkCPU(inputs[0], "alltoall");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      // Counts may differ between ranks (lists of any sizes): the bytes each pair exchanges are
      // agreed before Gloo's alltoallv instead.
      WireCall::of("alltoall", inputs[0].dtype(), 0),
      [=] { return detail::concat(inputs.size(), " x ", inputs[0].describe()); }, options.timeout,
      outputs,
      [runtime, outputs, inputs, options](uint32_t tag) {
        // Lists may differ in size per peer: pack them and go through alltoallv.
        std::vector<int64_t> sendBytes, recvBytes;
        std::vector<uint8_t> in, out;
        for (const Tensor& t : inputs) {
          sendBytes.push_back(static_cast<int64_t>(t.nbytes()));
          in.insert(in.end(), bytesOf(t), bytesOf(t) + t.nbytes());
        }
        size_t total = 0;
        for (const Tensor& t : outputs) {
          recvBytes.push_back(static_cast<int64_t>(t.nbytes()));
          total += t.nbytes();
        }
        out.resize(total);
        if (runtime->size == 1) {
          out = in;
        } else {
          // Gloo's unbound buffers need memory even when every count is zero.
          uint8_t dummyIn = 0, dummyOut = 0;
          gloo::AlltoallvOptions gloo(runtime->context);
          gloo.setInput<uint8_t>(in.empty() ? &dummyIn : in.data(), sendBytes);
          gloo.setOutput<uint8_t>(out.empty() ? &dummyOut : out.data(), recvBytes);
          gloo.setTag(tag);
          gloo.setTimeout(options.timeout);
          runtime->agree(tag, options.timeout, &sendBytes, &recvBytes);
          gloo::alltoallv(gloo);
        }
        size_t offset = 0;
        for (const Tensor& t : outputs) {
          copyBytes(t.data(), out.data() + offset, t.nbytes());
          offset += t.nbytes();
        }
      });
}

std::shared_ptr<Work> GlooBackend::alltoallBase(const Tensor& output, const Tensor& input,
                                                const std::vector<int64_t>& outputSplitSizes,
                                                const std::vector<int64_t>& inputSplitSizes,
                                                const AllToAllOptions& options) {
  checkCPU(input, "alltoall_base");
  std::shared_ptr<Runtime> runtime = runtime_;
  bool equal = outputSplitSizes.empty() && inputSplitSizes.empty();
  return enqueue(
      WireCall::of("alltoall_base", input.dtype(), equal ? input.numel() : 0),
      [=] {
        return detail::concat(input.describe(), " -> ", output.describe(),
                              equal ? "" : " (uneven splits)");
      },
      options.timeout, {output},
      [runtime, output, input, outputSplitSizes, inputSplitSizes, options](uint32_t tag) {
        if (outputSplitSizes.empty() && inputSplitSizes.empty()) {
          alltoallEqual(*runtime, bytesOf(input), bytesOf(output), input.nbytes(), tag,
                        options.timeout);
          return;
        }
        // Splits are rows of dim 0; Gloo wants bytes per rank.
        auto bytesPerRank = [&](const std::vector<int64_t>& splits, const Tensor& t) {
          int64_t rows = t.dim() == 0 ? 1 : t.sizes()[0];
          int64_t rowBytes = rows == 0 ? 0 : static_cast<int64_t>(t.nbytes()) / rows;
          std::vector<int64_t> bytes(runtime->size,
                                     static_cast<int64_t>(t.nbytes()) / runtime->size);
          if (!splits.empty()) {
            for (int r = 0; r < runtime->size; ++r) bytes[r] = splits[r] * rowBytes;
          }
          return bytes;
        };
        std::vector<int64_t> sendBytes = bytesPerRank(inputSplitSizes, input);
        std::vector<int64_t> recvBytes = bytesPerRank(outputSplitSizes, output);
        if (runtime->size == 1) {
          copyBytes(output.data(), input.data(), static_cast<size_t>(sendBytes[0]));
          return;
        }
        // Gloo's unbound buffers need memory even when every count is zero.
        uint8_t dummyIn = 0, dummyOut = 0;
        gloo::AlltoallvOptions gloo(runtime->context);
        gloo.setInput<uint8_t>(input.nbytes() ? bytesOf(input) : &dummyIn, sendBytes);
        gloo.setOutput<uint8_t>(output.nbytes() ? bytesOf(output) : &dummyOut, recvBytes);
        gloo.setTag(tag);
        gloo.setTimeout(options.timeout);
        runtime->agree(tag, options.timeout, &sendBytes, &recvBytes);
        gloo::alltoallv(gloo);
      });
}

}  // namespace c10d::inline v0
