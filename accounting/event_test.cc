#include "dpkit/accounting/event.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dpkit::accounting {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

uint64_t Bits(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

Event Gauss(double z) { return Event::Gaussian(z).value(); }

TEST(EventTest, FactoriesStoreTheirParameters) {
  const Event g = Gauss(1.1);
  EXPECT_EQ(g.kind(), EventKind::kGaussian);
  EXPECT_EQ(g.noise_multiplier(), 1.1);
  EXPECT_TRUE(g.children().empty());

  const Event lap = Event::Laplace(2.5).value();
  EXPECT_EQ(lap.kind(), EventKind::kLaplace);
  EXPECT_EQ(lap.scale(), 2.5);

  const Event pure = Event::PureDp(0.5).value();
  EXPECT_EQ(pure.kind(), EventKind::kPureDp);
  EXPECT_EQ(pure.epsilon(), 0.5);
  EXPECT_EQ(pure.delta(), 0.0);

  const Event br = Event::BoundedRange(0.25).value();
  EXPECT_EQ(br.kind(), EventKind::kBoundedRange);
  EXPECT_EQ(br.epsilon(), 0.25);
  EXPECT_EQ(br.delta(), 0.0);
  EXPECT_NE(br, Event::PureDp(0.25).value());
  EXPECT_STREQ(EventKindName(EventKind::kBoundedRange), "bounded_range");

  const Event approx = Event::ApproxDp(1.0, 1e-6).value();
  EXPECT_EQ(approx.kind(), EventKind::kApproxDp);
  EXPECT_EQ(approx.epsilon(), 1.0);
  EXPECT_EQ(approx.delta(), 1e-6);

  const Event poisson = Event::PoissonSampled(0.01, g).value();
  EXPECT_EQ(poisson.kind(), EventKind::kPoissonSampled);
  EXPECT_EQ(poisson.sampling_rate(), 0.01);
  EXPECT_EQ(poisson.inner(), g);
  ASSERT_EQ(poisson.children().size(), 1u);

  const Event swor = Event::SampledWithoutReplacement(60000, 256, g).value();
  EXPECT_EQ(swor.kind(), EventKind::kSampledWithoutReplacement);
  EXPECT_EQ(swor.population(), 60000);
  EXPECT_EQ(swor.sample_size(), 256);
  EXPECT_EQ(swor.inner(), g);

  const Event self = Event::SelfComposed(poisson, 1000).value();
  EXPECT_EQ(self.kind(), EventKind::kSelfComposed);
  EXPECT_EQ(self.count(), 1000);
  EXPECT_EQ(self.inner(), poisson);

  const Event composed = Event::Composed({g, lap, pure}).value();
  EXPECT_EQ(composed.kind(), EventKind::kComposed);
  ASSERT_EQ(composed.children().size(), 3u);
  EXPECT_EQ(composed.children()[1], lap);
}

TEST(EventTest, DpSgdEventIsSelfComposedPoissonGaussian) {
  const Event e = DpSgdEvent(0.0025, 1.3, 9000).value();
  EXPECT_EQ(e, Event::SelfComposed(Event::PoissonSampled(0.0025, Gauss(1.3)).value(), 9000)
                   .value());
}

TEST(EventTest, EqualityComparesStructure) {
  EXPECT_EQ(Gauss(1.0), Gauss(1.0));
  EXPECT_NE(Gauss(1.0), Gauss(1.5));
  EXPECT_NE(Gauss(1.0), Event::Laplace(1.0).value());
  EXPECT_NE(DpSgdEvent(0.01, 1.0, 10).value(), DpSgdEvent(0.01, 1.0, 11).value());
  EXPECT_NE(Event::Composed({Gauss(1.0)}).value(),
            Event::Composed({Gauss(1.0), Gauss(1.0)}).value());
}

// Every factory rejects each out-of-range value with a message naming the parameter,
// its range and the value given.
TEST(EventTest, GaussianRejectsNonPositiveOrNonFiniteNoise) {
  for (double z : {0.0, -1.0, kInf, -kInf, kNan}) {
    Result<Event> e = Event::Gaussian(z);
    ASSERT_FALSE(e.ok()) << z;
    EXPECT_NE(e.error().find("noise_multiplier must be finite and > 0"), std::string::npos)
        << e.error();
  }
  EXPECT_EQ(Event::Gaussian(-1).error(), "noise_multiplier must be finite and > 0, got -1");
}

TEST(EventTest, LaplaceRejectsNonPositiveOrNonFiniteScale) {
  for (double b : {0.0, -2.0, kInf, kNan}) {
    Result<Event> e = Event::Laplace(b);
    ASSERT_FALSE(e.ok()) << b;
    EXPECT_NE(e.error().find("scale must be finite and > 0"), std::string::npos);
  }
}

TEST(EventTest, DiscreteGaussianStoresSigmaAndIntegerSensitivity) {
  const Event dg = Event::DiscreteGaussian(1536.5, 1025).value();
  EXPECT_EQ(dg.kind(), EventKind::kDiscreteGaussian);
  EXPECT_EQ(dg.sigma(), 1536.5);
  EXPECT_EQ(dg.sensitivity(), 1025);
  EXPECT_EQ(dg.noise_multiplier(), 0.0);
  EXPECT_TRUE(dg.children().empty());
  EXPECT_STREQ(EventKindName(EventKind::kDiscreteGaussian), "discrete_gaussian");
  // Not the continuous Gaussian of the same noise multiplier, nor one of another
  // sensitivity.
  EXPECT_NE(Event::DiscreteGaussian(2, 1).value(), Gauss(2));
  EXPECT_NE(Event::DiscreteGaussian(2, 1).value(), Event::DiscreteGaussian(2, 2).value());
  EXPECT_EQ(Event::DiscreteGaussian(2, 1).value(), Event::DiscreteGaussian(2, 1).value());
  EXPECT_TRUE(Event::DiscreteGaussian(1e-3, kMaxDiscreteSensitivity).ok());
}

TEST(EventTest, DiscreteGaussianRejectsBadSigmaOrSensitivity) {
  for (double sigma : {0.0, -1.0, kInf, kNan}) {
    Result<Event> e = Event::DiscreteGaussian(sigma, 1);
    ASSERT_FALSE(e.ok()) << sigma;
    EXPECT_NE(e.error().find("sigma must be finite and > 0"), std::string::npos) << e.error();
  }
  for (int64_t sensitivity : {int64_t{0}, int64_t{-3}, kMaxDiscreteSensitivity + 1, INT64_MAX}) {
    Result<Event> e = Event::DiscreteGaussian(1.0, sensitivity);
    ASSERT_FALSE(e.ok()) << sensitivity;
    EXPECT_NE(e.error().find("sensitivity must be an integer in [1, 2^40], got " +
                             std::to_string(sensitivity)),
              std::string::npos)
        << e.error();
  }
}

TEST(EventTest, PureDpRejectsNegativeOrNonFiniteEpsilon) {
  EXPECT_TRUE(Event::PureDp(0.0).ok());
  for (double eps : {-0.1, kInf, kNan}) {
    Result<Event> e = Event::PureDp(eps);
    ASSERT_FALSE(e.ok()) << eps;
    EXPECT_NE(e.error().find("epsilon must be finite and >= 0"), std::string::npos);
  }
}

TEST(EventTest, BoundedRangeRejectsNegativeOrNonFiniteEpsilon) {
  EXPECT_TRUE(Event::BoundedRange(0.0).ok());
  for (double eps : {-0.1, kInf, kNan}) {
    Result<Event> e = Event::BoundedRange(eps);
    ASSERT_FALSE(e.ok()) << eps;
    EXPECT_NE(e.error().find("epsilon must be finite and >= 0"), std::string::npos);
  }
}

TEST(EventTest, ApproxDpRejectsBadEpsilonOrDelta) {
  EXPECT_TRUE(Event::ApproxDp(0.0, 0.0).ok());
  EXPECT_TRUE(Event::ApproxDp(1.0, 1.0).ok());
  EXPECT_NE(Event::ApproxDp(-1.0, 0.1).error().find("epsilon must be finite and >= 0"),
            std::string::npos);
  for (double delta : {-1e-9, 1.0000001, kNan, kInf}) {
    Result<Event> e = Event::ApproxDp(1.0, delta);
    ASSERT_FALSE(e.ok()) << delta;
    EXPECT_NE(e.error().find("delta must be in [0, 1]"), std::string::npos);
  }
}

TEST(EventTest, PoissonSampledRejectsRateOutsideUnitInterval) {
  EXPECT_TRUE(Event::PoissonSampled(1.0, Gauss(1)).ok());
  for (double q : {0.0, -0.5, 1.5, kNan, kInf}) {
    Result<Event> e = Event::PoissonSampled(q, Gauss(1));
    ASSERT_FALSE(e.ok()) << q;
    EXPECT_NE(e.error().find("sampling_rate must be in (0, 1]"), std::string::npos);
  }
  EXPECT_EQ(Event::PoissonSampled(1.5, Gauss(1)).error(),
            "sampling_rate must be in (0, 1], got 1.5");
}

TEST(EventTest, SampledWithoutReplacementRejectsBadSizes) {
  EXPECT_TRUE(Event::SampledWithoutReplacement(10, 10, Gauss(1)).ok());
  EXPECT_EQ(Event::SampledWithoutReplacement(0, 1, Gauss(1)).error(),
            "population must be >= 1, got 0");
  EXPECT_EQ(Event::SampledWithoutReplacement(10, 0, Gauss(1)).error(),
            "sample_size must be in [1, population=10], got 0");
  EXPECT_EQ(Event::SampledWithoutReplacement(10, 11, Gauss(1)).error(),
            "sample_size must be in [1, population=10], got 11");
}

TEST(EventTest, SelfComposedRejectsNonPositiveCount) {
  EXPECT_EQ(Event::SelfComposed(Gauss(1), 0).error(), "count must be >= 1, got 0");
  EXPECT_EQ(Event::SelfComposed(Gauss(1), -5).error(), "count must be >= 1, got -5");
}

TEST(EventTest, ComposedRejectsEmptyList) {
  EXPECT_EQ(Event::Composed({}).error(), "events of a composed event must be non-empty");
}

TEST(EventTest, DpSgdEventRejectsEachBadParameter) {
  EXPECT_NE(DpSgdEvent(0.0, 1.0, 10).error().find("sampling_rate"), std::string::npos);
  EXPECT_NE(DpSgdEvent(0.1, 0.0, 10).error().find("noise_multiplier"), std::string::npos);
  EXPECT_EQ(DpSgdEvent(0.1, 1.0, 0).error(), "steps must be >= 1, got 0");
}

TEST(EventJsonTest, WritesTheDocumentedFormat) {
  EXPECT_EQ(Gauss(1.1).ToJsonString(), R"({"noise_multiplier":1.1,"type":"gaussian"})");
  const Event e = DpSgdEvent(0.01, 1.1, 100).value();
  const nlohmann::json j = e.ToJson();
  EXPECT_EQ(j["type"], "self_composed");
  EXPECT_EQ(j["count"], 100);
  EXPECT_EQ(j["event"]["type"], "poisson_sampled");
  EXPECT_EQ(j["event"]["sampling_rate"], 0.01);
  EXPECT_EQ(j["event"]["event"]["type"], "gaussian");
  const nlohmann::json c =
      Event::Composed({Event::ApproxDp(1, 1e-6).value(),
                       Event::SampledWithoutReplacement(100, 7, Event::PureDp(2).value())
                           .value()})
          .value()
          .ToJson();
  EXPECT_EQ(c["type"], "composed");
  EXPECT_EQ(c["events"][0]["type"], "approx_dp");
  EXPECT_EQ(c["events"][0]["delta"], 1e-6);
  EXPECT_EQ(c["events"][1]["type"], "sampled_without_replacement");
  EXPECT_EQ(c["events"][1]["population"], 100);
  EXPECT_EQ(c["events"][1]["sample_size"], 7);
  EXPECT_EQ(c["events"][1]["event"]["type"], "pure_dp");
  EXPECT_EQ(Event::BoundedRange(0.5).value().ToJsonString(),
            R"({"epsilon":0.5,"type":"bounded_range"})");
}

TEST(EventJsonTest, BoundedRangeReadsBackAndValidates) {
  Result<Event> e = Event::FromJsonString(R"({"type":"bounded_range","epsilon":0.125})");
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(*e, Event::BoundedRange(0.125).value());
  Result<Event> negative = Event::FromJsonString(R"({"type":"bounded_range","epsilon":-1})");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().find("epsilon must be finite and >= 0"), std::string::npos);
  Result<Event> extra =
      Event::FromJsonString(R"({"type":"bounded_range","epsilon":1,"delta":0})");
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.error().find("unknown field \"delta\""), std::string::npos);
  Result<Event> missing = Event::FromJsonString(R"({"type":"bounded_range"})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("missing field \"epsilon\""), std::string::npos);
}

