#include "dpkit/accounting/report_rounding.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace dpkit::accounting {
namespace {

// The decimal `digits` (a string of d digits, the first non-zero) times 10^(exponent - d + 1),
// i.e. d.ddd x 10^exponent, in %g style: fixed notation for exponents in [-5, d), with
// trailing zeros removed, as printf("%.*g", d, ...) writes it.
std::string GStyle(bool negative, std::string digits, int exponent) {
  const int d = static_cast<int>(digits.size());
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < d) {
    if (exponent >= 0) {
      std::string integer = digits.substr(0, exponent + 1);
      std::string fraction = digits.substr(exponent + 1);
      while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
      out += integer;
      if (!fraction.empty()) out += "." + fraction;
    } else {
      std::string fraction = std::string(-exponent - 1, '0') + digits;
      while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
      out += "0." + fraction;
    }
    return out;
  }
  std::string fraction = digits.substr(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  out += digits.substr(0, 1);
  if (!fraction.empty()) out += "." + fraction;
  char exp_text[16];
  std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+',
                std::abs(exponent));
  return out + exp_text;
}

// Adds one unit in the last place to a digit string; returns true on carry out of the
// first digit (the string then reads 100...0 with one digit too many, trimmed by the caller).
bool IncrementDigits(std::string* digits) {
  for (int i = static_cast<int>(digits->size()) - 1; i >= 0; --i) {
    if ((*digits)[i] != '9') {
      ++(*digits)[i];
      return false;
    }
    (*digits)[i] = '0';
  }
  digits->insert(digits->begin(), '1');
  return true;
}

// Subtracts one unit in the last place from a non-zero digit string; returns true when
// the first digit became 0 (the caller renormalises: 1000 - 1 = 0999 -> 9999 x 10^-1).
bool DecrementDigits(std::string* digits) {
  for (int i = static_cast<int>(digits->size()) - 1; i >= 0; --i) {
    if ((*digits)[i] != '0') {
      --(*digits)[i];
      return (*digits)[0] == '0';
    }
    (*digits)[i] = '9';
  }
  return true;
}

}  // namespace

std::string FormatRounded(double value, int significant_digits, Rounding rounding) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  const int d = std::clamp(significant_digits, 1, 17);
  if (value == 0) return "0";
  // Exact decimal conversion, correctly rounded to d digits: "-d.ddde+XX".
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*e", d - 1, value);
  const bool negative = buffer[0] == '-';
  const char* p = buffer + (negative ? 1 : 0);
  std::string digits;
  for (; *p != 'e'; ++p) {
    if (*p != '.') digits += *p;
  }
  int exponent = std::atoi(p + 1);
  const double printed = std::strtod(buffer, nullptr);
  const bool too_small = rounding == Rounding::kUp && printed < value;
  const bool too_large = rounding == Rounding::kDown && printed > value;
  if (rounding != Rounding::kNearest && (too_small || too_large)) {
    // Move one unit of the last digit outward: away from zero when |printed| < |value|
    // must grow, towards zero otherwise.
    const bool grow_magnitude = negative ? too_large : too_small;
    if (grow_magnitude) {
      if (IncrementDigits(&digits)) {
        digits.pop_back();
        ++exponent;
      }
    } else if (DecrementDigits(&digits)) {
      // 1000 -> 0999: one significant digit fewer; use 999...9 at the next exponent down.
      digits = std::string(d, '9');
      --exponent;
    }
    std::string candidate = GStyle(negative, digits, exponent);
    if (grow_magnitude && std::isinf(std::strtod(candidate.c_str(), nullptr))) {
      return negative ? "-inf" : "inf";
    }
    return candidate;
  }
  return GStyle(negative, digits, exponent);
}

std::string FormatFixed(double value, int decimals, Rounding rounding) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  const int places = std::clamp(decimals, 0, 20);
  char buffer[400];  // %f of the largest double has 309 integer digits
  std::snprintf(buffer, sizeof(buffer), "%.*f", places, value);
  std::string text = buffer;
  const double printed = std::strtod(text.c_str(), nullptr);
  const bool too_small = rounding == Rounding::kUp && printed < value;
  const bool too_large = rounding == Rounding::kDown && printed > value;
  if (!too_small && !too_large) return text;
  // Move one unit of the last decimal outward, on the digits with the point taken out.
  const bool negative = text[0] == '-';
  std::string digits;
  for (char ch : text) {
    if (ch >= '0' && ch <= '9') digits += ch;
  }
  const bool grow_magnitude = negative ? too_large : too_small;
  if (grow_magnitude) {
    IncrementDigits(&digits);
  } else {
    DecrementDigits(&digits);
  }
  std::string integer = digits.substr(0, digits.size() - places);
  while (integer.size() > 1 && integer[0] == '0') integer.erase(0, 1);
  if (integer.empty()) integer = "0";
  std::string out = (negative ? "-" : "") + integer;
  if (places > 0) out += "." + digits.substr(digits.size() - places);
  return out;
}

std::string FormatUpperBound(double value, int significant_digits) {
  return FormatRounded(value, significant_digits, Rounding::kUp);
}

std::string FormatLowerBound(double value, int significant_digits) {
  return FormatRounded(value, significant_digits, Rounding::kDown);
}

}  // namespace dpkit::accounting
