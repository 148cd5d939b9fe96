// Outward rounding of printed bounds: a certified upper bound is printed rounded UP and a
// certified lower bound rounded DOWN at the printed precision, so that the printed text,
// parsed back, is still a bound (issue 15, item 1). Rounding to nearest would print
// 3.7062 for the certified upper bound 3.706249: a false statement, however small.
//
// The decimal digits come from printf's exact binary-to-decimal conversion (glibc and
// musl both convert exactly); the last digit is then moved one unit outward when the
// correctly rounded text parses (strtod) to the wrong side of the value. The property
// every caller relies on, tested over many random values:
//   strtod(FormatUpperBound(x, d)) >= x  and  strtod(FormatLowerBound(x, d)) <= x.
#ifndef DPKIT_ACCOUNTING_REPORT_ROUNDING_H_
#define DPKIT_ACCOUNTING_REPORT_ROUNDING_H_

#include <string>

namespace dpkit::accounting {

// Which way a printed number may move: outward from the set of values it bounds.
enum class Rounding {
  kUp,       // an upper bound: the printed number is >= the value
  kDown,     // a lower bound: the printed number is <= the value
  kNearest,  // an approximation (labelled so by the caller): ordinary rounding
};

// `value` with `significant_digits` in [1, 17] significant digits in printf's %g style
// ("3.70625", "1e-05", "12345.7"), rounded as `rounding` says. "inf" / "-inf" for
// infinities and "nan" for NaN (which callers never print as a bound). Rounding up a
// value above the largest double gives "inf".
std::string FormatRounded(double value, int significant_digits, Rounding rounding);

// `value` with `decimals` in [0, 20] digits after the point, printf("%.*f") style
// ("2.3818"), rounded as `rounding` says (for tables with aligned columns).
std::string FormatFixed(double value, int decimals, Rounding rounding);

// Shorthands: an upper bound rounded up, a lower bound rounded down.
std::string FormatUpperBound(double value, int significant_digits);
std::string FormatLowerBound(double value, int significant_digits);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_REPORT_ROUNDING_H_
