// Tensor parallelism (Megatron-LM): an MLP block split column-then-row (the first weight by
// columns, the second by rows) and a self-attention block split by heads, one share per rank.
// Each rank computes its share's output and input gradient; one allreduce sums the outputs in
// forward and one the input gradients in backward. Every rank also computes the unsplit blocks,
// and the example checks outputs, input gradients and each weight share's gradient against them
// (1e-5 relative), and that the group moved exactly those four allreduces.
//
//   c10drun --nproc-per-node 4 tensor_parallel     (2 and 4 ranks divide the shapes)

#include <cstdio>

#include "examples/ExampleUtils.hpp"
#include "examples/parallel/Blocks.hpp"

using examples::Matrix;

namespace {

constexpr int kTokens = 32, kModel = 64, kHidden = 256, kHeadDim = 8;
constexpr double kTolerance = 1e-5;

// Sums a share's matrix over the ranks, in place.
void sumOverRanks(c10d::ProcessGroup& pg, Matrix& m) {
  pg.allreduce(m.tensor())->wait();
}

}  // namespace

int main() {
  return examples::runExample("tensor_parallel", [](c10d::ProcessGroup& pg,
                                                    examples::Checker& check) {
    const int ranks = pg.size(), rank = pg.rank();
    check.expect(kHidden % ranks == 0 && (kModel / kHeadDim) % ranks == 0, "the shapes (hidden ",
                 kHidden, ", ", kModel / kHeadDim, " heads) must divide by ", ranks, " ranks");
    const Matrix x = examples::randomMatrix(kTokens, kModel, 1, 1.0f);
    const Matrix outputGrad = examples::randomMatrix(kTokens, kModel, 2, 1.0f);
    auto within = [&](const Matrix& got, const Matrix& want, const char* what) {
      const double diff = examples::relativeDifference(got, want);
      check.expect(diff <= kTolerance, what, " differs from the unsplit block's by ", diff);
      return diff;
    };

    // MLP: A's columns and B's rows [rank * share, (rank + 1) * share).
    const Matrix a = examples::randomMatrix(kModel, kHidden, 3, 0.2f);
    const Matrix b = examples::randomMatrix(kHidden, kModel, 4, 0.2f);
    const int share = kHidden / ranks;
    examples::MlpPass mine =
        examples::mlpPass(x, examples::colsOf(a, rank * share, share),
                          examples::rowsOf(b, rank * share, share), outputGrad);
    pg.resetTraffic();
    sumOverRanks(pg, mine.output);     // forward: the row-parallel layer's partial sums
    sumOverRanks(pg, mine.inputGrad);  // backward: the column-parallel layer's partial sums
    const examples::MlpPass whole = examples::mlpPass(x, a, b, outputGrad);
    double worst = within(mine.output, whole.output, "MLP output");
    worst = std::max(worst, within(mine.inputGrad, whole.inputGrad, "MLP input gradient"));
    worst = std::max(worst, within(mine.gradA, examples::colsOf(whole.gradA, rank * share, share),
                                   "MLP gradient of A's columns"));
    worst = std::max(worst, within(mine.gradB, examples::rowsOf(whole.gradB, rank * share, share),
                                   "MLP gradient of B's rows"));

    // Attention: the heads [rank * heads, (rank + 1) * heads): their projection columns and
    // their rows of the output projection.
    const Matrix wq = examples::randomMatrix(kModel, kModel, 5, 0.3f);
    const Matrix wk = examples::randomMatrix(kModel, kModel, 6, 0.3f);
    const Matrix wv = examples::randomMatrix(kModel, kModel, 7, 0.3f);
    const Matrix wo = examples::randomMatrix(kModel, kModel, 8, 0.3f);
    const int cols = kModel / ranks;
    auto mineOf = [&](const Matrix& w) { return examples::colsOf(w, rank * cols, cols); };
    examples::AttentionPass heads =
        examples::attentionPass(x, mineOf(wq), mineOf(wk), mineOf(wv),
                                examples::rowsOf(wo, rank * cols, cols), kHeadDim, outputGrad);
    sumOverRanks(pg, heads.output);
    sumOverRanks(pg, heads.inputGrad);
    const examples::AttentionPass all =
        examples::attentionPass(x, wq, wk, wv, wo, kHeadDim, outputGrad);
    worst = std::max(worst, within(heads.output, all.output, "attention output"));
    worst = std::max(worst, within(heads.inputGrad, all.inputGrad, "attention input gradient"));
    worst = std::max(worst, within(heads.gradQ, mineOf(all.gradQ), "gradient of Wq's heads"));
    worst = std::max(worst, within(heads.gradK, mineOf(all.gradK), "gradient of Wk's heads"));
    worst = std::max(worst, within(heads.gradV, mineOf(all.gradV), "gradient of Wv's heads"));
    worst = std::max(worst, within(heads.gradO, examples::rowsOf(all.gradO, rank * cols, cols),
                                   "gradient of Wo's rows"));

    // Two allreduces per block of tokens x model floats: that is all tensor parallelism moves.
    const uint64_t perCall = kTokens * kModel * sizeof(float);
    uint64_t calls = 0, bytes = 0;
    for (const c10d::OpTraffic& t : pg.traffic()) {
      check.expect(t.op == "allreduce", "tensor parallelism ran a ", t.op);
      calls += t.calls;
      bytes += t.bytes;
    }
    check.expect(calls == 4 && bytes == 4 * perCall, "counted ", calls, " calls of ", bytes,
                 " bytes; the theory is 4 allreduces of ", perCall, " bytes");
    if (rank == 0) {
      std::printf(
          "tensor_parallel: %d ranks; MLP (%dx%d, %dx%d) split column/row and attention "
          "(%d heads) split by heads; outputs and gradients within %.1e of the unsplit "
          "blocks (worst %.1e); traffic per rank: %llu allreduces, %llu bytes "
          "(theory 4 x %llu)\n",
          ranks, kModel, kHidden, kHidden, kModel, kModel / kHeadDim, kTolerance, worst,
          static_cast<unsigned long long>(calls), static_cast<unsigned long long>(bytes),
          static_cast<unsigned long long>(perCall));
    }
  });
}
