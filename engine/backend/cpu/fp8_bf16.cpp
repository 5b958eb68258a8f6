// FP8 -> BF16 decode for the bf16 GEMM path: tables from the scalar
// definition, and the run-time choice of the AVX-512 lookup.
#include "backend/cpu/fp8_bf16.h"

#include "numeric/cast.h"

namespace engine::cpu {

namespace {

struct Tables {
  std::uint16_t e4m3[128];
  std::uint16_t e5m2[128];
  bool avx512;
  Tables() {
    for (int i = 0; i < 128; ++i) {
      e4m3[i] = e4m3_to_bf16_bits(static_cast<std::uint8_t>(i));
      e5m2[i] = e5m2_to_bf16_bits(static_cast<std::uint8_t>(i));
    }
    avx512 = cpu_runs_avx512();  // F, BW, VL, DQ
  }
};

const Tables& tables() {
  static const Tables t;  // thread-safe initialisation
  return t;
}

}  // namespace

void fp8_to_bf16(Format f, const std::uint8_t* src, std::uint16_t* dst, std::int64_t n) {
  const Tables& t = tables();
  const std::uint16_t* mag = f == Format::E4M3 ? t.e4m3 : t.e5m2;
  if (t.avx512) {
    fp8_to_bf16_avx512(mag, src, dst, n);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i)
    dst[i] = static_cast<std::uint16_t>(mag[src[i] & 0x7Fu] | ((src[i] & 0x80u) << 8));
}

}  // namespace engine::cpu
