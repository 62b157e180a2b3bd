// Just enough dense float32 math for the parallelism examples to train small models in plain C++
// and compare them with the same model computed without parallelism: row-major matrices,
// products, ReLU, and a relative difference for the checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "c10d/core/Tensor.hpp"

namespace examples {

struct Matrix {
  int rows = 0;
  int cols = 0;
  std::vector<float> v;

  Matrix() = default;
  Matrix(int r, int c) : rows(r), cols(c), v(static_cast<size_t>(r) * c, 0.0f) {}
  float& at(int r, int c) { return v[static_cast<size_t>(r) * cols + c]; }
  float at(int r, int c) const { return v[static_cast<size_t>(r) * cols + c]; }
  // A zero-copy tensor over the matrix's memory, for the collectives (the matrix must outlive it).
  c10d::Tensor tensor() {
    return c10d::Tensor::fromBlob(v.data(), c10d::ScalarType::Float32, {rows, cols});
  }
  // A tensor of its own holding a copy, for what outlives the matrix (a pipeline stage's output).
  c10d::Tensor copy() const {
    auto t = c10d::Tensor::empty({rows, cols}, c10d::ScalarType::Float32);
    std::copy(v.begin(), v.end(), t.data<float>());
    return t;
  }
  static Matrix fromTensor(const c10d::Tensor& t) {
    Matrix m(static_cast<int>(t.sizes()[0]), static_cast<int>(t.numel() / t.sizes()[0]));
    std::copy_n(t.data<float>(), t.numel(), m.v.begin());
    return m;
  }
};

// Values uniform in [-scale, scale), the same on every rank for the same seed.
inline Matrix randomMatrix(int rows, int cols, uint32_t seed, float scale) {
  Matrix m(rows, cols);
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  for (float& x : m.v) x = uniform(generator);
  return m;
}

// a (r x k) times b (k x c); with transposeA, a is k x r; with transposeB, b is c x k.
inline Matrix matmul(const Matrix& a, const Matrix& b, bool transposeA = false,
                     bool transposeB = false) {
  const int rows = transposeA ? a.cols : a.rows, inner = transposeA ? a.rows : a.cols;
  const int cols = transposeB ? b.rows : b.cols;
  Matrix out(rows, cols);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < inner; ++k) {
      const float left = transposeA ? a.at(k, r) : a.at(r, k);
      for (int c = 0; c < cols; ++c) out.at(r, c) += left * (transposeB ? b.at(c, k) : b.at(k, c));
    }
  }
  return out;
}

inline Matrix relu(const Matrix& z) {
  Matrix y = z;
  for (float& x : y.v) x = std::max(x, 0.0f);
  return y;
}

// The gradient through a ReLU whose input was z.
inline Matrix reluBackward(const Matrix& z, const Matrix& grad) {
  Matrix out = grad;
  for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = z.v[i] > 0 ? out.v[i] : 0.0f;
  return out;
}

inline void addInPlace(Matrix& into, const Matrix& more, float scale = 1.0f) {
  for (size_t i = 0; i < into.v.size(); ++i) into.v[i] += scale * more.v[i];
}

// Rows [begin, begin + count) of m; and m's columns [begin, begin + count).
inline Matrix rowsOf(const Matrix& m, int begin, int count) {
  Matrix out(count, m.cols);
  std::copy_n(m.v.begin() + static_cast<ptrdiff_t>(begin) * m.cols, out.v.size(), out.v.begin());
  return out;
}

inline Matrix colsOf(const Matrix& m, int begin, int count) {
  Matrix out(m.rows, count);
  for (int r = 0; r < m.rows; ++r) {
    for (int c = 0; c < count; ++c) out.at(r, c) = m.at(r, begin + c);
  }
  return out;
}

// Squared error of y against target divided by count (the elements of the whole batch, which a
// micro-batch is part of): its loss, and into grad, its gradient with respect to y.
inline double meanSquaredError(const Matrix& y, const Matrix& target, size_t count, Matrix& grad) {
  grad = Matrix(y.rows, y.cols);
  double loss = 0;
  for (size_t i = 0; i < y.v.size(); ++i) {
    const double diff = y.v[i] - target.v[i];
    loss += diff * diff / count;
    grad.v[i] = static_cast<float>(2 * diff / count);
  }
  return loss;
}

// max |a - b| over max |b|: the checks' "equal within 1e-5 relative".
inline double relativeDifference(const Matrix& a, const Matrix& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.v.size() && i < b.v.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a.v[i]) - b.v[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.v[i])));
  }
  if (a.v.size() != b.v.size()) return INFINITY;
  return scale > 0 ? worst / scale : worst;
}

}  // namespace examples
