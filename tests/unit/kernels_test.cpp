// Every build of the element-wise kernels this CPU runs computes the portable build's bits: each
// reduce op on each dtype, in each aliasing shape the contract allows, at lengths that end inside
// a vector, on inputs with NaNs (payloads, signs), infinities, signed zeros and subnormals; and
// the steps around a reduction and the fp16/bf16 conversions. Ranks on different CPUs combine
// values in one collective, so a difference here is a wrong result there.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "c10d/core/Half.hpp"
#include "c10d/core/Kernels.hpp"

namespace c10d::inline v1 {
namespace {

using kernels::Table;

const std::vector<size_t> kLengths = {0, 1, 7, 8, 15, 16, 17, 33, 255, 256, 257, 1000, 4099};
const std::vector<ScalarType> kDtypes = {
    ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16,
    ScalarType::Int8,    ScalarType::Int16,   ScalarType::Int32,   ScalarType::Int64,
    ScalarType::UInt8,   ScalarType::Bool};

// Random bytes for integers; for the floats, random values salted with the special ones.
std::vector<uint8_t> inputs(ScalarType dtype, size_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> bytes(n * elementSize(dtype));
  for (auto& b : bytes) b = static_cast<uint8_t>(random());
  std::uniform_real_distribution<float> uniform(-100.0f, 100.0f);
  const float specials[] = {
      std::numeric_limits<float>::quiet_NaN(),
      -std::numeric_limits<float>::quiet_NaN(),
      std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      0.0f,
      -0.0f,
      1e-42f,                              // a float32 subnormal
      3e-6f,                               // below float16's normal range
      65519.0f,                            // rounds to float16's largest
      70000.0f,                            // past float16's range
      1.00390625f,                         // a bfloat16 tie
      std::bit_cast<float>(0x7f800001u),   // signalling NaN, payload 1
      std::bit_cast<float>(0xffc12345u)};  // negative quiet NaN with a payload
  auto value = [&](size_t i) {
    // Offset by the seed, so a and b meet different specials (NaN against number, +0 against -0).
    return i % 5 == 0 ? specials[(i / 5 + seed) % std::size(specials)] : uniform(random);
  };
  for (size_t i = 0; i < n; ++i) {
    float v = value(i);
    switch (dtype) {
      case ScalarType::Float32:
        std::memcpy(bytes.data() + 4 * i, &v, 4);
        break;
      case ScalarType::Float64: {
        double d = v;
        std::memcpy(bytes.data() + 8 * i, &d, 8);
        break;
      }
      case ScalarType::Float16: {
        // Every half bit pattern appears somewhere, NaN payloads included.
        uint16_t h = i % 3 == 0 ? static_cast<uint16_t>(random()) : Half::fromFloat(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
      case ScalarType::BFloat16: {
        uint16_t h = i % 3 == 0 ? static_cast<uint16_t>(random()) : BFloat16::fromFloat(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
      case ScalarType::Bool:
        bytes[i] &= 1;
        break;
      default:
        break;
    }
  }
  return bytes;
}

std::string where(const Table& table, std::string_view what, ScalarType dtype, size_t n) {
  return std::string(table.name) + " " + std::string(what) + " on " + std::string(name(dtype)) +
         " x " + std::to_string(n);
}

class KernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tables_ = kernels::available();
    ASSERT_EQ(std::string(tables_.front()->name), "portable");
    if (tables_.size() == 1) {
      GTEST_SKIP() << "this CPU runs only the portable kernels: nothing to compare them with";
    }
    std::printf("comparing with the portable kernels:");
    for (size_t i = 1; i < tables_.size(); ++i) std::printf(" %s", tables_[i]->name);
    std::printf("\n");
  }
  const Table& portable() const { return *tables_.front(); }
  std::vector<const Table*> tables_;
};

TEST_F(KernelsTest, CombineMatchesPortableInEveryShape) {
  const ReduceOp::Kind kinds[] = {ReduceOp::SUM,  ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
                                  ReduceOp::BAND, ReduceOp::BOR,     ReduceOp::BXOR};
  int compared = 0;
  for (size_t t = 1; t < tables_.size(); ++t) {
    const Table& table = *tables_[t];
    for (ScalarType dtype : kDtypes) {
      for (ReduceOp::Kind kind : kinds) {
        auto expected = portable().combine(kind, dtype);
        auto actual = table.combine(kind, dtype);
        ASSERT_EQ(expected == nullptr, actual == nullptr) << where(table, name(kind), dtype, 0);
        if (expected == nullptr) continue;
        for (size_t n : kLengths) {
          const auto a = inputs(dtype, n, 1 + n), b = inputs(dtype, n, 7 + n);
          std::vector<uint8_t> want(a.size()), got(a.size());
          expected(want.data(), a.data(), b.data(), n);
          actual(got.data(), a.data(), b.data(), n);
          EXPECT_EQ(want, got) << where(table, name(kind), dtype, n) << ", out apart";
          got = a;  // out == a, as an allreduce combines into its buffer
          actual(got.data(), got.data(), b.data(), n);
          EXPECT_EQ(want, got) << where(table, name(kind), dtype, n) << ", out == a";
          got = b;
          actual(got.data(), a.data(), got.data(), n);
          EXPECT_EQ(want, got) << where(table, name(kind), dtype, n) << ", out == b";
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
}

TEST_F(KernelsTest, ScaleAndDivideMatchPortable) {
  for (size_t t = 1; t < tables_.size(); ++t) {
    const Table& table = *tables_[t];
    for (ScalarType dtype : kDtypes) {
      for (size_t n : kLengths) {
        const auto data = inputs(dtype, n, 3 + n);
        // Products stay inside int64, where the integer scaling is defined.
        for (double factor : {0.5, 1.0 / 3.0, -0.75}) {
          auto want = data, got = data;
          portable().scale(dtype, want.data(), n, factor);
          table.scale(dtype, got.data(), n, factor);
          EXPECT_EQ(want, got) << where(table, "scale", dtype, n) << " by " << factor;
        }
        for (int divisor : {2, 3, 7, 1 << 21}) {  // the last one divides as integers
          auto want = data, got = data;
          portable().divide(dtype, want.data(), n, divisor);
          table.divide(dtype, got.data(), n, divisor);
          EXPECT_EQ(want, got) << where(table, "divide", dtype, n) << " by " << divisor;
        }
      }
    }
  }
}

TEST_F(KernelsTest, ConversionsMatchPortable) {
  for (size_t t = 1; t < tables_.size(); ++t) {
    const Table& table = *tables_[t];
    for (ScalarType low : {ScalarType::Float16, ScalarType::BFloat16}) {
      for (size_t n : kLengths) {
        const auto floats = inputs(ScalarType::Float32, n, 11 + n);
        const auto* in = reinterpret_cast<const float*>(floats.data());
        for (double factor : {1.0, 0.5, 1.0 / 3.0}) {
          std::vector<uint16_t> want(n), got(n);
          portable().fromFloat(low, in, want.data(), n, factor);
          table.fromFloat(low, in, got.data(), n, factor);
          EXPECT_EQ(want, got) << where(table, "fromFloat", low, n) << " by " << factor;
        }
        const auto bits = inputs(low, n, 13 + n);
        std::vector<float> want(n), got(n);
        portable().toFloat(low, bits.data(), want.data(), n);
        table.toFloat(low, bits.data(), got.data(), n);
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), n * sizeof(float)))
            << where(table, "toFloat", low, n);
      }
    }
  }
}

// Runs kernel on 4099 floats with specials (inputs(Float32, seed)) and expects each result to
// have want(its input)'s bits.
template <typename Kernel, typename Want>
void expectEachFloat(uint32_t seed, Kernel kernel, Want want, const std::string& what) {
  const auto bytes = inputs(ScalarType::Float32, 4099, seed);
  std::vector<float> in(4099), got(4099);
  std::memcpy(in.data(), bytes.data(), bytes.size());
  got = in;
  kernel(got.data(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want(in[i])))
        << what << ", element " << i << " (" << in[i] << ")";
  }
}

// Every table's division is the plain one: the integers' multiply-high and through-double paths
// against C++'s truncating division (every int8 and uint8 value, by every divisor up to past
// their range; int64 values near 0, near 2^53 and beyond it), the floats' reciprocal for a
// power-of-two divisor against dividing.
TEST(AllKernelsTest, DivideIsPlainDivision) {
  std::mt19937_64 random(5);
  for (const Table* table : kernels::available()) {
    for (int divisor = 1; divisor <= 300; ++divisor) {
      std::vector<int8_t> signedBytes(256);
      std::vector<uint8_t> bytes(256);
      for (int v = 0; v < 256; ++v) {
        signedBytes[v] = static_cast<int8_t>(v - 128);
        bytes[v] = static_cast<uint8_t>(v);
      }
      table->divide(ScalarType::Int8, signedBytes.data(), 256, divisor);
      table->divide(ScalarType::UInt8, bytes.data(), 256, divisor);
      for (int v = 0; v < 256; ++v) {
        ASSERT_EQ(signedBytes[v], (v - 128) / divisor)
            << table->name << " int8 " << v - 128 << " / " << divisor;
        ASSERT_EQ(bytes[v], v / divisor) << table->name << " uint8 " << v << " / " << divisor;
      }
    }
    std::vector<int64_t> wide;
    for (int64_t centre : {int64_t{0}, int64_t{1} << 53, -(int64_t{1} << 53), int64_t{1} << 62}) {
      for (int64_t k = -300; k <= 300; ++k) wide.push_back(centre + k);
    }
    wide.push_back(std::numeric_limits<int64_t>::min());
    wide.push_back(std::numeric_limits<int64_t>::max());
    for (int i = 0; i < 1000; ++i) wide.push_back(static_cast<int64_t>(random()) >> (i % 20));
    for (int divisor : {2, 3, 7, 48, 1000003}) {
      auto got = wide;
      table->divide(ScalarType::Int64, got.data(), got.size(), divisor);
      for (size_t i = 0; i < wide.size(); ++i) {
        ASSERT_EQ(got[i], wide[i] / divisor)
            << table->name << " int64 " << wide[i] << " / " << divisor;
      }
    }
    for (int divisor : {2, 4, 64, 1 << 20}) {
      expectEachFloat(
          17, [&](float* data, size_t n) { table->divide(ScalarType::Float32, data, n, divisor); },
          [&](float x) { return x / static_cast<float>(divisor); },
          std::string(table->name) + " float32 / " + std::to_string(divisor));
    }
  }
}

// A factor that is a float scales in float; the bits must be those of the product in double.
TEST(AllKernelsTest, FloatFactorScalesAsTheProductInDouble) {
  for (const Table* table : kernels::available()) {
    for (double factor : {0.5, 0.125, 0.1f * 1.0, -3.0, 1e-30, 1.0 / 3.0}) {
      expectEachFloat(
          23, [&](float* data, size_t n) { table->scale(ScalarType::Float32, data, n, factor); },
          [&](float x) { return static_cast<float>(static_cast<double>(x) * factor); },
          std::string(table->name) + " float32 * " + std::to_string(factor));
    }
  }
}

// What the portable kernels compute, on values whose answers are known.
TEST(PortableKernelsTest, KnownValues) {
  const Table& portable = *kernels::available().front();
  float a[3] = {1.5f, -2.0f, 3.0f}, b[3] = {2.0f, 4.0f, std::nanf("")};
  float out[3];
  portable.combine(ReduceOp::SUM, ScalarType::Float32)(out, a, b, 3);
  EXPECT_EQ(out[0], 3.5f);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_TRUE(std::isnan(out[2]));
  portable.combine(ReduceOp::MIN, ScalarType::Float32)(out, a, b, 3);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 3.0f);  // a NaN in the second operand does not win
  uint16_t h[2] = {Half::fromFloat(1.0f), Half::fromFloat(65504.0f)};
  uint16_t g[2] = {Half::fromFloat(2.0f), Half::fromFloat(65504.0f)};
  portable.combine(ReduceOp::SUM, ScalarType::Float16)(h, h, g, 2);
  EXPECT_EQ(Half::toFloat(h[0]), 3.0f);
  EXPECT_TRUE(std::isinf(Half::toFloat(h[1])));
  bool x[2] = {true, false}, y[2] = {false, false};
  portable.combine(ReduceOp::SUM, ScalarType::Bool)(x, x, y, 2);
  EXPECT_TRUE(x[0]);
  EXPECT_FALSE(x[1]);
  int32_t v[2] = {7, -7};
  portable.divide(ScalarType::Int32, v, 2, 2);
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], -3);
  float f[2] = {1.0f, 1.00390625f};
  uint16_t bf[2];
  portable.fromFloat(ScalarType::BFloat16, f, bf, 2, 1.0);
  EXPECT_EQ(bf[0], 0x3f80);
  EXPECT_EQ(bf[1], 0x3f80);  // a tie rounds to even
}

}  // namespace
}  // namespace c10d::inline v1