TEST(EventJsonTest, DiscreteGaussianWritesReadsBackAndValidates) {
  const Event dg = Event::DiscreteGaussian(1536.5, 1025).value();
  EXPECT_EQ(dg.ToJsonString(), R"({"sensitivity":1025,"sigma":1536.5,"type":"discrete_gaussian"})");
  Result<Event> back =
      Event::FromJsonString(R"({"type":"discrete_gaussian","sigma":0.1,"sensitivity":3})");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, Event::DiscreteGaussian(0.1, 3).value());
  // sigma given as a JSON integer is a number like any other.
  back = Event::FromJsonString(R"({"type":"discrete_gaussian","sigma":7,"sensitivity":1})");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->sigma(), 7.0);
  // Random sigmas and sensitivities round-trip bit for bit (fixed seed).
  std::mt19937_64 rng(20261123);
  std::uniform_int_distribution<uint64_t> bits_dist(1, (uint64_t{0x7FEF} << 48) - 1);
  std::uniform_int_distribution<int64_t> sens_dist(1, kMaxDiscreteSensitivity);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t bits = bits_dist(rng);
    double sigma;
    std::memcpy(&sigma, &bits, sizeof(sigma));
    const Event e = Event::DiscreteGaussian(sigma, sens_dist(rng)).value();
    Result<Event> r = Event::FromJsonString(e.ToJsonString());
    ASSERT_TRUE(r.ok()) << r.error();
    ASSERT_EQ(Bits(r->sigma()), Bits(sigma)) << e.ToJsonString();
    ASSERT_EQ(r->sensitivity(), e.sensitivity());
  }
}

