// One PowerSGD step on a bucket (all in the bucket's own floating type T):
//   M = gradient / divisor + error            per compressible gradient, an n x m matrix
//   P = M Q; allreduce(P); orthonormalise P's columns
//   Q = M^T P; allreduce(Q, with the uncompressed gradients appended)
//   gradient = P Q^T (the average's approximation); error = M - P Q^T / divisor, this rank's
//   share of what the approximation lost; Q is kept for the next step
// Two allreduces per bucket, of (n + m) r numbers per matrix plus the uncompressed rest.

#include "c10d/training/PowerSgd.hpp"

#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

namespace {

// A gradient of the bucket as the step sees it.
struct Part {
  int64_t offset = 0;  // in the bucket, elements
  int64_t n = 0, m = 0;
  bool compressed = false;
};

template <typename T>
struct BucketState {
  uint64_t iterations = 0;
  std::vector<size_t> parameters;  // the bucket's layout the state below belongs to
  std::vector<T> error;            // per element of the bucket
  std::vector<std::vector<T>> q;   // per part (m x r, row-major), empty for uncompressed parts
  // Scratch of every step, kept so that a step allocates nothing once the first has sized them
  // (the input alone is a copy of the whole bucket: 25 MiB a step at the default cap).
  std::vector<Part> parts;
  std::vector<T> input, pMessage, qMessage;
  std::vector<std::vector<T>> ps;  // per part (n x r)
};

// Orthonormal columns (Gram-Schmidt); a column that vanishes stays zero.
template <typename T>
void orthonormalise(std::vector<T>& p, int64_t n, int64_t r) {
  for (int64_t c = 0; c < r; ++c) {
    for (int64_t k = 0; k < c; ++k) {
      T dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += p[i * r + c] * p[i * r + k];
      for (int64_t i = 0; i < n; ++i) p[i * r + c] -= dot * p[i * r + k];
    }
    T norm = 0;
    for (int64_t i = 0; i < n; ++i) norm += p[i * r + c] * p[i * r + c];
    norm = std::sqrt(norm);
    // Below this the column is rounding noise; normalising it would amplify the noise.
    if (norm < T(1e-12)) {
      for (int64_t i = 0; i < n; ++i) p[i * r + c] = 0;
      continue;
    }
    for (int64_t i = 0; i < n; ++i) p[i * r + c] /= norm;
  }
}

}  // namespace

struct PowerSgd::State {
  PowerSgdOptions options;
  std::mutex mutex;  // the hook may be shared by reducers on several threads
  std::map<size_t, BucketState<float>> floats;
  std::map<size_t, BucketState<double>> doubles;

