#include "dpkit/accounting/internal/json_parse.h"

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

TEST(ParseJsonTest, RefusesNestingDeeperThanTheLimitBeforeParsing) {
  // 70,000 nested brackets overflowed the stack (a recursive dump for the error message);
  // now any depth is refused in one pass, with a short message naming the column.
  for (size_t depth : {size_t{kMaxJsonDepth + 1}, size_t{70000}, size_t{1000000}}) {
    const std::string text = std::string(depth, '[') + std::string(depth, ']');
    Result<nlohmann::json> j = ParseJson(text);
    ASSERT_FALSE(j.ok()) << depth;
    EXPECT_EQ(j.error(), "JSON nesting deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels at column " + std::to_string(kMaxJsonDepth + 1));
  }
  // At the limit, objects and arrays mixed, it parses; brackets inside strings (also
  // after an escaped quote) do not count.
  std::string deep;
  for (int i = 0; i < kMaxJsonDepth; ++i) deep += i % 2 == 0 ? "{\"a\":" : "[";
  deep += "1";
  for (int i = kMaxJsonDepth - 1; i >= 0; --i) deep += i % 2 == 0 ? "}" : "]";
  EXPECT_TRUE(ParseJson(deep).ok()) << ParseJson(deep).error();
  const std::string in_string = "[\"\\\"" + std::string(100000, '[') + "\"]";
  EXPECT_TRUE(ParseJson(in_string).ok()) << ParseJson(in_string).error();
}

TEST(ParseJsonTest, CutsTheQuotedTokenOfALongSyntaxError) {
  // An unterminated 1 MB string: nlohmann quotes the whole token it read.
  Result<nlohmann::json> j = ParseJson("\"" + std::string(1000000, 'a'));
  ASSERT_FALSE(j.ok());
  EXPECT_LT(j.error().size(), 250u) << j.error().substr(0, 300);
  EXPECT_NE(j.error().find("last read: '\"aaa"), std::string::npos) << j.error();
  EXPECT_NE(j.error().find("...'"), std::string::npos) << j.error();
  // A number too large for a double (found by ledger_fuzz_test).
  Result<nlohmann::json> number = ParseJson("[" + std::string(10000, '9') + "]");
  ASSERT_FALSE(number.ok());
  EXPECT_LT(number.error().size(), 250u) << number.error().substr(0, 300);
}

TEST(QuoteForMessageTest, EscapesControlCharactersAndCutsLongText) {
  EXPECT_EQ(QuoteForMessage("a\nb\"c"), "\"a\\nb\\\"c\"");
  const std::string quoted = QuoteForMessage(std::string(1000000, 'x'));
  EXPECT_EQ(quoted.size(), kMaxEchoedChars);
  EXPECT_EQ(quoted.substr(quoted.size() - 4), "...\"");
  EXPECT_EQ(QuoteForMessage(std::string(1000, '\n')).find('\n'), std::string::npos);
  EXPECT_FALSE(QuoteForMessage("\xff\xfe").empty());
}

}  // namespace
}  // namespace dpkit::accounting::internal