TEST(EventJsonTest, EveryKindRoundTrips) {
  const Event tree =
      Event::Composed(
          {DpSgdEvent(0.0042666, 1.3, 14063).value(), Event::Laplace(0.3).value(),
           Event::PureDp(0.0).value(), Event::ApproxDp(0.7, 1e-9).value(),
           Event::PoissonSampled(0.5, Event::DiscreteGaussian(2.5, 3).value()).value(),
           Event::PoissonSampled(
               0.01, Event::Composed({Event::SelfComposed(Event::BoundedRange(0.1).value(), 8)
                                          .value(),
                                      Gauss(1.5)})
                         .value())
               .value(),
           Event::SampledWithoutReplacement(INT64_MAX, 3, Gauss(2)).value(),
           Event::SelfComposed(Event::Composed({Gauss(5), Gauss(6)}).value(), INT64_MAX)
               .value()})
          .value();
  Result<Event> back = Event::FromJsonString(tree.ToJsonString());
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, tree);
  EXPECT_EQ(back->ToJsonString(), tree.ToJsonString());
  Result<Event> from_json = Event::FromJson(tree.ToJson());
  ASSERT_TRUE(from_json.ok());
  EXPECT_EQ(*from_json, tree);
}

// 10^5 random doubles, spread over all binades that the factories accept, survive
// ToJsonString -> FromJsonString bit for bit (fixed seed; deterministic).
TEST(EventJsonTest, RandomDoublesRoundTripBitForBit) {
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<uint64_t> bits_dist(0, (uint64_t{0x7FEF} << 48) - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 100000; ++i) {
    // Random bit pattern of a positive finite double (subnormals included).
    uint64_t bits = bits_dist(rng) + 1;
    double z;
    std::memcpy(&z, &bits, sizeof(z));
    double q = unit(rng);
    if (q == 0) q = 0.5;
    const Event e = Event::PoissonSampled(q, Gauss(z)).value();
    Result<Event> back = Event::FromJsonString(e.ToJsonString());
    ASSERT_TRUE(back.ok()) << back.error();
    ASSERT_EQ(Bits(back->inner().noise_multiplier()), Bits(z)) << e.ToJsonString();
    ASSERT_EQ(Bits(back->sampling_rate()), Bits(q)) << e.ToJsonString();
  }
}

