#include "c10d/core/Kernels.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "c10d/core/Config.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Half.hpp"

// GCC's `#pragma GCC target` compiles the wider builds; clang (the fuzzers' build) has no such
// pragma and gets the portable build alone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define C10D_KERNELS_X86 1
#else
#define C10D_KERNELS_X86 0
#endif

namespace c10d::inline v1::kernels {

// The element loops bound by arithmetic take this attribute (Kernels.inc, C10D_KERNEL_LOOPS).
#define C10D_KERNEL_WIDE

namespace portable {
#define C10D_KERNEL_F16 0
#include "c10d/core/Kernels.inc"
#undef C10D_KERNEL_F16
const Table kTable{"portable", &combine, &scale, &divide, &fromFloat, &toFloat};
}  // namespace portable

#if C10D_KERNELS_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#define C10D_KERNEL_F16 1
#include "c10d/core/Kernels.inc"
#undef C10D_KERNEL_F16
const Table kTable{"avx2", &combine, &scale, &divide, &fromFloat, &toFloat};
}  // namespace avx2
#pragma GCC pop_options

// x[i] = table[x[i]] for bytes, 64 a step: two 128-byte lookups and a blend on the top bit. The
// avx512 build scales bytes through it where the CPU has VBMI (Kernels.inc, scaleInteger).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vbmi")
namespace vbmi {
void mapBytes(uint8_t* data, size_t n, const uint8_t* table) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i index = _mm512_loadu_si512(data + i);
    const __m512i low = _mm512_permutex2var_epi8(t0, index, t1);
    const __m512i high = _mm512_permutex2var_epi8(t2, index, t3);
    _mm512_storeu_si512(data + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), low, high));
  }
  for (; i < n; ++i) data[i] = table[data[i]];
}

bool supported() {
  static const bool has = __builtin_cpu_supports("avx512vbmi");
  return has;
}
}  // namespace vbmi
#pragma GCC pop_options

// The vectorized loops keep 256-bit vectors where memory bounds them, and take 512-bit ones where
// arithmetic does (C10D_KERNEL_WIDE; Kernels.inc's C10D_KERNEL_LOOPS has the figures); the float16
// conversions use 512-bit ones.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,prefer-vector-width=256")
// GCC 12's own _mm512_cvtph_ps and _mm512_cvtps_ph start from _mm512_undefined_*, which it then
// reports as maybe uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#undef C10D_KERNEL_WIDE
// noinline: inlined into a caller compiled for 256-bit vectors, a loop is vectorized at its width.
#define C10D_KERNEL_WIDE __attribute__((target("prefer-vector-width=512"), noinline))
namespace avx512 {
#define C10D_KERNEL_F16 2
#include "c10d/core/Kernels.inc"
#undef C10D_KERNEL_F16
const Table kTable{"avx512", &combine, &scale, &divide, &fromFloat, &toFloat};
}  // namespace avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

std::vector<const Table*> available() {
  std::vector<const Table*> tables{&portable::kTable};
#if C10D_KERNELS_X86
  __builtin_cpu_init();
  const bool hasAvx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                       __builtin_cpu_supports("f16c");
  if (hasAvx2) tables.push_back(&avx2::kTable);
  if (hasAvx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    tables.push_back(&avx512::kTable);
  }
#endif
  return tables;
}

const Table& best() {
  static const Table& chosen = []() -> const Table& {
    std::vector<const Table*> tables = available();
    const std::string wanted = config::value("C10D_KERNELS");
    if (wanted == "auto") return *tables.back();
    for (const Table* table : tables) {
      if (table->name == wanted) return *table;
    }
    C10D_THROW(InvalidArgument, "C10D_KERNELS=", wanted,
               " names kernels this CPU cannot run; it runs ", tables.back()->name,
               " and those below it (portable, avx2, avx512)");
  }();
  return chosen;
}

}  // namespace c10d::inline v1::kernels
