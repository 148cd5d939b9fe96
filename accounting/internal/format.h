// Number formatting for the accounting core's error messages.
#ifndef DPKIT_ACCOUNTING_INTERNAL_FORMAT_H_
#define DPKIT_ACCOUNTING_INTERNAL_FORMAT_H_

#include <string>

namespace dpkit::accounting::internal {

// The shortest decimal text that parses back to exactly `value` ("-1", "0.1",
// "1e-300"; whole numbers below 1e15 without exponent, "1000000"); "nan", "inf" and "-inf" for non-finite values.
std::string FormatDouble(double value);

}  // namespace dpkit::accounting::internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_FORMAT_H_