TEST(EventJsonTest, AcceptsIntegersWhereDoublesAreExpected) {
  Result<Event> e = Event::FromJsonString(R"({"type":"gaussian","noise_multiplier":2})");
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e->noise_multiplier(), 2.0);
}

// Each malformed input yields an error that says what is wrong.
struct BadJsonCase {
  const char* text;
  const char* expected_substring;
};

TEST(EventJsonTest, RejectsEveryMalformedInputWithAClearMessage) {
  const BadJsonCase cases[] = {
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"{\"type\":\"gaussian\",", "not valid JSON"},
      {"{\"type\":\"gaussian\",\"noise_multiplier\":1.0} trailing", "not valid JSON"},
      {"{\"type\":\"gaussian\",\"noise_multiplier\":1e400}", "not valid JSON"},
      {"{\"type\":\"gaussian\",\"noise_multiplier\":NaN}", "not valid JSON"},
      {"[1,2]", "event must be a JSON object"},
      {"42", "event must be a JSON object"},
      {"{}", "missing field \"type\""},
      {"{\"type\":7}", "field \"type\" must be a string"},
      {"{\"type\":\"gauss\"}", "unknown event type \"gauss\""},
      {"{\"type\":\"gaussian\"}", "missing field \"noise_multiplier\""},
      {"{\"type\":\"gaussian\",\"noise_multiplier\":\"1\"}", "must be a number"},
      {"{\"type\":\"gaussian\",\"noise_multiplier\":null}", "must be a number"},
      {"{\"type\":\"gaussian\",\"noise_multiplier\":1,\"sigma\":2}",
       "unknown field \"sigma\""},
      {"{\"type\":\"gaussian\",\"noise_multiplier\":-1}",
       "noise_multiplier must be finite and > 0, got -1"},
      {"{\"type\":\"laplace\",\"scale\":0}", "scale must be finite and > 0, got 0"},
      {"{\"type\":\"discrete_gaussian\",\"sigma\":1}", "missing field \"sensitivity\""},
      {"{\"type\":\"discrete_gaussian\",\"sensitivity\":1}", "missing field \"sigma\""},
      {"{\"type\":\"discrete_gaussian\",\"sigma\":1,\"sensitivity\":1,\"scale\":1}",
       "unknown field \"scale\""},
      {"{\"type\":\"discrete_gaussian\",\"sigma\":0,\"sensitivity\":1}",
       "sigma must be finite and > 0, got 0"},
      {"{\"type\":\"discrete_gaussian\",\"sigma\":\"2\",\"sensitivity\":1}",
       "\"sigma\" must be a number"},
      {"{\"type\":\"discrete_gaussian\",\"sigma\":2,\"sensitivity\":1.5}",
       "\"sensitivity\" must be an integer"},
      {"{\"type\":\"discrete_gaussian\",\"sigma\":2,\"sensitivity\":0}",
       "sensitivity must be an integer in [1, 2^40], got 0"},
      {"{\"type\":\"discrete_gaussian\",\"sigma\":2,\"sensitivity\":1099511627777}",
       "sensitivity must be an integer in [1, 2^40], got 1099511627777"},
      {"{\"type\":\"pure_dp\",\"epsilon\":-0.5}", "epsilon must be finite and >= 0, got -0.5"},
      {"{\"type\":\"approx_dp\",\"epsilon\":1}", "missing field \"delta\""},
      {"{\"type\":\"approx_dp\",\"epsilon\":1,\"delta\":2}", "delta must be in [0, 1], got 2"},
      {"{\"type\":\"poisson_sampled\",\"sampling_rate\":0.1}", "missing field \"event\""},
      {"{\"type\":\"poisson_sampled\",\"sampling_rate\":-0.1,\"event\":"
       "{\"type\":\"gaussian\",\"noise_multiplier\":1}}",
       "sampling_rate must be in (0, 1], got -0.1"},
      {"{\"type\":\"poisson_sampled\",\"sampling_rate\":0.1,\"event\":{\"type\":\"x\"}}",
       "unknown event type \"x\""},
      {"{\"type\":\"sampled_without_replacement\",\"population\":10.5,\"sample_size\":1,"
       "\"event\":{\"type\":\"pure_dp\",\"epsilon\":1}}",
       "\"population\" must be an integer"},
      {"{\"type\":\"sampled_without_replacement\",\"population\":10,\"sample_size\":-1,"
       "\"event\":{\"type\":\"pure_dp\",\"epsilon\":1}}",
       "sample_size must be in [1, population=10], got -1"},
      {"{\"type\":\"self_composed\",\"count\":18446744073709551615,"
       "\"event\":{\"type\":\"pure_dp\",\"epsilon\":1}}",
       "\"count\" must be at most 9223372036854775807"},
      {"{\"type\":\"self_composed\",\"count\":0,\"event\":{\"type\":\"pure_dp\",\"epsilon\":1}}",
       "count must be >= 1, got 0"},
      {"{\"type\":\"self_composed\",\"count\":\"3\",\"event\":{\"type\":\"pure_dp\","
       "\"epsilon\":1}}",
       "\"count\" must be an integer"},
      {"{\"type\":\"composed\",\"events\":[]}", "must be non-empty"},
      {"{\"type\":\"composed\",\"events\":{}}", "\"events\" must be an array"},
      {"{\"type\":\"composed\",\"events\":[{\"type\":\"gaussian\",\"noise_multiplier\":0}]}",
       "noise_multiplier must be finite and > 0, got 0"},
  };
  for (const BadJsonCase& c : cases) {
    Result<Event> e = Event::FromJsonString(c.text);
    ASSERT_FALSE(e.ok()) << c.text;
    EXPECT_NE(e.error().find(c.expected_substring), std::string::npos)
        << "input: " << c.text << "\nerror: " << e.error();
    EXPECT_EQ(e.error().find('\n'), std::string::npos) << "one-line message: " << e.error();
  }
}

