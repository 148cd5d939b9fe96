#include "dpkit/optim/sparse/sparse_dp_sgd.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/mechanisms/statistics_testing.h"
#include "dpkit/optim/sparse/private_selection.h"

namespace dpkit::optim::sparse {
namespace {

using mechanisms::SeededRandomGeneratorForTesting;

// A (non-private) selector that returns fixed rows, so that the noise and update can
// be checked on known rows.
class FixedRowsSelectorForTesting final : public RowSelector {
 public:
  explicit FixedRowsSelectorForTesting(std::vector<int64_t> rows) : rows_(std::move(rows)) {}
  absl::StatusOr<std::vector<int64_t>> Select(const SparseScores&,
                                              mechanisms::RandomGenerator&) const override {
    return rows_;
  }
  accounting::Event PrivacyEvent() const override { return *accounting::Event::PureDp(0); }
  int64_t max_selected() const override { return static_cast<int64_t>(rows_.size()); }
  double sensitivity() const override { return 1e9; }
  std::string name() const override { return "fixed"; }

 private:
  std::vector<int64_t> rows_;
};

// Example 1 touches rows 0 and 2 with gradient (3,0),(0,4) (norm 5); example 2 touches
// row 2 with (0.3, 0.4) (norm 0.5).
std::vector<SparseRowGradient> TwoExamples() {
  return {SparseRowGradient{{0, 2}, {3, 0, 0, 4}}, SparseRowGradient{{2}, {0.3f, 0.4f}}};
}

TEST(ClipFactorTest, ScalesOnlyVectorsAboveTheClipNorm) {
  EXPECT_DOUBLE_EQ(ClipFactor(5.0, 1.0), 0.2);
  EXPECT_DOUBLE_EQ(ClipFactor(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(ClipFactor(0.0, 1.0), 1.0);
}

TEST(RowSelectionScoresTest, ClipsEachExampleThenCapsEachRowScore) {
  const auto batch = TwoExamples();
  auto scores = RowSelectionScores(batch, 3, 2, /*clip_norm=*/1.0, /*selection_clip_norm=*/1.0);
  ASSERT_TRUE(scores.ok()) << scores.status();
  // Example 1 clipped by 1/5: row 0 (0.6, 0), row 2 (0, 0.8); plus example 2 on row 2:
  // (0.3, 1.2), norm sqrt(1.53) = 1.2369 > cap 1.
  ASSERT_EQ(scores->rows, (std::vector<int64_t>{0, 2}));
  EXPECT_NEAR(scores->scores[0], 0.6, 1e-7);  // float inputs: 1e-7 relative
  EXPECT_NEAR(scores->scores[1], 1.0, 1e-12);
  auto uncapped = RowSelectionScores(batch, 3, 2, 1.0, 10.0);
  ASSERT_TRUE(uncapped.ok());
  EXPECT_NEAR(uncapped->scores[1], std::sqrt(1.53), 1e-7);
}

TEST(ClippedSelectedSumTest, ClipsTheSelectedPartOfEachExample) {
  const auto batch = TwoExamples();
  const std::vector<int64_t> selected{2};
  // Example 1 on row 2: (0, 4) -> clipped to norm 2: (0, 2); example 2: (0.3, 0.4).
  const std::vector<double> sum = ClippedSelectedSum(batch, selected, 2, 2.0);
  ASSERT_EQ(sum.size(), 2u);
  EXPECT_NEAR(sum[0], 0.3, 1e-7);
  EXPECT_NEAR(sum[1], 2.4, 1e-7);
}

TEST(RowSelectionScoresTest, RejectsMalformedGradients) {
  EXPECT_FALSE(RowSelectionScores({SparseRowGradient{{0}, {1}}}, 3, 2, 1, 1).ok());
  EXPECT_FALSE(RowSelectionScores({SparseRowGradient{{3}, {1, 1}}}, 3, 2, 1, 1).ok());
  EXPECT_FALSE(RowSelectionScores({SparseRowGradient{{1, 1}, {1, 1, 1, 1}}}, 3, 2, 1, 1).ok());
  EXPECT_FALSE(RowSelectionScores({SparseRowGradient{{1}, {NAN, 1}}}, 3, 2, 1, 1).ok());
}

SparseDpSgdOptions Options() {
  SparseDpSgdOptions o;
  o.learning_rate = 0.5;
  o.clip_norm = 1.0;
  o.selection_clip_norm = 1.0;
  o.second_clip_norm = 2.0;
  o.noise_multiplier = 1.5;
  o.sampling_rate = 0.01;
  o.expected_batch_size = 4.0;
  return o;
}

TEST(SparseDpSgdTest, NoiseAndUpdateTouchOnlySelectedRows) {
  const int64_t rows = 1000, dim = 4;
  auto selector = ExponentialTopKSelector::Create(5, 1.0, 1.0);
  ASSERT_TRUE(selector.ok());
  auto sgd = SparseDpSgd::Create(Options(), rows, dim, std::move(*selector));
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  std::vector<float> table(rows * dim);
  for (size_t i = 0; i < table.size(); ++i) table[i] = 0.001f * static_cast<float>(i);
  const std::vector<float> before = table;
  SeededRandomGeneratorForTesting rng(7);
  const std::vector<SparseRowGradient> batch{
      SparseRowGradient{{3, 900}, {1, 2, 3, 4, 5, 6, 7, 8}}};
  auto stats = sgd->Step(batch, absl::MakeSpan(table), rng);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->touched_rows, 2);
  ASSERT_EQ(stats->selected_rows.size(), 5u);
  std::vector<bool> selected(rows, false);
  for (int64_t r : stats->selected_rows) selected[static_cast<size_t>(r)] = true;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < dim; ++j) {
      const size_t i = static_cast<size_t>(r * dim + j);
      if (selected[static_cast<size_t>(r)]) {
        EXPECT_NE(table[i], before[i]) << "selected row " << r << " not updated";
      } else {
        EXPECT_EQ(table[i], before[i]) << "unselected row " << r << " changed";
      }
    }
  }
}

TEST(SparseDpSgdTest, UpdateIsClippedSumPlusGaussianNoiseOfTheStatedScale) {
  // One selected row of dimension 20000: the update minus its exact noise-free value,
  // divided by learning_rate / B, must be N(0, (z C2)^2). KS test with the DKW bound at
  // alpha = 1e-6 (fails with probability <= 1e-6 for a correct implementation).
  const int64_t dim = 20000;
  SparseDpSgdOptions options = Options();
  auto sgd = SparseDpSgd::Create(options, 10, dim,
                                 std::make_shared<FixedRowsSelectorForTesting>(
                                     std::vector<int64_t>{7}));
  ASSERT_TRUE(sgd.ok());
  SparseRowGradient g;
  g.rows = {7};
  g.values.assign(dim, 0.0f);
  g.values[0] = 30.0f;  // norm 30 -> clipped to C2 = 2: coordinate 0 becomes 2.
  std::vector<float> table(10 * dim, 0.0f);
  SeededRandomGeneratorForTesting rng(17);
  ASSERT_TRUE(sgd->Step({g}, absl::MakeSpan(table), rng).ok());
  const double scale = options.learning_rate / options.expected_batch_size;
  std::vector<double> noise(dim);
  for (int64_t j = 0; j < dim; ++j) {
    const double exact = (j == 0 ? 2.0 : 0.0);
    noise[static_cast<size_t>(j)] = -table[static_cast<size_t>(7 * dim + j)] / scale - exact;
  }
  const double stddev = options.noise_multiplier * options.second_clip_norm;
  const double d = mechanisms::KolmogorovSmirnovStatistic(
      noise, [&](double x) { return mechanisms::StandardNormalCdf(x / stddev); });
  // float rounding of the table (relative 6e-8) is far below the KS resolution.
  EXPECT_LT(d, mechanisms::KolmogorovSmirnovCriticalValue(dim, 1e-6));
  for (int64_t r = 0; r < 10; ++r) {
    if (r == 7) continue;
    for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(table[static_cast<size_t>(r * dim + j)], 0.0f);
  }
}

TEST(SparseDpSgdTest, EmptyBatchStillSelectsAndAddsNoise) {
  auto selector = SparseVectorSelector::Create(3, 1.0, -50.0, 1.0);  // all pass
  ASSERT_TRUE(selector.ok());
  auto sgd = SparseDpSgd::Create(Options(), 100, 2, std::move(*selector));
  ASSERT_TRUE(sgd.ok());
  std::vector<float> table(200, 0.0f);
  SeededRandomGeneratorForTesting rng(3);
  auto stats = sgd->Step({}, absl::MakeSpan(table), rng);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->selected_rows, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_NE(table[0], 0.0f);
  EXPECT_EQ(table[6], 0.0f);
}

TEST(SparseDpSgdTest, RejectsSelectorWithTooSmallSensitivity) {
  auto selector = ExponentialTopKSelector::Create(1, 1.0, 0.5);
  ASSERT_TRUE(selector.ok());
  auto sgd = SparseDpSgd::Create(Options(), 10, 2, std::move(*selector));
  ASSERT_FALSE(sgd.ok());
  EXPECT_NE(sgd.status().message().find("sensitivity"), std::string::npos);
}

TEST(SparseDpSgdTest, RejectsBadOptionsAndTables) {
  auto make = [](SparseDpSgdOptions o) {
    return SparseDpSgd::Create(o, 10, 2, *ExponentialTopKSelector::Create(1, 1.0, 1.0)).ok();
  };
  SparseDpSgdOptions o = Options();
  EXPECT_TRUE(make(o));
  o.noise_multiplier = 0;
  EXPECT_FALSE(make(o));
  o = Options();
  o.sampling_rate = 1.5;
  EXPECT_FALSE(make(o));
  o = Options();
  o.second_clip_norm = NAN;
  EXPECT_FALSE(make(o));
  auto sgd = SparseDpSgd::Create(Options(), 10, 2, *ExponentialTopKSelector::Create(1, 1, 1));
  ASSERT_TRUE(sgd.ok());
  std::vector<float> wrong(19);
  SeededRandomGeneratorForTesting rng(1);
  EXPECT_FALSE(sgd->Step({}, absl::MakeSpan(wrong), rng).ok());
}

TEST(SparseDpSgdTest, StepEventIsPoissonSampledSelectionThenGaussian) {
  auto sgd = SparseDpSgd::Create(Options(), 10, 2, *ExponentialTopKSelector::Create(2, 1, 1));
  ASSERT_TRUE(sgd.ok());
  const accounting::Event event = sgd->StepEvent();
  ASSERT_EQ(event.kind(), accounting::EventKind::kPoissonSampled);
  EXPECT_DOUBLE_EQ(event.sampling_rate(), 0.01);
  const auto& parts = event.inner().children();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].kind(), accounting::EventKind::kSelfComposed);
  EXPECT_EQ(parts[1].kind(), accounting::EventKind::kGaussian);
  EXPECT_DOUBLE_EQ(parts[1].noise_multiplier(), 1.5);
}

}  // namespace
}  // namespace dpkit::optim::sparse
