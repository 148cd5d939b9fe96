#include "dpkit/accounting/event_json_dp_accounting.h"

#include <string>

#include "dpkit/accounting/event.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dpkit::accounting {
namespace {

Event Parse(const std::string& text) {
  Result<Event> event = EventFromAnyJsonString(text);
  EXPECT_TRUE(event.ok()) << text << ": " << event.error();
  return event.ok() ? *event : *Event::PureDp(0);
}

std::string ErrorOf(const std::string& text) {
  Result<Event> event = EventFromAnyJsonString(text);
  EXPECT_FALSE(event.ok()) << text;
  return event.error();
}

TEST(DpAccountingJsonTest, WrappedDpSgdEqualsDpSgdEvent) {
  const Event parsed = Parse(
      R"({"SelfComposedDpEvent": {"event": {"PoissonSampledDpEvent": {"sampling_probability": 0.01,)"
      R"( "event": {"GaussianDpEvent": {"noise_multiplier": 1.1}}}}, "count": 6000}})");
  EXPECT_EQ(parsed, *DpSgdEvent(0.01, 1.1, 6000));
}

TEST(DpAccountingJsonTest, FlatNamedTupleFormAndMixedSpellings) {
  const Event parsed = Parse(
      R"({"module_name": "dp_accounting.dp_event", "class_name": "ComposedDpEvent", "events": [)"
      R"({"class_name": "LaplaceDpEvent", "noise_multiplier": 2},)"
      R"({"EpsilonDeltaDpEvent": {"epsilon": 1, "delta": 1e-6}},)"
      R"({"SampledWithoutReplacementDpEvent": {"source_dataset_size": 60000, "sample_size": 256,)"
      R"( "event": {"type": "gaussian", "noise_multiplier": 2}}}]})");
  const Event expected = *Event::Composed(
      {*Event::Laplace(2), *Event::ApproxDp(1, 1e-6),
       *Event::SampledWithoutReplacement(60000, 256, *Event::Gaussian(2))});
  EXPECT_EQ(parsed, expected);
}

TEST(DpAccountingJsonTest, EpsilonDeltaWithZeroDeltaIsPureDp) {
  EXPECT_EQ(Parse(R"({"EpsilonDeltaDpEvent": {"epsilon": 0.5, "delta": 0}})"), *Event::PureDp(0.5));
  EXPECT_EQ(Parse(R"({"EpsilonDeltaDpEvent": {"epsilon": 0.5, "delta": 0.0}})"), *Event::PureDp(0.5));
  EXPECT_EQ(Parse(R"({"EpsilonDeltaDpEvent": {"epsilon": 0.5, "delta": 1e-9}})"),
            *Event::ApproxDp(0.5, 1e-9));
  EXPECT_NE(ErrorOf(R"({"EpsilonDeltaDpEvent": {"epsilon": 0.5, "delta": "0"}})").find("delta"),
            std::string::npos);
}

TEST(DpAccountingJsonTest, DpkitSpellingPassesThrough) {
  const Event event = *DpSgdEvent(0.004, 1.3, 3000);
  EXPECT_EQ(Parse(event.ToJsonString()), event);
}

TEST(DpAccountingJsonTest, ConvertsToDpkitJson) {
  Result<nlohmann::json> converted = DpAccountingToEventJson(
      nlohmann::json::parse(R"({"LaplaceDpEvent": {"noise_multiplier": 0.5}})"));
  ASSERT_TRUE(converted.ok()) << converted.error();
  EXPECT_EQ(*converted, nlohmann::json::parse(R"({"type": "laplace", "scale": 0.5})"));
}

TEST(DpAccountingJsonTest, RejectsUnsupportedUnknownMissingAndBadValues) {
  EXPECT_NE(ErrorOf(R"({"NoOpDpEvent": {}})").find("NoOpDpEvent is not supported"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"GaussianDpEvent": {"noise_multiplier": 1, "sigma": 2}})")
                .find("unknown field \"sigma\""),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"PoissonSampledDpEvent": {"event": {"GaussianDpEvent": {"noise_multiplier": 1}}}})")
                .find("missing field \"sampling_probability\""),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"GaussianDpEvent": {"noise_multiplier": -1}})").find("noise_multiplier"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"class_name": "GaussianDpEvent", "module_name": "other", "noise_multiplier": 1})")
                .find("module_name"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"ComposedDpEvent": {"events": 3}})").find("must be an array"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"SelfComposedDpEvent": {"event": {"GaussianDpEvent": {"noise_multiplier": 1}},)"
                    R"( "count": 1.5}})")
                .find("count"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{").find("not valid JSON"), std::string::npos);
}

TEST(DpAccountingJsonTest, NestingIsLimited) {
  std::string text = R"({"GaussianDpEvent": {"noise_multiplier": 1}})";
  for (int i = 0; i < kMaxEventDepth; ++i) {
    text = R"({"SelfComposedDpEvent": {"count": 1, "event": )" + text + "}}";
  }
  EXPECT_NE(ErrorOf(text).find("nesting"), std::string::npos);
}

}  // namespace
}  // namespace dpkit::accounting