TEST(EventJsonTest, RejectsTreesDeeperThanTheLimit) {
  std::string text = R"({"type":"pure_dp","epsilon":1})";
  for (int i = 1; i < kMaxEventDepth; ++i) {
    text = R"({"type":"self_composed","count":1,"event":)" + text + "}";
  }
  ASSERT_TRUE(Event::FromJsonString(text).ok());
  text = R"({"type":"self_composed","count":1,"event":)" + text + "}";
  Result<Event> e = Event::FromJsonString(text);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("nesting must be at most 256"), std::string::npos);
}

TEST(EventJsonTest, DeepNestingAndLongValuesGiveShortOneLineErrors) {
  // 70,000 nested brackets overflowed the stack while the message was formatted; a 1 MB
  // type string or field name was echoed whole.
  const std::string big(1000000, 'x');
  const std::string texts[] = {
      std::string(70000, '[') + std::string(70000, ']'),
      R"({"type":"event","event":)" + std::string(70000, '[') + std::string(70000, ']') + "}",
      R"({"type":")" + big + R"("})",
      R"({"type":"pure_dp","epsilon":1,")" + big + R"(":1})",
      R"({"type":"pure_dp","epsilon":1,"a\nb":1})",
      R"({"type":"gaussian","noise_multiplier":")" + big + R"("})",
      "\"" + big,
  };
  for (const std::string& text : texts) {
    Result<Event> e = Event::FromJsonString(text);
    ASSERT_FALSE(e.ok()) << text.substr(0, 100);
    EXPECT_LE(e.error().size(), 300u) << e.error().substr(0, 400);
    EXPECT_EQ(e.error().find('\n'), std::string::npos) << e.error();
  }
}

