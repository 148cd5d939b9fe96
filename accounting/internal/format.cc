#include "dpkit/accounting/internal/format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dpkit::accounting::internal {

std::string FormatDouble(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  // Whole numbers below 1e15 print as integers ("1000000", not "1e+06").
  if (std::fabs(value) < 1e15 && std::floor(value) == value) {
    std::snprintf(buffer, sizeof(buffer), "%.0f", value);
    return buffer;
  }
  // 17 significant digits always round-trip an IEEE double; try fewer first.
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

}  // namespace dpkit::accounting::internal
