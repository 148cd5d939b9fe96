#include "accounting/internal/json_parse.h"

#include <string>

#include "gtest/gtest.h"

namespace dpkit::accounting::internal {
namespace {

TEST(ParseJsonTest, ParsesValidText) {
  Result<nlohmann::json> j = ParseJson(R"({"a":[1,2.5,"x"],"b":null})");
  ASSERT_TRUE(j.ok()) << j.error();
  EXPECT_EQ((*j)["a"][1], 2.5);
  EXPECT_TRUE((*j)["b"].is_null());
}

TEST(ParseJsonTest, ReportsSyntaxErrorsWithPositionAndWithoutThrowing) {
  for (const char* text : {"", "{", "{\"a\":}", "[1,]", "1e400", "{\"a\":1} x", "\"\xff\""}) {
    Result<nlohmann::json> j = ParseJson(text);
    ASSERT_FALSE(j.ok()) << text;
    EXPECT_EQ(j.error().rfind("[json.exception", 0), std::string::npos) << j.error();
    EXPECT_FALSE(j.error().empty());
  }
  EXPECT_NE(ParseJson("{\"a\":}").error().find("parse error at line 1, column 6"),
            std::string::npos)
      << ParseJson("{\"a\":}").error();
}

TEST(DumpForMessageTest, CutsLongTextAndSurvivesInvalidUtf8) {
  EXPECT_EQ(DumpForMessage(nlohmann::json(std::string(200, 'a'))).size(), 80u);
  EXPECT_FALSE(DumpForMessage(nlohmann::json(std::string("\xff\xfe"))).empty());
}

}  // namespace
}  // namespace dpkit::accounting::internal