  template <typename T>
  std::shared_ptr<Future> step(ProcessGroup& group, GradBucket& bucket, BucketState<T>& state) {
    const Tensor& buffer = bucket.buffer;
    const int64_t total = buffer.numel();
    T* data = buffer.data<T>();
    const size_t r0 = options.rank;
    // The layout of the bucket's gradients.
    std::vector<Part>& parts = state.parts;
    parts.clear();
    int64_t offset = 0;
    for (const Tensor& g : bucket.gradients) {
      Part part;
      part.offset = offset;
      part.n = g.dim() >= 2 ? g.sizes()[0] : 1;
      part.m = g.numel() / std::max<int64_t>(part.n, 1);
      const int64_t r = std::min<int64_t>({static_cast<int64_t>(r0), part.n, part.m});
      part.compressed = g.dim() >= 2 && (part.n + part.m) * r < part.n * part.m;
      parts.push_back(part);
      offset += g.numel();
    }
    if (state.parameters != bucket.parameters) {  // the reducer rebuilt its buckets
      state.parameters = bucket.parameters;
      state.error.assign(total, T(0));
      state.q.assign(parts.size(), {});
    }
    const T factor = static_cast<T>(bucket.average.factor());
    // A joined rank's zeros (Join) carry no error of its own; it still keeps Q in step.
    const bool feedback = options.errorFeedback && !bucket.shadow;
    std::vector<T>& input = state.input;
    input.resize(total);
    for (int64_t k = 0; k < total; ++k)
      input[k] = data[k] * factor + (feedback ? state.error[k] : T(0));
    // P = M Q for every compressed part, one message.
    std::vector<T>& pMessage = state.pMessage;
    pMessage.clear();
    for (size_t g = 0; g < parts.size(); ++g) {
      const Part& part = parts[g];
      if (!part.compressed) continue;
      const int64_t r = std::min<int64_t>({static_cast<int64_t>(r0), part.n, part.m});
      std::vector<T>& q = state.q[g];
      if (q.empty()) {
        // The same start on every rank: seeded by the options, the bucket and the part.
        std::mt19937_64 random(options.seed * 1000003 + bucket.index * 1009 + g);
        q.resize(part.m * r);
        for (T& x : q) x = static_cast<T>(static_cast<double>(random() >> 11) * 0x1p-53 - 0.5);
      }
      for (int64_t i = 0; i < part.n; ++i) {
        for (int64_t c = 0; c < r; ++c) {
          T sum = 0;
          for (int64_t j = 0; j < part.m; ++j)
            sum += input[part.offset + i * part.m + j] * q[j * r + c];
          pMessage.push_back(sum);
        }
      }
    }
    const ScalarType dtype = buffer.dtype();
    auto allreduce = [&](std::vector<T>& values) {
      if (values.empty()) return;
      Tensor t = Tensor::fromBlob(values.data(), dtype, {static_cast<int64_t>(values.size())});
      group.allreduce(t)->wait();
    };
    allreduce(pMessage);
    // Q = M^T P for every compressed part, then the uncompressed gradients: one message.
    std::vector<T>& qMessage = state.qMessage;
    qMessage.clear();
    int64_t at = 0;
    std::vector<std::vector<T>>& ps = state.ps;
    ps.resize(parts.size());
    for (size_t g = 0; g < parts.size(); ++g) {
      const Part& part = parts[g];
      if (!part.compressed) continue;
      const int64_t r = std::min<int64_t>({static_cast<int64_t>(r0), part.n, part.m});
      std::vector<T>& p = ps[g];
      p.assign(pMessage.begin() + at, pMessage.begin() + at + part.n * r);
      at += part.n * r;
      orthonormalise(p, part.n, r);
      // Row by row of M, so memory is read in order.
      const size_t q0 = qMessage.size();
      qMessage.resize(q0 + part.m * r, T(0));
      T* q = qMessage.data() + q0;
      for (int64_t i = 0; i < part.n; ++i) {
        const T* row = input.data() + part.offset + i * part.m;
        for (int64_t j = 0; j < part.m; ++j) {
          for (int64_t c = 0; c < r; ++c) q[j * r + c] += row[j] * p[i * r + c];
        }
      }
    }
    const size_t uncompressedAt = qMessage.size();
    for (size_t g = 0; g < parts.size(); ++g) {
      if (parts[g].compressed) continue;
      const int64_t size = parts[g].n * parts[g].m;
      qMessage.insert(qMessage.end(), input.begin() + parts[g].offset,
                      input.begin() + parts[g].offset + size);
    }
    allreduce(qMessage);
    // Decompress into the bucket; keep Q and what was lost.
    at = 0;
    size_t rest = uncompressedAt;
    for (size_t g = 0; g < parts.size(); ++g) {
      const Part& part = parts[g];
      T* out = data + part.offset;
      if (!part.compressed) {
        for (int64_t k = 0; k < part.n * part.m; ++k) {
          out[k] = qMessage[rest++];
          if (feedback) state.error[part.offset + k] = 0;
        }
        continue;
      }
      const int64_t r = std::min<int64_t>({static_cast<int64_t>(r0), part.n, part.m});
      std::vector<T>& q = state.q[g];
      q.assign(qMessage.begin() + at, qMessage.begin() + at + part.m * r);
      at += part.m * r;
      const std::vector<T>& p = ps[g];
      for (int64_t i = 0; i < part.n; ++i) {
        for (int64_t j = 0; j < part.m; ++j) {
          T sum = 0;
          for (int64_t c = 0; c < r; ++c) sum += p[i * r + c] * q[j * r + c];
          out[i * part.m + j] = sum;
          if (feedback) {
            // This rank's share of what the average lost: the ranks' errors then sum to it.
            state.error[part.offset + i * part.m + j] =
                input[part.offset + i * part.m + j] - sum * factor;
          }
        }
      }
    }
    auto done = std::make_shared<Future>();
    done->markCompleted({buffer});
    return done;
  }
};

PowerSgd::PowerSgd(PowerSgdOptions options) : state_(std::make_shared<State>()) {
  C10D_CHECK(options.rank >= 1, InvalidArgument, "PowerSgd: rank must be at least 1, got ",
             options.rank);
  state_->options = options;
}

CommHook PowerSgd::hook() const {
  std::shared_ptr<State> state = state_;
  return [state](ProcessGroup& group, GradBucket& bucket) -> std::shared_ptr<Future> {
    const Tensor& buffer = bucket.buffer;
    C10D_CHECK(buffer.device().isCPU() &&
                   (buffer.dtype() == ScalarType::Float32 || buffer.dtype() == ScalarType::Float64),
               InvalidArgument, "PowerSgd: compresses CPU float32 or float64 buckets; bucket ",
               bucket.index, " is ", buffer.describe());
    std::lock_guard<std::mutex> guard(state->mutex);
    uint64_t& iterations = buffer.dtype() == ScalarType::Float32
                               ? state->floats[bucket.index].iterations
                               : state->doubles[bucket.index].iterations;
    if (iterations++ < state->options.startIteration) return allreduceHook(group, bucket);
    if (buffer.dtype() == ScalarType::Float32) {
      return state->step(group, bucket, state->floats[bucket.index]);
    }
    return state->step(group, bucket, state->doubles[bucket.index]);
  };
}

}  // namespace c10d::inline v1
