#include "dpkit/accounting/report_rounding.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

double Parse(const std::string& text) { return std::strtod(text.c_str(), nullptr); }

TEST(ReportRoundingTest, UpperBoundIsRoundedUpNotToNearest) {
  // The page's example (issue 15): the certified upper bound 3.706249 at 5 digits.
  EXPECT_EQ(FormatUpperBound(3.706249, 5), "3.7063");
  EXPECT_EQ(FormatLowerBound(3.706249, 5), "3.7062");
  EXPECT_EQ(FormatRounded(3.706249, 5, Rounding::kNearest), "3.7062");
}

TEST(ReportRoundingTest, ExactDecimalsAreNotMoved) {
  EXPECT_EQ(FormatUpperBound(2.5, 3), "2.5");
  EXPECT_EQ(FormatLowerBound(2.5, 3), "2.5");
  EXPECT_EQ(FormatUpperBound(0, 3), "0");
  EXPECT_EQ(FormatUpperBound(1e-5, 4), "1e-05");
  EXPECT_EQ(FormatUpperBound(123456, 7), "123456");
}

TEST(ReportRoundingTest, CarriesAndBorrowsAcrossPowersOfTen) {
  EXPECT_EQ(FormatUpperBound(9.99995, 5), "10");
  EXPECT_EQ(FormatUpperBound(99999.5, 5), "1e+05");
  // 0.1 is slightly above 1/10 as a double; the lower bound at 1 digit stays 0.1 only if
  // the text parses to <= the value: it parses to the same double, so it does.
  EXPECT_EQ(FormatLowerBound(0.1, 1), "0.1");
  EXPECT_EQ(FormatLowerBound(1.0000001, 1), "1");
  EXPECT_EQ(FormatLowerBound(std::nextafter(1.0, 0.0), 3), "0.999");
}

TEST(ReportRoundingTest, NegativeValuesRoundOutwardToo) {
  EXPECT_EQ(FormatUpperBound(-1.23456, 3), "-1.23");
  EXPECT_EQ(FormatLowerBound(-1.23456, 3), "-1.24");
}

TEST(ReportRoundingTest, InfinitiesAndOverflow) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(FormatUpperBound(inf, 4), "inf");
  EXPECT_EQ(FormatLowerBound(-inf, 4), "-inf");
  // The largest double at 3 digits prints as 1.8e+308, which parses to inf: still >= it.
  EXPECT_GE(Parse(FormatUpperBound(std::numeric_limits<double>::max(), 3)),
            std::numeric_limits<double>::max());
  EXPECT_EQ(FormatUpperBound(std::nextafter(std::numeric_limits<double>::max(), 0.0), 17),
            "1.7976931348623155e+308");
}

TEST(ReportRoundingTest, FixedDecimalsRoundOutward) {
  EXPECT_EQ(FormatFixed(2.381773, 4, Rounding::kUp), "2.3818");
  EXPECT_EQ(FormatFixed(2.381521, 4, Rounding::kDown), "2.3815");
  EXPECT_EQ(FormatFixed(2.381521, 4, Rounding::kUp), "2.3816");
  EXPECT_EQ(FormatFixed(9.99995, 4, Rounding::kUp), "10.0000");
  EXPECT_EQ(FormatFixed(0.00004, 4, Rounding::kDown), "0.0000");
  EXPECT_EQ(FormatFixed(-0.00004, 4, Rounding::kDown), "-0.0001");
  EXPECT_EQ(FormatFixed(12.5, 0, Rounding::kUp), "13");
}

// The property every printed bound relies on, over random doubles of every magnitude and
// every precision: the printed upper bound parses to >= the value, the printed lower bound
// to <= it, and each is within one unit of the last printed digit. A failure is a real
// defect (no tolerance is involved); the seed is fixed so the 200,000 draws repeat.
TEST(ReportRoundingTest, PrintedBoundsParseToTheCorrectSideProperty) {
  std::mt19937_64 generator(20261125);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-320, 308);
  std::uniform_int_distribution<int> digits(1, 17);
  std::uniform_int_distribution<uint64_t> bits;
  for (int i = 0; i < 200000; ++i) {
    double value = i % 2 == 0 ? std::ldexp(mantissa(generator), exponent(generator))
                              : mantissa(generator) * std::pow(10.0, exponent(generator) / 10);
    if (i % 5 == 0) {
      const uint64_t raw = bits(generator);
      std::memcpy(&value, &raw, sizeof(value));
    }
    if (!std::isfinite(value)) continue;
    const int d = digits(generator);
    SCOPED_TRACE(testing::Message() << "value " << value << " digits " << d);
    if (std::fabs(value) < 1e15) {
      const std::string fixed_up = FormatFixed(value, d, Rounding::kUp);
      const std::string fixed_down = FormatFixed(value, d, Rounding::kDown);
      ASSERT_GE(Parse(fixed_up), value) << fixed_up;
      ASSERT_LE(Parse(fixed_down), value) << fixed_down;
    }
    const std::string up = FormatUpperBound(value, d);
    const std::string down = FormatLowerBound(value, d);
    ASSERT_GE(Parse(up), value) << up;
    ASSERT_LE(Parse(down), value) << down;
    // Outward rounding moves at most one unit of the last printed digit.
    // (A text beyond the largest double parses to +-inf, still on the correct side.)
    if (value == 0) continue;
    const double unit = std::pow(10.0, std::floor(std::log10(std::fabs(value))) - d + 1);
    if (std::isfinite(Parse(up))) {
      ASSERT_LE(Parse(up) - value, 1.0000001 * unit + std::fabs(value) * 1e-15) << up;
    }
    if (std::isfinite(Parse(down))) {
      ASSERT_LE(value - Parse(down), 1.0000001 * unit + std::fabs(value) * 1e-15) << down;
    }
  }
}

}  // namespace
}  // namespace dpkit::accounting
