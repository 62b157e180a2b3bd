#include "c10d/parallel/Pipeline.hpp"

#include <algorithm>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {
namespace {

using Clock = std::chrono::steady_clock;

// A transfer's header: dtype, rank, then up to kMaxDims sizes.
constexpr int kMaxDims = 8;
constexpr int64_t kHeaderSlots = 2 + kMaxDims;

// Tags keep forward activations and backward gradients of every micro-batch apart.
int forwardTag(int micro) {
  return 2 * micro;
}
int backwardTag(int micro) {
  return 2 * micro + 1;
}

}  // namespace

PipelineRunner::PipelineRunner(ProcessGroup& group, PipelineStage stage, PipelineOptions options)
    : group_(group), stage_(std::move(stage)), options_(options) {
  C10D_CHECK(options_.microBatches >= 1, InvalidArgument, "PipelineRunner: microBatches is ",
             options_.microBatches, "; it must be at least 1");
  C10D_CHECK(stage_.forward && stage_.backward, InvalidArgument, "PipelineRunner: stage ",
             group_.rank(), " needs both forward and backward");
}

double PipelineRunner::theoreticalBubble(int stages, int microBatches) {
  return static_cast<double>(stages - 1) / (microBatches + stages - 1);
}

std::vector<std::pair<int, bool>> PipelineRunner::order(PipelineSchedule schedule, int stage,
                                                        int stages, int microBatches) {
  std::vector<std::pair<int, bool>> passes;
  if (schedule == PipelineSchedule::GPipe) {
    for (int m = 0; m < microBatches; ++m) passes.emplace_back(m, true);
    for (int m = 0; m < microBatches; ++m) passes.emplace_back(m, false);
    return passes;
  }
  // 1F1B: the later a stage, the fewer forwards it runs ahead before its first backward.
  const int warmup = std::min(stages - stage - 1, microBatches);
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) passes.emplace_back(forward, true);
  while (forward < microBatches) {
    passes.emplace_back(forward++, true);
    passes.emplace_back(backward++, false);
  }
  while (backward < microBatches) passes.emplace_back(backward++, false);
  return passes;
}

void PipelineRunner::send(const Tensor& tensor, int peer, int tag,
                          std::vector<std::shared_ptr<Work>>& pending) {
  C10D_CHECK(tensor.defined() && tensor.isContiguous(), InvalidArgument, "PipelineRunner: stage ",
             group_.rank(), " must hand on a defined, contiguous tensor (tag ", tag, ")");
  C10D_CHECK(tensor.dim() <= kMaxDims, InvalidArgument, "PipelineRunner: stage ", group_.rank(),
             " hands on a tensor of ", tensor.dim(), " dimensions; at most ", kMaxDims);
  Tensor header = Tensor::zeros({kHeaderSlots}, ScalarType::Int64);
  int64_t* slots = header.data<int64_t>();
  slots[0] = static_cast<int64_t>(tensor.dtype());
  slots[1] = tensor.dim();
  std::copy(tensor.sizes().begin(), tensor.sizes().end(), slots + 2);
  // Sent asynchronously, header and data as one batch: the receiver may still be busy with an
  // earlier micro-batch, and a blocking send there would stall this stage's next pass.
  std::vector<P2POp> batch{{P2POp::Send, header, peer, tag}};
  if (tensor.numel() > 0) batch.push_back({P2POp::Send, tensor, peer, tag});
  for (auto& work : group_.batchIsendIrecv(batch, BatchP2POptions{options_.timeout})) {
    pending.push_back(std::move(work));
  }
}

Tensor PipelineRunner::receive(int peer, int tag) {
  Tensor header = Tensor::empty({kHeaderSlots}, ScalarType::Int64);
  group_.recv(header, peer, RecvOptions{tag, options_.timeout})->wait();
  const int64_t* slots = header.data<int64_t>();
  C10D_CHECK(slots[0] >= 0 && slots[0] < static_cast<int64_t>(kAllScalarTypes.size()) &&
                 slots[1] >= 0 && slots[1] <= kMaxDims,
             BackendError, "PipelineRunner: stage ", group_.rank(), " got a malformed header from ",
             peer, " (tag ", tag, ")");
  std::vector<int64_t> sizes(slots + 2, slots + 2 + slots[1]);
  Tensor tensor = Tensor::empty(sizes, static_cast<ScalarType>(slots[0]));
  if (tensor.numel() > 0) group_.recv(tensor, peer, RecvOptions{tag, options_.timeout})->wait();
  return tensor;
}

PipelineStepStats PipelineRunner::step(const std::function<Tensor(int micro)>& input) {
  const int stage = group_.rank(), stages = group_.size();
  const bool first = stage == 0, last = stage == stages - 1;
  C10D_CHECK(!first || input, InvalidArgument,
             "PipelineRunner::step: the first stage needs the micro-batches' input");
  PipelineStepStats stats;
  std::vector<std::shared_ptr<Work>> pending;
  const auto start = Clock::now();
  auto timed = [&](auto&& pass) {
    const auto begin = Clock::now();
    Tensor result = pass();
    stats.compute += Clock::now() - begin;
    return result;
  };
  // Not a structured binding: lambdas below capture micro, which clang 14 (the fuzz build)
  // refuses for bindings.
  for (const auto& pass : order(options_.schedule, stage, stages, options_.microBatches)) {
    const int micro = pass.first;
    const bool forward = pass.second;
    if (forward) {
      Tensor in = first ? input(micro) : receive(stage - 1, forwardTag(micro));
      Tensor out = timed([&] { return stage_.forward(micro, in); });
      if (last) {
        stats.outputs.push_back(out);
      } else {
        send(out, stage + 1, forwardTag(micro), pending);
      }
    } else {
      Tensor grad = last ? Tensor() : receive(stage + 1, backwardTag(micro));
      Tensor inputGrad = timed([&] { return stage_.backward(micro, grad); });
      if (!first) send(inputGrad, stage - 1, backwardTag(micro), pending);
    }
    // Sends the peer has taken release their tensors now (1F1B holds only what is in flight);
    // wait() rethrows a send's error at once.
    std::erase_if(pending, [](const std::shared_ptr<Work>& work) {
      if (!work->isCompleted()) return false;
      work->wait();
      return true;
    });
  }
  for (auto& work : pending) work->wait();
  stats.total = Clock::now() - start;
  return stats;
}

void PipelineRunner::addToState(checkpoint::State& state, const std::string& prefix) const {
  for (const auto& [name, tensor] : stage_.parameters) state.add(prefix + name, tensor);
}

}  // namespace c10d::inline v1
