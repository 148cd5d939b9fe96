#include "dpkit/models/train_metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/accounting/event.h"
#include "dpkit/mechanisms/random_testing.h"

namespace dpkit::models {
namespace {

TrainOptions WithFlags(std::map<std::string, std::string> flags) {
  TrainOptions o;
  o.extra_flags = std::move(flags);
  return o;
}

TEST(TrainMetricsOptionsTest, DefaultsAreNonPrivateWithTenTimesTheTrainingRate) {
  auto options = ParseTrainMetricsOptions(WithFlags({}), 0.004);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->nonprivate());
  EXPECT_DOUBLE_EQ(options->sampling_rate, 0.04);
  EXPECT_EQ(options->noise_multiplier, 10);
  EXPECT_EQ(options->loss_bound, 5);
  // 10 q is capped at 1.
  EXPECT_EQ(ParseTrainMetricsOptions(WithFlags({}), 0.5)->sampling_rate, 1);
}

TEST(TrainMetricsOptionsTest, RejectsValuesOutsideTheirRangesInOneLine) {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"train_metrics", "exact"},
           {"train_metrics_sampling_rate", "1.5"},
           {"train_metrics_sampling_rate", "-0.1"},
           {"train_metrics_sampling_rate", "nan"},
           {"train_metrics_noise", "0.01"},
           {"train_metrics_noise", "inf"},
           {"train_metrics_loss_bound", "0"},
           {"train_metrics_loss_bound", "1e300"}}) {
    auto options = ParseTrainMetricsOptions(WithFlags({{flag, value}}), 0.01);
    ASSERT_FALSE(options.ok()) << flag << "=" << value;
    const std::string message(options.status().message());
    EXPECT_NE(message.find("--" + flag), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(TrainMetricsEventTest, IsTheTwoQueriesCollapsedIntoOneSampledGaussian) {
  TrainMetricsOptions options;
  options.mode = "private";
  options.sampling_rate = 0.1;
  options.noise_multiplier = 4;
  auto event = TrainMetricsEvent(options);
  ASSERT_TRUE(event.ok()) << event.status();
  // McMahan et al. 2018, eq. 1 with clip norms L and 1 and noise z L and z:
  // (1/z^2 + 1/z^2)^(-1/2) = z / sqrt(2).
  auto expected = accounting::Event::PoissonSampled(
      0.1, *accounting::Event::Gaussian(4 / std::sqrt(2.0)));
  EXPECT_EQ(event->ToJson(), expected->ToJson());
}

TEST(ReleaseTrainMetricsTest, ClipsEachLossAndRecordsBeforeReleasing) {
  TrainMetricsOptions options;
  options.mode = "private";
  options.sampling_rate = 0.5;
  options.noise_multiplier = 1e-9;  // noise negligible against the arithmetic checked
  options.loss_bound = 2;
  // Clipped to [0, 2]: 0.5, 2 (3), 0 (-1), 2 (NaN), 2 (+inf) -> sum 6.5.
  TrainMetricsSample sample{{0.5, 3, -1, std::nan(""), std::numeric_limits<double>::infinity()},
                            {1, 0, 1, 1, 0}};
  mechanisms::SeededRandomGeneratorForTesting rng(7);
  int recorded = 0;
  auto release = ReleaseTrainMetrics(options, 20, sample, 3, rng, [&](const accounting::Event& e) {
    ++recorded;
    EXPECT_EQ(e.ToJson(), TrainMetricsEvent(options)->ToJson());
    return absl::OkStatus();
  });
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_EQ(recorded, 1);
  // Divided by the expected sample size q n = 10, not the realised 5.
  EXPECT_NEAR(release->loss, 6.5 / 10, 1e-6);
  ASSERT_TRUE(release->accuracy.has_value());
  EXPECT_NEAR(*release->accuracy, 3.0 / 10, 1e-6);
  EXPECT_DOUBLE_EQ(release->expected_examples, 10);
}

TEST(ReleaseTrainMetricsTest, AFailedRecordReleasesNothing) {
  TrainMetricsOptions options;
  options.sampling_rate = 0.5;
  mechanisms::SeededRandomGeneratorForTesting rng(1);
  auto release = ReleaseTrainMetrics(options, 10, {{1.0}, {}}, 0, rng, [](const accounting::Event&) {
    return absl::InternalError("disk full");
  });
  EXPECT_FALSE(release.ok());
}

TEST(ReleaseTrainMetricsTest, RegressionReleasesTheLossAlone) {
  TrainMetricsOptions options;
  options.sampling_rate = 1;
  options.noise_multiplier = 1e-9;
  mechanisms::SeededRandomGeneratorForTesting rng(3);
  auto release = ReleaseTrainMetrics(options, 2, {{1.0, 3.0}, {}}, 0, rng,
                                     [](const accounting::Event&) { return absl::OkStatus(); });
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_FALSE(release->accuracy.has_value());
  EXPECT_NEAR(release->loss, 2.0, 1e-6);
}

// The noise of each metric has standard deviation z C / (q n): over 4000 releases of the
// same sample the sample standard deviation is within 10 % of it. The relative standard
// error of a sample standard deviation over k = 4000 normal draws is about 1/sqrt(2k) = 1.1 %,
// so 10 % is 8.9 standard errors: false failure probability below 1e-15 per metric.
TEST(ReleaseTrainMetricsTest, NoiseHasTheStatedStandardDeviation) {
  TrainMetricsOptions options;
  options.sampling_rate = 0.25;
  options.noise_multiplier = 3;
  options.loss_bound = 4;
  const TrainMetricsSample sample{{1, 2, 3}, {1, 0, 1}};
  mechanisms::SeededRandomGeneratorForTesting rng(11);
  const int k = 4000;
  double loss_sum = 0, loss_sq = 0, acc_sum = 0, acc_sq = 0, stated_loss = 0, stated_acc = 0;
  for (int i = 0; i < k; ++i) {
    auto r = ReleaseTrainMetrics(options, 40, sample, i, rng,
                                 [](const accounting::Event&) { return absl::OkStatus(); });
    ASSERT_TRUE(r.ok());
    loss_sum += r->loss, loss_sq += r->loss * r->loss;
    acc_sum += *r->accuracy, acc_sq += *r->accuracy * *r->accuracy;
    stated_loss = r->loss_stddev, stated_acc = r->accuracy_stddev;
  }
  // Independent of the code's own figures: z C / (q n) with q n = 10.
  EXPECT_DOUBLE_EQ(stated_loss, 3.0 * 4 / 10);
  EXPECT_DOUBLE_EQ(stated_acc, 3.0 / 10);
  const auto sd = [k](double sum, double sq) {
    return std::sqrt((sq - sum * sum / k) / (k - 1));
  };
  EXPECT_NEAR(sd(loss_sum, loss_sq), 1.2, 0.12);
  EXPECT_NEAR(sd(acc_sum, acc_sq), 0.3, 0.03);
  // The means are the clipped sums over q n: 6 / 10 and 2 / 10, within 6 standard errors.
  EXPECT_NEAR(loss_sum / k, 0.6, 6 * 1.2 / std::sqrt(k));
  EXPECT_NEAR(acc_sum / k, 0.2, 6 * 0.3 / std::sqrt(k));
}

}  // namespace
}  // namespace dpkit::models
