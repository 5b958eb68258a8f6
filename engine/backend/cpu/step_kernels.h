// The CPU's step-level loops over one range, compiled for AVX-512, AVX2 and
// the baseline (PL_CPU_CLONES): the callers split ranges over the threads
// outside them (an OpenMP region inside a clone is outlined for the
// baseline). Compiled without contraction, so every clone gives the bits of
// the plain expressions.
#pragma once

#include <cstdint>

namespace engine::cpu {

// Sum of x[i]^2 over [0, n) in double (each square is exact) and the count
// of inf/NaN values. The sum runs in 16 interleaved partial sums, i % 16,
// folded in a fixed tree: the same bits on every CPU and clone.
double sum_squares_run(const float* x, std::int64_t n, std::int64_t* nonfinite);
// x[i] *= inv, then sum_squares_run's sum and count of the new values.
double unscale_run(float* x, std::int64_t n, float inv, std::int64_t* nonfinite);

// Backend::error_sums over [0, n): out[0] += sum (a-b)^2, out[1] += sum
// b^2, out[2] += sum (a-b) b, in double, lane-wise (kLanes partial sums
// folded in lanes.h's fixed tree: the same bits in every clone).
void error_sums_run(const float* a, const float* b, std::int64_t n, double* out);

// max |x_i| over [0, n) as a bit pattern (amax_from_bits, numeric/format.h).
std::uint32_t amax_bits(const float* x, std::int64_t n);
// y[i] = a[i] + b[i] and x[i] *= s: the elementwise ops' loops, one range.
void add_run(const float* a, const float* b, float* y, std::int64_t n);
void scale_run(float* x, float s, std::int64_t n);
// Rows of a GEMM's C (leading dimension ldc): c = alpha * c (+ bias[j]) --
// a product, then a sum, each rounded, as oneDNN's output scale and bias.
void scale_bias_rows(float* c, std::int64_t rows, std::int64_t n, std::int64_t ldc, float alpha, const float* bias);

// The gradient census's classes (numeric/inspect.h classify_magnitude of
// |v| * scale) over the nonzero values of v[0, n) as nested counts, without
// a branch on a value's class: out[0] += the nonzero count; out[1..4] +=
// the counts of class >= Underflow, >= Subnormal, >= Normal, == Overflow
// (NaN counts as Overflow; own[i] == 0, where own is set, forces
// Underflow). The thresholds are classify_magnitude's (tie: == overflow
// overflows).
void census_class_sums(const float* v, const float* own, std::int64_t n, double scale, double underflow,
                       double subnormal_hi, double overflow, bool tie, std::int64_t* out);

struct SgdCoeffs {
  float lr, momentum, keep, weight_decay;
};
// torch.optim.SGD without momentum: p -= lr * (g + wd * p).
void sgd_plain_run(float* p, const float* g, std::int64_t n, const SgdCoeffs& c);
// The momentum buffer: buf = g + wd * p (first step) or
// buf = momentum * buf + keep * (g + wd * p).
void sgd_buffer_run(float* buf, const float* p, const float* g, std::int64_t n, const SgdCoeffs& c, bool first);
// The step from the (rounded) buffer: p -= lr * buf, or with Nesterov
// p -= lr * ((g + wd * p) + momentum * buf).
void sgd_step_run(float* p, const float* g, const float* buf, std::int64_t n, const SgdCoeffs& c, bool nesterov);
// Weights kept only as FP16 codes, updated in one pass (sgd_fp16_avx2.cpp,
// AVX2 + F16C: callers check cast_path_supported(CastPath::F16C)): p
// decoded, sgd_buffer_run (the buffer rounded to FP16 when fp16_state),
// sgd_step_run without Nesterov, p into value and its nearest FP16 codes
// back into codes -- the bits of those passes.
void sgd_fp16_block(std::uint16_t* codes, float* value, const float* grad, float* buf, std::int64_t n,
                    const SgdCoeffs& c, bool first, bool fp16_state);

}  // namespace engine::cpu
