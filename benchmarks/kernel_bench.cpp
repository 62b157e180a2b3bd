// c10d-kernel-bench: the element-wise kernels under the collectives (the reductions every
// backend combines two ranks' values with, and the fp16/bf16 conversions of DDP's compression
// hooks) against memcpy, in GB/s of memory traffic, on buffers larger than the caches.
//
//   c10d-kernel-bench [--mib 64] [--repeats 9]
//
// A reduction reads a and b and writes out (3 x the buffer), in place as an allreduce runs it
// (out == a); memcpy reads and writes (2 x). "of memcpy" is a kernel's GB/s over memcpy's.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/common/Reduce.hpp"
#include "c10d/core/Kernels.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// The median over repeats of one call's seconds, after one untimed call (page faults).
double medianSeconds(int repeats, const std::function<void()>& call) {
  call();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    call();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + repeats / 2, seconds.end());
  return seconds[repeats / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"c10d-kernel-bench: reduction and conversion kernels against memcpy"};
  size_t mib = 64;
  int repeats = 9;
  app.add_option("--mib", mib, "bytes of each buffer, in MiB")->capture_default_str();
  app.add_option("--repeats", repeats, "timed calls per kernel (median)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const size_t bytes = mib << 20;
  std::vector<uint8_t> a(bytes, 1), b(bytes, 1), c(bytes);
  // Small values keep every op (product included) finite and in range.
  for (size_t i = 0; i < bytes; ++i) a[i] = b[i] = static_cast<uint8_t>(i % 3 == 0 ? 0 : 1);
  std::memset(a.data(), 0, bytes);
  std::memset(b.data(), 0, bytes);

  const double memcpySeconds =
      medianSeconds(repeats, [&] { std::memcpy(c.data(), a.data(), bytes); });
  const double memcpyGBs = 2.0 * bytes / memcpySeconds / 1e9;
  std::printf("kernels: %s\n\n| kernel | dtype | GB/s | of memcpy |\n|---|---|---|---|\n",
              c10d::kernels::best().name);
  std::printf("| memcpy | - | %.1f | 1.00 |\n", memcpyGBs);

  using c10d::ReduceOp;
  using c10d::ScalarType;
  const std::vector<ScalarType> dtypes = {
      ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16,
      ScalarType::Int8,    ScalarType::UInt8,   ScalarType::Int32,   ScalarType::Int64};
  const std::vector<ReduceOp> ops = {ReduceOp(ReduceOp::SUM),     ReduceOp(ReduceOp::AVG),
                                     ReduceOp(ReduceOp::MIN),     ReduceOp(ReduceOp::MAX),
                                     ReduceOp(ReduceOp::PRODUCT), ReduceOp::premulSum(0.5)};
  for (const ReduceOp& op : ops) {
    for (ScalarType dtype : dtypes) {
      if (!c10d::supports(op, dtype)) continue;
      const size_t n = bytes / c10d::elementSize(dtype);
      auto combine = c10d::reduceFunction(op, dtype);
      // An allreduce's whole local work on one rank's input: prepare, combine, finish.
      double seconds = medianSeconds(repeats, [&] {
        c10d::prepareReduce(op, dtype, a.data(), n);
        combine(a.data(), a.data(), b.data(), n);
        c10d::finishReduce(op, dtype, a.data(), n, 2);
      });
      double gbs = 3.0 * bytes / seconds / 1e9;
      std::printf("| %s | %s | %.1f | %.2f |\n", std::string(c10d::name(op.kind())).c_str(),
                  std::string(c10d::name(dtype)).c_str(), gbs, gbs / memcpyGBs);
    }
  }
  // Conversions, as the compression hooks run them: float32 to 16 bits (scaled) and back.
  for (ScalarType low : {ScalarType::Float16, ScalarType::BFloat16}) {
    const size_t n = bytes / sizeof(float);
    std::vector<uint16_t> packed(n);
    const auto* in = reinterpret_cast<const float*>(a.data());
    auto* out = reinterpret_cast<float*>(c.data());
    double down = medianSeconds(
        repeats, [&] { c10d::kernels::best().fromFloat(low, in, packed.data(), n, 0.5); });
    double up =
        medianSeconds(repeats, [&] { c10d::kernels::best().toFloat(low, packed.data(), out, n); });
    // Each reads one size and writes the other: 6 bytes an element.
    std::printf("| float32 to %s | %s | %.1f | %.2f |\n", std::string(c10d::name(low)).c_str(),
                std::string(c10d::name(low)).c_str(), 6.0 * n / down / 1e9,
                6.0 * n / down / 1e9 / memcpyGBs);
    std::printf("| %s to float32 | %s | %.1f | %.2f |\n", std::string(c10d::name(low)).c_str(),
                std::string(c10d::name(low)).c_str(), 6.0 * n / up / 1e9,
                6.0 * n / up / 1e9 / memcpyGBs);
  }
  return 0;
}
