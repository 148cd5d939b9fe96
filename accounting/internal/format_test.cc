#include "dpkit/accounting/internal/format.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "gtest/gtest.h"

namespace dpkit::accounting::internal {
namespace {

TEST(FormatDoubleTest, WritesShortestText) {
  EXPECT_EQ(FormatDouble(-1.0), "-1");
  EXPECT_EQ(FormatDouble(0.1), "0.1");
  EXPECT_EQ(FormatDouble(1e-300), "1e-300");
  EXPECT_EQ(FormatDouble(1.5), "1.5");
  EXPECT_EQ(FormatDouble(1e6), "1000000");
  EXPECT_EQ(FormatDouble(-0.0), "-0");
  EXPECT_EQ(FormatDouble(1e20), "1e+20");
}

TEST(FormatDoubleTest, NamesNonFiniteValues) {
  EXPECT_EQ(FormatDouble(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(FormatDouble(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FormatDouble(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(FormatDoubleTest, TextParsesBackExactly) {
  for (double v : {1.0 / 3.0, 2.0 / 3.0, 1e308, 5e-324, 0.7242234026, -123456.789e-10}) {
    EXPECT_EQ(std::strtod(FormatDouble(v).c_str(), nullptr), v);
  }
}

}  // namespace
}  // namespace dpkit::accounting::internal
