// Number text: how the charts, the gradient panel and the compare table
// write a number a user reads. Every value stays a number: a loss of 3.5e-9 is not "0.0000", a fraction below 0.01% is not
// "<0.01%".
#pragma once

#include <QString>

namespace number_text {

// `digits` significant digits; scientific below 1e-3 (and from 1e6):
// 0.123, 2.35, 140, 3.50e-9. NaN and infinities as "NaN", "inf", "-inf".
QString significant(double v, int digits = 3);
// The same with a sign: +0.0123, -3.50e-9, 0.
QString signedSignificant(double v, int digits = 3);
// A ratio: "140x", "1.00x", "0.998x".
QString ratio(double v);
// A fraction in [0, 1] as a percentage, plain text: "0%", "12.3%",
// "0.0031%", "3.1e-7%". Never "<...".
QString percent(double fraction);

// Every digit of a binary floating-point value (each one has a finite
// decimal expansion): 2^-24 is "0.000000059604644775390625". NaN, inf, -inf
// as words; -0 as "-0".
QString exactDecimal(double v);

}  // namespace number_text
