// The transformer blocks the tensor- and sequence-parallel examples split, written once for any
// share of the block: a rank's share (columns of the first weights, rows of the last, a subset of
// heads) gives a partial output and partial input gradient that sum, over the ranks, to the whole
// block's; the whole block is the same function with every column, row and head.
#pragma once

#include <cmath>

#include "examples/parallel/Dense.hpp"

namespace examples {

// One forward and backward of a share of an MLP block Y = relu(X A) B, for the gradient dY of Y.
struct MlpPass {
  Matrix output;     // X A B over this share: the ranks' outputs sum to Y
  Matrix inputGrad;  // this share's part of dX: the ranks' parts sum to dX
  Matrix gradA;      // gradients of this share's weights
  Matrix gradB;
};

inline MlpPass mlpPass(const Matrix& x, const Matrix& a, const Matrix& b,
                       const Matrix& outputGrad) {
  MlpPass pass;
  const Matrix pre = matmul(x, a);
  const Matrix hidden = relu(pre);
  pass.output = matmul(hidden, b);
  pass.gradB = matmul(hidden, outputGrad, true, false);
  const Matrix dPre = reluBackward(pre, matmul(outputGrad, b, false, true));
  pass.gradA = matmul(x, dPre, true, false);
  pass.inputGrad = matmul(dPre, a, false, true);
  return pass;
}

// One forward and backward of self-attention over a set of heads: projections wq, wk, wv
// (model x heads*headDim columns of the whole block's), output projection wo (the matching rows).
struct AttentionPass {
  Matrix output;
  Matrix inputGrad;
  Matrix gradQ, gradK, gradV, gradO;
};

inline AttentionPass attentionPass(const Matrix& x, const Matrix& wq, const Matrix& wk,
                                   const Matrix& wv, const Matrix& wo, int headDim,
                                   const Matrix& outputGrad) {
  const Matrix q = matmul(x, wq), k = matmul(x, wk), v = matmul(x, wv);
  const int heads = q.cols / headDim, tokens = x.rows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(headDim));
  Matrix attended(tokens, q.cols);
  std::vector<Matrix> probabilities;
  for (int h = 0; h < heads; ++h) {
    const Matrix qh = colsOf(q, h * headDim, headDim), kh = colsOf(k, h * headDim, headDim);
    const Matrix vh = colsOf(v, h * headDim, headDim);
    Matrix p = matmul(qh, kh, false, true);
    for (int r = 0; r < tokens; ++r) {  // softmax over each row of scaled scores
      float top = -INFINITY, sum = 0;
      for (int c = 0; c < tokens; ++c) top = std::max(top, p.at(r, c) * scale);
      for (int c = 0; c < tokens; ++c) sum += p.at(r, c) = std::exp(p.at(r, c) * scale - top);
      for (int c = 0; c < tokens; ++c) p.at(r, c) /= sum;
    }
    const Matrix oh = matmul(p, vh);
    for (int r = 0; r < tokens; ++r) {
      for (int c = 0; c < headDim; ++c) attended.at(r, h * headDim + c) = oh.at(r, c);
    }
    probabilities.push_back(p);
  }
  AttentionPass pass;
  pass.output = matmul(attended, wo);
  pass.gradO = matmul(attended, outputGrad, true, false);
  const Matrix dAttended = matmul(outputGrad, wo, false, true);
  Matrix dq(tokens, q.cols), dk(tokens, q.cols), dv(tokens, q.cols);
  for (int h = 0; h < heads; ++h) {
    const Matrix& p = probabilities[h];
    const Matrix qh = colsOf(q, h * headDim, headDim), kh = colsOf(k, h * headDim, headDim);
    const Matrix vh = colsOf(v, h * headDim, headDim);
    const Matrix doh = colsOf(dAttended, h * headDim, headDim);
    const Matrix dvh = matmul(p, doh, true, false);
    Matrix dp = matmul(doh, vh, false, true);
    Matrix ds(tokens, tokens);  // through the softmax: p * (dp - sum(dp * p)) per row
    for (int r = 0; r < tokens; ++r) {
      float dot = 0;
      for (int c = 0; c < tokens; ++c) dot += dp.at(r, c) * p.at(r, c);
      for (int c = 0; c < tokens; ++c) ds.at(r, c) = p.at(r, c) * (dp.at(r, c) - dot) * scale;
    }
    const Matrix dqh = matmul(ds, kh), dkh = matmul(ds, qh, true, false);
    for (int r = 0; r < tokens; ++r) {
      for (int c = 0; c < headDim; ++c) {
        dq.at(r, h * headDim + c) = dqh.at(r, c);
        dk.at(r, h * headDim + c) = dkh.at(r, c);
        dv.at(r, h * headDim + c) = dvh.at(r, c);
      }
    }
  }
  pass.gradQ = matmul(x, dq, true, false);
  pass.gradK = matmul(x, dk, true, false);
  pass.gradV = matmul(x, dv, true, false);
  pass.inputGrad = matmul(dq, wq, false, true);
  addInPlace(pass.inputGrad, matmul(dk, wk, false, true));
  addInPlace(pass.inputGrad, matmul(dv, wv, false, true));
  return pass;
}

}  // namespace examples
