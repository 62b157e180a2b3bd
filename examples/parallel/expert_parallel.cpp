// Expert parallelism (mixture of experts): one expert per rank, a top-1 router, tokens sent to
// their expert and back with all-to-all-v whose counts change every step and are exchanged
// first. The router is biased so that routing is uneven and the last expert gets no token at all.
// Every rank also computes its tokens densely (every expert's weights on every rank), and the
// example checks the outputs (1e-5 relative) and the counted traffic: one all-to-all of counts
// and two of tokens, of exactly the rows this rank sent.
//
//   c10drun --nproc-per-node 4 expert_parallel

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "examples/ExampleUtils.hpp"
#include "examples/parallel/Dense.hpp"

using examples::Matrix;

namespace {

constexpr int kTokens = 24, kModel = 32;
constexpr double kTolerance = 1e-5;

struct Routed {
  std::vector<int> expert;  // per token
  std::vector<float> gate;  // the chosen expert's softmax probability
};

// Top-1 routing of x's tokens over the gate's columns (one per expert) plus a bias per expert.
Routed route(const Matrix& x, const Matrix& gate, const std::vector<float>& bias) {
  Matrix scores = examples::matmul(x, gate);
  for (int t = 0; t < scores.rows; ++t) {
    for (int e = 0; e < scores.cols; ++e) scores.at(t, e) += bias[e];
  }
  Routed routed;
  for (int t = 0; t < x.rows; ++t) {
    int best = 0;
    float top = scores.at(t, 0), sum = 0;
    for (int e = 1; e < scores.cols; ++e) {
      if (scores.at(t, e) > top) top = scores.at(t, best = e);
    }
    for (int e = 0; e < scores.cols; ++e) sum += std::exp(scores.at(t, e) - top);
    routed.expert.push_back(best);
    routed.gate.push_back(1.0f / sum);
  }
  return routed;
}

Matrix expert(const Matrix& tokens, const Matrix& weight) {
  return examples::relu(examples::matmul(tokens, weight));
}

}  // namespace

int main() {
  return examples::runExample("expert_parallel", [](c10d::ProcessGroup& pg,
                                                    examples::Checker& check) {
    const int ranks = pg.size(), rank = pg.rank();
    const Matrix x =
        examples::randomMatrix(kTokens, kModel, 10 + rank, 1.0f);  // this rank's tokens
    const Matrix gate = examples::randomMatrix(kModel, ranks, 1, 0.5f);
    std::vector<float> bias(ranks, 0.0f);
    bias[0] = 1.0f;           // expert 0 gets more than its share
    bias[ranks - 1] = -1e4f;  // the last expert gets nothing: its score is far below the rest
    std::vector<Matrix> weights;
    for (int e = 0; e < ranks; ++e)
      weights.push_back(examples::randomMatrix(kModel, kModel, 20 + e, 0.3f));

    const Routed routed = route(x, gate, bias);
    // Tokens in expert order, and how many go to each.
    std::vector<int> order(kTokens);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return routed.expert[a] < routed.expert[b]; });
    Matrix outgoing(kTokens, kModel);
    for (int i = 0; i < kTokens; ++i) {
      std::copy_n(x.v.begin() + order[i] * kModel, kModel, outgoing.v.begin() + i * kModel);
    }
    auto sendCounts = c10d::Tensor::zeros({ranks}, c10d::ScalarType::Int64);
    for (int e : routed.expert) sendCounts.data<int64_t>()[e] += 1;

    pg.resetTraffic();
    // The counts first: how many rows each rank will get from each other one.
    auto receiveCounts = c10d::Tensor::zeros({ranks}, c10d::ScalarType::Int64);
    pg.alltoallBase(receiveCounts, sendCounts)->wait();
    std::vector<int64_t> sent(sendCounts.data<int64_t>(), sendCounts.data<int64_t>() + ranks);
    std::vector<int64_t> got(receiveCounts.data<int64_t>(), receiveCounts.data<int64_t>() + ranks);
    const int64_t arriving = std::accumulate(got.begin(), got.end(), int64_t{0});

    Matrix incoming(static_cast<int>(arriving), kModel);
    pg.alltoallBase(incoming.tensor(), outgoing.tensor(), got, sent)->wait();  // dispatch
    Matrix processed = arriving > 0 ? expert(incoming, weights[rank]) : Matrix(0, kModel);
    Matrix returned(kTokens, kModel);
    pg.alltoallBase(returned.tensor(), processed.tensor(), sent, got)->wait();  // combine

    Matrix output(kTokens, kModel);
    for (int i = 0; i < kTokens; ++i) {
      for (int d = 0; d < kModel; ++d) {
        output.at(order[i], d) = routed.gate[order[i]] * returned.at(i, d);
      }
    }
    // Densely: each token through its expert, with every expert's weights here.
    Matrix dense(kTokens, kModel);
    for (int t = 0; t < kTokens; ++t) {
      Matrix row = expert(examples::rowsOf(x, t, 1), weights[routed.expert[t]]);
      for (int d = 0; d < kModel; ++d) dense.at(t, d) = routed.gate[t] * row.at(0, d);
    }
    const double diff = examples::relativeDifference(output, dense);
    check.expect(diff <= kTolerance, "the experts' output differs from the dense one by ", diff);
    if (rank == ranks - 1) check.expect(arriving == 0, "the last expert got ", arriving, " tokens");

    uint64_t countBytes = 0, tokenBytes = 0, calls = 0;
    for (const c10d::OpTraffic& t : pg.traffic()) {
      check.expect(t.op == "alltoall_base", "expert parallelism ran a ", t.op);
      calls += t.calls;
      tokenBytes += t.bytes;
    }
    countBytes = ranks * sizeof(int64_t);
    tokenBytes -= countBytes;
    const uint64_t theory = (kTokens + arriving) * kModel * sizeof(float);
    check.expect(calls == 3 && tokenBytes == theory, "counted ", calls, " all-to-alls and ",
                 tokenBytes, " token bytes; the theory is 3 and ", theory);

    auto all = c10d::Tensor::zeros({ranks}, c10d::ScalarType::Int64);
    all.data<int64_t>()[rank] = arriving;
    pg.allreduce(all)->wait();
    if (rank == 0) {
      std::string loads;
      for (int e = 0; e < ranks; ++e)
        loads += (e ? " " : "") + std::to_string(all.data<int64_t>()[e]);
      std::printf(
          "expert_parallel: %d experts, %d tokens per rank, tokens per expert [%s]; outputs "
          "within %.1e of the dense computation (worst here %.1e); per rank: 3 all-to-alls "
          "(counts, dispatch, combine), token bytes = (sent + received rows) x %d floats\n",
          ranks, kTokens, loads.c_str(), kTolerance, diff, kModel);
    }
  });
}
