// Sequence parallelism (Megatron-LM's, beside tensor parallelism): the MLP block of
// tensor_parallel, with the activations outside the block sharded along the sequence. A rank
// holds tokens [rank * n/N, (rank + 1) * n/N): it all-gathers the sequence before the
// column-parallel layer and reduce-scatters the row-parallel layer's partial sums back into
// sequence shards, in forward, and the same with the gradients in backward. Checked against the
// unsplit block (1e-5 relative): output and input-gradient shards, weight-share gradients; and
// the traffic: one all-gather and one reduce-scatter of the whole sequence per direction, the
// bytes of tensor parallelism's two allreduces while each rank holds 1/N of the activations.
//
//   c10drun --nproc-per-node 4 sequence_parallel

#include <cstdio>

#include "examples/ExampleUtils.hpp"
#include "examples/parallel/Blocks.hpp"

using examples::Matrix;

namespace {

constexpr int kTokens = 32, kModel = 64, kHidden = 256;
constexpr double kTolerance = 1e-5;

}  // namespace

int main() {
  return examples::runExample("sequence_parallel", [](c10d::ProcessGroup& pg,
                                                      examples::Checker& check) {
    const int ranks = pg.size(), rank = pg.rank();
    check.expect(kHidden % ranks == 0 && kTokens % ranks == 0, "the shapes must divide by ", ranks,
                 " ranks");
    const Matrix x = examples::randomMatrix(kTokens, kModel, 1, 1.0f);
    const Matrix outputGrad = examples::randomMatrix(kTokens, kModel, 2, 1.0f);
    const Matrix a = examples::randomMatrix(kModel, kHidden, 3, 0.2f);
    const Matrix b = examples::randomMatrix(kHidden, kModel, 4, 0.2f);
    const int share = kHidden / ranks, tokens = kTokens / ranks;

    // What this rank holds outside the block: its tokens of the input and of the output's gradient.
    Matrix xShard = examples::rowsOf(x, rank * tokens, tokens);
    Matrix gradShard = examples::rowsOf(outputGrad, rank * tokens, tokens);

    pg.resetTraffic();
    Matrix xWhole(kTokens, kModel), gradWhole(kTokens, kModel);
    pg.allgatherIntoTensor(xWhole.tensor(), xShard.tensor())->wait();        // forward, in
    pg.allgatherIntoTensor(gradWhole.tensor(), gradShard.tensor())->wait();  // backward, in
    examples::MlpPass mine = examples::mlpPass(xWhole, examples::colsOf(a, rank * share, share),
                                               examples::rowsOf(b, rank * share, share), gradWhole);
    Matrix outShard(tokens, kModel), inputGradShard(tokens, kModel);
    pg.reduceScatterTensor(outShard.tensor(), mine.output.tensor())->wait();  // forward, out
    pg.reduceScatterTensor(inputGradShard.tensor(), mine.inputGrad.tensor())
        ->wait();  // backward, out

    const examples::MlpPass whole = examples::mlpPass(x, a, b, outputGrad);
    double worst = 0;
    auto within = [&](const Matrix& got, const Matrix& want, const char* what) {
      const double diff = examples::relativeDifference(got, want);
      check.expect(diff <= kTolerance, what, " differs from the unsplit block's by ", diff);
      worst = std::max(worst, diff);
    };
    within(outShard, examples::rowsOf(whole.output, rank * tokens, tokens), "output shard");
    within(inputGradShard, examples::rowsOf(whole.inputGrad, rank * tokens, tokens),
           "input-gradient shard");
    within(mine.gradA, examples::colsOf(whole.gradA, rank * share, share),
           "gradient of A's columns");
    within(mine.gradB, examples::rowsOf(whole.gradB, rank * share, share), "gradient of B's rows");

    const uint64_t sequenceBytes = kTokens * kModel * sizeof(float);
    uint64_t gathered = 0, scattered = 0, other = 0;
    for (const c10d::OpTraffic& t : pg.traffic()) {
      (t.op == "allgather_into_tensor"   ? gathered
       : t.op == "reduce_scatter_tensor" ? scattered
                                         : other) += t.bytes;
    }
    check.expect(gathered == 2 * sequenceBytes && scattered == 2 * sequenceBytes && other == 0,
                 "counted ", gathered, " bytes gathered and ", scattered, " scattered (", other,
                 " other); the theory is 2 x ", sequenceBytes, " each");
    if (rank == 0) {
      std::printf(
          "sequence_parallel: %d ranks, %d tokens (%d per rank); output and gradient "
          "shards within %.1e of the unsplit block (worst %.1e); traffic per rank: "
          "all-gather %llu + reduce-scatter %llu bytes (theory 2 x %llu each), activations "
          "held outside the block: %d of %d tokens\n",
          ranks, kTokens, tokens, kTolerance, worst, static_cast<unsigned long long>(gathered),
          static_cast<unsigned long long>(scattered),
          static_cast<unsigned long long>(sequenceBytes), tokens, kTokens);
    }
  });
}
