// Block comparison: block_encode_reference on one side, a per-tensor scale
// and the element format's scalar codec on the other.
#include "lecture/block_compare.h"

#include <QLocale>
#include <QObject>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "numeric/block.h"
#include "numeric/convert.h"
#include "numeric/inspect.h"
#include "charts/number_text.h"

namespace {

QuantizedElement element(float input, std::uint32_t code, float value) {
  QuantizedElement e;
  e.code = code;
  e.value = value;
  const double x = input, q = value;
  if (!std::isfinite(x) || !std::isfinite(q))
    e.relError = std::nan("");
  else
    e.relError = x == 0.0 ? 0.0 : std::fabs(q - x) / std::fabs(x);
  e.flushed = std::isfinite(x) && x != 0.0 && q == 0.0;
  return e;
}

}  // namespace

ErrorSummary BlockComparison::summary(bool perTensor, int blockIndex) const {
  const std::vector<QuantizedElement>& side = perTensor ? tensor : block;
  std::size_t from = 0, to = side.size();
  if (blockIndex >= 0) {
    from = std::min(side.size(), static_cast<std::size_t>(blockIndex) * static_cast<std::size_t>(blockSize));
    to = std::min(side.size(), from + static_cast<std::size_t>(blockSize));
  }
  ErrorSummary s;
  double sum = 0.0;
  for (std::size_t i = from; i < to; ++i) {
    const float x = input[i];
    if (!std::isfinite(x) || x == 0.0f) continue;
    ++s.nonzero;
    if (side[i].flushed) ++s.flushed;
    // A value that decoded to inf or NaN (E5M2 keeps an inf input's inf,
    // but x is finite here) counts as a total loss.
    const double r = std::isnan(side[i].relError) ? 1.0 : side[i].relError;
    sum += r * r;
  }
  s.rmsRelError = s.nonzero > 0 ? std::sqrt(sum / s.nonzero) : 0.0;
  return s;
}

BlockComparison compareBlocks(engine::Format f, const std::vector<float>& values, double tensorAmax) {
  const engine::BlockInfo& bi = engine::block_info(f);  // throws for a non-block format
  BlockComparison c;
  c.format = f;
  c.element = bi.element;
  c.scaleFormat = bi.scale;
  c.blockSize = bi.block;
  c.hasTensorScale = bi.tensor_scale;
  const std::size_t n = std::min(values.size(), static_cast<std::size_t>(2 * bi.block));
  c.input.assign(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));

  // The largest finite magnitude (as NVFP4 takes its tensor amax, and so a
  // typed inf does not zero every other value's scale).
  double own = 0.0;
  for (float v : c.input)
    if (std::isfinite(v)) own = std::max(own, static_cast<double>(std::fabs(v)));
  c.amax = own;
  if (std::isfinite(tensorAmax) && tensorAmax > own) c.amax = tensorAmax;
  if (n == 0) return c;

  // Block side. NVFP4's S_enc comes from the whole tensor's amax: when the
  // tensor's is larger than these values', one more block holding it joins
  // the encoding, after the shown ones (an MX or NVFP4 block's own scale
  // depends on its own values only, so no shown block changes but for S_enc).
  std::vector<float> data(c.input);
  if (bi.tensor_scale && c.amax > own) {
    const std::size_t whole = (n + bi.block - 1) / bi.block * bi.block;
    data.resize(whole, 0.0f);
    data.push_back(static_cast<float>(c.amax));
  }
  const engine::BlockEncoding enc = engine::block_encode_reference(
      f, data.data(), 1, static_cast<std::int64_t>(data.size()), engine::BlockLayout::Rows);
  c.tensorScale = enc.tensor_scale;
  const int blocks = static_cast<int>((n + bi.block - 1) / bi.block);
  for (int b = 0; b < blocks; ++b) {
    SharedScale s;
    s.code = enc.scales[static_cast<std::size_t>(b)];
    s.value = engine::decode(bi.scale, s.code);
    s.first = b * bi.block;
    s.count = std::min(bi.block, static_cast<int>(n) - s.first);
    c.scales.push_back(s);
  }
  for (std::size_t i = 0; i < n; ++i)
    c.block.push_back(element(c.input[i], enc.codes[i], enc.value(0, static_cast<std::int64_t>(i), true)));

  // Per-tensor side: Transformer Engine's current scaling, in f32 as its
  // kernels compute it (an infinite scale becomes FLT_MAX; amax 0 keeps 1).
  const float elementMax = static_cast<float>(engine::format_info(bi.element).max);
  float scale = 1.0f;
  if (c.amax > 0.0) {
    scale = elementMax / static_cast<float>(c.amax);
    if (!std::isfinite(scale)) scale = FLT_MAX;
  }
  c.perTensorScale = scale;
  for (float x : c.input) {
    const std::uint32_t code = engine::encode(bi.element, x * scale, /*saturate=*/true);
    c.tensor.push_back(element(x, code, engine::decode(bi.element, code) / scale));
  }
  return c;
}

// --- the block view's words for its numbers ---

namespace {
QString decimal(float v) { return QString::fromStdString(engine::shortest_decimal(v)); }
}  // namespace

// A number as the explorer reads one: a decimal, 2^k, inf, nan.
bool parseBlockNumber(QString t, float* out) {
  t = t.trimmed().toLower();
  bool negative = false;
  if (t.startsWith(QLatin1Char('-')) || t.startsWith(QLatin1Char('+'))) {
    negative = t.startsWith(QLatin1Char('-'));
    t = t.mid(1);
  }
  if (t.isEmpty() || t.startsWith(QLatin1Char('-')) || t.startsWith(QLatin1Char('+'))) return false;
  double d = 0;
  bool ok = false;
  if (t == QLatin1String("inf") || t == QLatin1String("infinity")) {
    d = std::numeric_limits<double>::infinity();
    ok = true;
  } else if (t == QLatin1String("nan")) {
    d = std::numeric_limits<double>::quiet_NaN();
    ok = true;
  } else if (t.startsWith(QLatin1String("2^"))) {
    const double e = t.mid(2).toDouble(&ok);
    if (ok) d = std::exp2(e);
  } else {
    d = QLocale::c().toDouble(t, &ok);
  }
  if (!ok) return false;
  *out = static_cast<float>(negative ? -d : d);
  return true;
}

// A scale's value: E8M0 codes are powers of two ("2^-2 = 0.25").
QString scaleValueText(engine::Format scaleFormat, float v) {
  if (std::isnan(v)) return QStringLiteral("NaN");
  if (scaleFormat == engine::Format::E8M0 && v > 0)
    return QStringLiteral("2^%1 = %2").arg(std::ilogb(v)).arg(decimal(v));
  return decimal(v);
}

QString factorText(double f) {
  return QStringLiteral("× %1").arg(QString::number(f, 'f', f < 10 ? 2 : f < 100 ? 1 : 0));
}

QString summaryLine(const ErrorSummary& s) {
  if (s.nonzero == 0) return QObject::tr("no nonzero values");
  return QObject::tr("RMS relative error %1 · %2 of %3 nonzero values flushed to zero")
      .arg(number_text::percent(s.rmsRelError))
      .arg(s.flushed)
      .arg(s.nonzero);
}

QString shortSummary(const ErrorSummary& s) {
  if (s.nonzero == 0) return QStringLiteral("—");
  return QObject::tr("RMS %1, %2 flushed").arg(number_text::percent(s.rmsRelError)).arg(s.flushed);
}
