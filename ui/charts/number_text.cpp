// Number text: significant digits, scientific where fixed would round the
// value away.
#include "charts/number_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace number_text {

QString significant(double v, int digits) {
  if (std::isnan(v)) return QStringLiteral("NaN");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  if (v == 0) return QStringLiteral("0");
  const double a = std::fabs(v);
  if (a < 1e-3 || a >= 1e6) {
    // 3.50e-9: mantissa with digits-1 decimals, the exponent without padding.
    int e = static_cast<int>(std::floor(std::log10(a)));
    double m = v / std::pow(10.0, e);
    // Rounding may carry into the next decade: 9.996e-4 -> 1.00e-3.
    const double scale = std::pow(10.0, digits - 1);
    if (std::fabs(std::round(m * scale) / scale) >= 10.0) {
      ++e;
      m /= 10.0;
    }
    return QStringLiteral("%1e%2").arg(QString::number(m, 'f', digits - 1)).arg(e);
  }
  // Fixed: as many decimals as the significant digits need (0.00123, 2.35, 140).
  const int magnitude = static_cast<int>(std::floor(std::log10(a)));
  int decimals = std::max(0, digits - 1 - magnitude);
  QString text = QString::number(v, 'f', decimals);
  // 0.9996 at 3 digits rounds to 1.000: one decimal too many now.
  if (decimals > 0 && std::fabs(text.toDouble()) >= std::pow(10.0, magnitude + 1))
    text = QString::number(v, 'f', decimals - 1);
  return text;
}

QString signedSignificant(double v, int digits) {
  const QString t = significant(v, digits);
  return v > 0 && std::isfinite(v) ? QStringLiteral("+") + t : t;
}

QString ratio(double v) {
  if (!std::isfinite(v)) return significant(v);
  return significant(v, 3) + QLatin1Char('x');
}

QString percent(double fraction) {
  if (std::isnan(fraction)) return QStringLiteral("NaN");
  if (fraction <= 0) return QStringLiteral("0%");
  const double p = 100.0 * fraction;
  // Two significant digits below 1% ("0.0031%"), scientific below 1e-4 %.
  if (p < 1e-4) return significant(p, 2) + QLatin1Char('%');
  if (p < 1) return QString::number(p, 'g', 2) + QLatin1Char('%');
  return QString::number(p, 'f', p < 10 ? 2 : 1) + QLatin1Char('%');
}

QString exactDecimal(double v) {
  if (std::isnan(v)) return QStringLiteral("NaN");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  if (v == 0) return std::signbit(v) ? QStringLiteral("-0") : QStringLiteral("0");
  // A double's fraction ends after at most 1074 binary places, and so after
  // as many decimal ones; printf's %f prints it exactly (glibc, and any
  // C library that rounds correctly), then the trailing zeros go.
  char buffer[1500];  // 309 integer digits at most, 1074 decimals
  std::snprintf(buffer, sizeof(buffer), "%.1074f", v);
  QString text = QString::fromLatin1(buffer);
  while (text.endsWith(QLatin1Char('0'))) text.chop(1);
  if (text.endsWith(QLatin1Char('.'))) text.chop(1);
  return text;
}

}  // namespace number_text
