// The FP8-cast GELU kernels' shared fit (gelu_cast_avx512.cpp, and the
// AVX2 lanes of gelu_cast_avx2.cpp): the table of pieces and how near a
// rounding boundary a value must be to take the exact lane. Included only
// by those two files.
#pragma once

#include <cstdint>

namespace engine::cpu::gelu_cast {

// Phi(-u) = erfc(u / sqrt 2) / 2 for u in [0, 4): 16 pieces of width 1/4,
// each a degree-4 polynomial in s = u - (i/4 + 1/8), |s| <= 1/8, that
// interpolates Phi(-u) at the piece's 5 Chebyshev nodes (40-digit
// arithmetic, coefficients then rounded to f32; kCoef[k][i] is piece i's
// s^k coefficient).
alignas(64) constexpr float kCoef[5][16] = {
    {0x1.cd116cp-2f, 0x1.6a527ap-2f, 0x1.105e82p-2f, 0x1.86bb5p-3f, 0x1.0ad7dap-3f, 0x1.5a6196p-4f, 0x1.aaa65cp-5f, 0x1.f20394p-6f, 0x1.13243cp-6f, 0x1.1f85a2p-7f, 0x1.1bee6cp-8f, 0x1.08c89p-9f, 0x1.d21af4p-11f, 0x1.8301bep-12f, 0x1.2eff8p-13f, 0x1.bf3766p-15f},
    {-0x1.955648p-2f, -0x1.7cc772p-2f, -0x1.500962p-2f, -0x1.1695a2p-2f, -0x1.b1ec98p-3f, -0x1.3d7752p-3f, -0x1.b461e4p-4f, -0x1.19bfe6p-4f, -0x1.55c774p-5f, -0x1.857a84p-6f, -0x1.a0f18ep-7f, -0x1.a34d2ap-8f, -0x1.8c1f96p-9f, -0x1.5f8d48p-10f, -0x1.251758p-11f, -0x1.cb17aap-13f},
    {0x1.955626p-6f, 0x1.1d957ap-4f, 0x1.a40b88p-4f, 0x1.e7859p-4f, 0x1.e829d4p-4f, 0x1.b483bap-4f, 0x1.628f48p-4f, 0x1.0823c6p-4f, 0x1.6b23e4p-5f, 0x1.ce81cep-6f, 0x1.119f06p-6f, 0x1.2d6084p-7f, 0x1.357a78p-8f, 0x1.28a1d2p-9f, 0x1.09a088p-10f, 0x1.bcc6c8p-12f},
    {0x1.093cc2p-4f, 0x1.b33b94p-5f, 0x1.10ad0cp-5f, 0x1.5dafb4p-7f, -0x1.2ffd66p-7f, -0x1.77059ep-6f, -0x1.dba01ap-6f, -0x1.d776d2p-6f, -0x1.901bc2p-6f, -0x1.2d4c3ep-6f, -0x1.99f694p-7f, -0x1.fd3c28p-8f, -0x1.22a4f6p-8f, -0x1.32424ep-9f, -0x1.2adb2cp-10f, -0x1.0eb75ap-11f},
    {-0x1.91ec68p-8f, -0x1.0f5b14p-6f, -0x1.6c543ep-6f, -0x1.6a43ccp-6f, -0x1.19cd44p-6f, -0x1.42e682p-7f, -0x1.5681e6p-9f, 0x1.679f52p-9f, 0x1.6d626cp-8f, 0x1.9623a2p-8f, 0x1.627836p-8f, 0x1.0882bp-8f, 0x1.5d654p-9f, 0x1.9fd0bep-10f, 0x1.c29062p-11f, 0x1.bf8b5ap-12f},
};

// The same polynomials in w = 4 s (|w| <= 1/2): kCoef[k] times 4^-k, exact.
struct Poly {
  alignas(64) float c[5][16];
};
constexpr Poly in_w() {
  Poly p{};
  for (int k = 0; k < 5; ++k)
    for (int i = 0; i < 16; ++i) p.c[k][i] = kCoef[k][i] / static_cast<float>(1 << (2 * k));
  return p;
}
constexpr Poly kPoly = in_w();

// How far the approximation may be from the exact lane (relative),
// measured for every f32 x with |y| >= 2^-74 (smaller ones always take
// the exact lane): 2^-15.99 for x in [-4, 0] (at -4), and for x >= 0 at
// most Phi(-4) < 2^-14.94, since from 4 on it takes Phi(-4) for Phi(-x)
// (the exact lane's Phi rounds to 1 from x = 5.9 on). So within 2^-14.9.
//
// The cast rounds y * scale (f32) to the FP8 grid, whose rounding
// boundaries are the midpoints between neighbours. A value whose 23 - m
// dropped mantissa bits (m: the format's mantissa bits) lie within kNear
// f32 ulps of the midpoint pattern is within 2^-12 (relative, 2^-13 at
// its binade's top) of a boundary, and takes the exact lane; everywhere
// else the exact value rounds to the same code (2^-13 against 2^-14.9).
constexpr std::int32_t kNear = 2048;

}  // namespace engine::cpu::gelu_cast
