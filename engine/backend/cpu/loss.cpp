// Losses of the CPU backend: softmax cross-entropy over integer labels and
// mean squared error, each forward (loss in double) and backward.
#include <cmath>
#include <limits>

#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"

namespace engine::cpu {

namespace {
struct CeSum {
  double loss = 0.0;
  std::int64_t correct = 0;
  CeSum& operator+=(const CeSum& o) {
    loss += o.loss;
    correct += o.correct;
    return *this;
  }
};
}  // namespace

double cross_entropy_forward(const float* logits, const std::int32_t* labels, std::int64_t rows,
                             std::int64_t classes, float* probs, std::int64_t* correct) {
  if (rows <= 0) {
    if (correct) *correct = 0;
    return 0.0;
  }
  // An exponential costs tens of elementwise ops: the rows split over the
  // threads from a few dozen (with one exponential a logit, the batch's 128 x 10 logits: 12.5 -> 5.8 us).
  const std::int64_t min_rows = std::max<std::int64_t>(1, kParallelMin / (64 * std::max<std::int64_t>(classes, 1)));
  const CeSum total = reduce_chunks<CeSum>(rows, min_rows, [=](std::int64_t b, std::int64_t e) {
    CeSum acc;
    constexpr std::int64_t kKept = 64;  // the exponentials of a row this wide stay for the probabilities
    double ex[kKept];
    for (std::int64_t i = b; i < e; ++i) {
      const float* z = logits + i * classes;
      float* p = probs + i * classes;
      // log-softmax with the maximum subtracted, in double: the loss of a
      // confident wrong prediction (logit gaps of 100s) stays finite.
      std::int64_t arg = 0;
      float m = z[0];
      for (std::int64_t j = 1; j < classes; ++j)
        if (z[j] > m) {
          m = z[j];
          arg = j;
        }
      double s = 0.0;
      for (std::int64_t j = 0; j < classes; ++j) {
        const double v = std::exp(static_cast<double>(z[j]) - m);
        if (j < kKept) ex[j] = v;
        s += v;
      }
      const double log_s = std::log(s);
      // p = exp(z - m) / s: one exponential a logit (the division is as
      // exact as exp(z - m - log s) was).
      for (std::int64_t j = 0; j < classes; ++j)
        p[j] = static_cast<float>((j < kKept ? ex[j] : std::exp(static_cast<double>(z[j]) - m)) / s);
      const std::int32_t label = labels[i];
      if (label >= 0 && label < classes) {
        acc.loss += -(static_cast<double>(z[label]) - m - log_s);
        acc.correct += arg == label ? 1 : 0;
      } else {
        // A label outside [0, classes) is a data error: it makes the loss
        // NaN (visible as a non-finite loss) instead of reading out of bounds.
        acc.loss += std::numeric_limits<double>::quiet_NaN();
      }
    }
    return acc;
  });
  if (correct) *correct = total.correct;
  return total.loss / static_cast<double>(rows);
}

void z_loss_forward(const float* logits, float* lse, double* z, std::int64_t rows, std::int64_t cols) {
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(64 * rows * cols))
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* x = logits + i * cols;
    float m = x[0];
    for (std::int64_t j = 1; j < cols; ++j) m = x[j] > m ? x[j] : m;
    double s = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(static_cast<double>(x[j]) - m);
    lse[i] = static_cast<float>(static_cast<double>(m) + std::log(s));
  }
  double sum = 0.0;
  for (std::int64_t i = 0; i < rows; ++i) sum += static_cast<double>(lse[i]) * static_cast<double>(lse[i]);
  *z = rows > 0 ? sum / static_cast<double>(rows) : 0.0;
}

void z_loss_backward(const float* probs, const float* lse, float* grad, std::int64_t rows, std::int64_t cols,
                     float coef, float scale) {
  if (rows <= 0) return;
  const float f = 2.0f * coef * scale / static_cast<float>(rows);
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * cols))
  for (std::int64_t i = 0; i < rows; ++i) {
    const float a = f * lse[i];
    for (std::int64_t j = 0; j < cols; ++j) grad[i * cols + j] += a * probs[i * cols + j];
  }
}

void cross_entropy_backward(const float* probs, const std::int32_t* labels, std::int64_t rows,
                            std::int64_t classes, float scale, float* dlogits) {
  if (rows <= 0) return;
  // (p - onehot) * scale / rows; scale carries the loss scale.
  const float f = scale / static_cast<float>(rows);
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * classes))
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* p = probs + i * classes;
    float* d = dlogits + i * classes;
    const std::int32_t label = labels[i];
    for (std::int64_t j = 0; j < classes; ++j) d[j] = (p[j] - (j == label ? 1.0f : 0.0f)) * f;
  }
}

double mse_forward(const float* pred, const float* target, std::int64_t n) {
  if (n <= 0) return 0.0;
  const double s = reduce_chunks<double>(n, kParallelMin, [=](std::int64_t b, std::int64_t e) {
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (std::int64_t i = b; i < e; ++i) {
      const double d = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
      acc += d * d;
    }
    return acc;
  });
  return s / static_cast<double>(n);
}

void mse_backward(const float* pred, const float* target, std::int64_t n, float scale, float* dpred) {
  if (n <= 0) return;
  const float f = 2.0f * scale / static_cast<float>(n);
  for_chunks(n, [=](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) dpred[i] = (pred[i] - target[i]) * f;
  });
}

}  // namespace engine::cpu