TEST(EventTest, CheckFileRangesRefusesWhatTheAccountantsCannotAnswerQuickly) {
  // Each of these kept an accountant busy for minutes or made it fail (issue 21).
  struct Case {
    Event event;
    std::string message;
  };
  const Event one = Gauss(1);
  const std::vector<Case> cases = {
      {Event::DiscreteGaussian(0.001, kMaxDiscreteSensitivity).value(),
       "discrete_gaussian sigma / sensitivity must be >= 0.01 in a ledger or event file, got "
       "0.001 / 1099511627776"},
      {Event::PoissonSampled(0.01, Gauss(1e-308)).value(),
       "gaussian noise_multiplier must be >= 0.01 in a ledger or event file, got 1e-308"},
      {Event::Laplace(1e-300).value(),
       "laplace scale must be >= 0.0001 in a ledger or event file, got 1e-300"},
      {Event::PureDp(1e308).value(),
       "pure_dp epsilon must be in [0, 10000] in a ledger or event file, got 1e+308"},
      {Event::BoundedRange(1e5).value(), "bounded_range epsilon must be in [0, 10000]"},
      {Event::ApproxDp(1e5, 0).value(), "approx_dp epsilon must be in [0, 10000]"},
      {Event::SelfComposed(one, int64_t{1} << 62).value(),
       "self_composed count must be in [1, 1000000000]"},
      // Nested counts multiply: 10^5 under 10^5 is 10^10 repetitions.
      {Event::SelfComposed(Event::SelfComposed(one, 100000).value(), 100000).value(),
       "self_composed count must be in [1, 10000]"},
      {Event::Composed({one, Event::SelfComposed(one, kMaxFileRepetitions + 1).value()})
           .value(),
       "self_composed count must be in [1, 1000000000]"},
  };
  for (const Case& c : cases) {
    Result<void> checked = CheckFileRanges(c.event);
    ASSERT_FALSE(checked.ok()) << c.event.ToJsonString();
    EXPECT_NE(checked.error().find(c.message), std::string::npos) << checked.error();
  }
  // At the limits they are accepted.
  for (const Event& e :
       {Gauss(kMinFileNoiseMultiplier), Event::Laplace(kMinFileLaplaceScale).value(),
        Event::DiscreteGaussian(0.01 * 1024, 1024).value(),
        Event::PureDp(kMaxFileEpsilon).value(),
        Event::SelfComposed(Event::SelfComposed(one, 1000).value(), 1000000).value(),
        DpSgdEvent(0.0042666, 1.3, 14063).value()}) {
    EXPECT_TRUE(CheckFileRanges(e).ok()) << e.ToJsonString() << ": " << CheckFileRanges(e).error();
  }
}

}  // namespace
}  // namespace dpkit::accounting
