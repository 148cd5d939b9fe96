#include "dpkit/accounting/internal/pld_fft_composition.h"

#include <cmath>
#include <vector>

#include "dpkit/accounting/internal/pld_component_pmfs.h"
#include "dpkit/accounting/internal/pld_delta_curve.h"
#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

// delta(eps) of mu-GDP (Dong, Roth, Su 2019, Cor. 2.13); the T-fold Gaussian with noise
// multiplier s is exactly mu-GDP with mu = sqrt(T)/s (ibid., Cor. 3.3).
long double GdpDelta(long double mu, long double eps) {
  auto phi = [](long double z) { return 0.5L * std::erfc(-z / std::sqrt(2.0L)); };
  return phi(-eps / mu + mu / 2) - std::exp(eps) * phi(-eps / mu - mu / 2);
}

std::vector<ComponentPmfs> Gaussian(double sigma, double count, double h) {
  std::vector<ComponentPmfs> comps(1);
  const Mechanism m{Base::kGaussian, sigma, 1.0, 0};
  EXPECT_TRUE(BuildContinuousPmfs(m, Direction::kRemove, h, 1e-15L, &comps[0].upper,
                                  &comps[0].lower)
                  .ok());
  FillLogs(&comps[0].upper);
  FillLogs(&comps[0].lower);
  comps[0].count = count;
  return comps;
}

TEST(PldFftCompositionTest, ComposedGaussianBracketsTheExactDelta) {
  const double h = 2e-3;
  const auto comps = Gaussian(5.0, 100, h);  // mu = 2
  RealFft fft;
  for (long double eps : {0.5L, 2.0L, 4.0L}) {
    const Query query{Query::Kind::kDeltaAtEpsilon, static_cast<double>(eps)};
    auto up = Compose(comps, Bound::kUpper, h, query, 1e-4, &fft);
    auto lo = Compose(comps, Bound::kLower, h, query, 1e-4, &fft);
    ASSERT_TRUE(up.ok() && lo.ok());
    const long double exact = GdpDelta(2, eps);
    const long double d_up = DeltaAt(MakeCurve(*up, Bound::kUpper), eps);
    const long double d_lo = DeltaAt(MakeCurve(*lo, Bound::kLower), eps);
    EXPECT_GE(d_up, exact);
    EXPECT_LE(d_lo, exact);
    EXPECT_LT(d_up / exact, 1 + 1e-3L) << static_cast<double>(eps);
    EXPECT_GT(d_lo / exact, 1 - 1e-3L) << static_cast<double>(eps);
    // Tilted towards the target where it lies above the mean loss mu^2/2 = 2.
    if (eps > 2) {
      EXPECT_GT(up->lambda, 0);
    }
    EXPECT_EQ(up->n, FftSize(up->n));
  }
}

TEST(PldFftCompositionTest, FftSizeIsTheSmallestFastLength) {
  EXPECT_EQ(FftSize(1), 4);
  EXPECT_EQ(FftSize(13), 16);  // 4 * 3 = 12 < 13 <= 4 * 4
  EXPECT_EQ(FftSize(17), 20);
  EXPECT_EQ(FftSize(1000), 1000);
  for (int64_t n : {7, 99, 4097, 1000001}) {
    const int64_t f = FftSize(n);
    EXPECT_GE(f, n);
    int64_t r = f / 4;
    EXPECT_EQ(f % 4, 0);
    for (int64_t p : {2, 3, 5}) {
      while (r % p == 0) r /= p;
    }
    EXPECT_EQ(r, 1) << f;
  }
}

TEST(PldFftCompositionTest, TiltMinimisesTheChernoffEstimate) {
  // For a Gaussian loss law N(m, 2m) (m = mu^2/2) K(t) = m t + m t^2, and the delta(eps)
  // estimate K(t) - t eps is smallest at t = (eps - m) / (2m).
  const double h = 1e-3;
  const auto comps = Gaussian(5.0, 100, h);
  const std::vector<Coarse> coarse = {Coarsen(comps[0].upper, h)};
  const ld t = ChooseTilt(coarse, {100}, Query{Query::Kind::kDeltaAtEpsilon, 4.0});
  EXPECT_NEAR(static_cast<double>(t), (4.0 - 2.0) / 4.0, 0.01);
  const Cumulants k = CoarseCumulants(coarse, {100}, 0);
  EXPECT_NEAR(static_cast<double>(k.k1), 2.0, 1e-3);  // mean m = mu^2/2
  EXPECT_NEAR(static_cast<double>(k.k2), 4.0, 2e-2);  // variance 2m
}

// A TransformCache reused across powers of one PMF object (the decomposed bound's block
// law) returns the compositions computed without it, bit for bit, and a different PMF
// object is transformed anew, not served the cached transform.
TEST(PldFftCompositionTest, TransformCacheChangesNoComposition) {
  const double h = 2e-3;
  auto comps = Gaussian(5.0, 100, h);
  // Another PMF object on the same support (the same window size, so only the key's PMF
  // address tells the two apart): half of one cell's mass moved to the next.
  auto other = comps;
  Pmf& moved = other[0].upper;
  const size_t mid = moved.mass.size() / 2;
  moved.mass[mid + 1] += moved.mass[mid] / 2;
  moved.mass[mid] /= 2;
  FillLogs(&moved);
  const Query query{Query::Kind::kDeltaAtEpsilon, 2.0};
  RealFft fft;
  TransformCache cache;
  StageOptions cached{0.5L, WindowCover::kTarget, 0, 0, &cache};
  StageOptions plain{0.5L, WindowCover::kTarget, 0, 0, nullptr};
  const auto expect_same = [&](const std::vector<ComponentPmfs>& c) {
    auto a = Compose(c, Bound::kUpper, h, query, 1e-4, &fft, &cached);
    auto b = Compose(c, Bound::kUpper, h, query, 1e-4, &fft, &plain);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->n, b->n);
    EXPECT_EQ(a->window_start, b->window_start);
    EXPECT_TRUE(a->tilted == b->tilted);
    EXPECT_EQ(a->entry_error, b->entry_error);
    EXPECT_EQ(a->log_scale, b->log_scale);
    EXPECT_EQ(cache.pmf, &c[0].upper);
  };
  for (double count : {100.0, 99.0, 98.0}) {
    comps[0].count = count;
    expect_same(comps);
  }
  other[0].count = 98;
  const int64_t n = cache.n;
  expect_same(other);
  EXPECT_EQ(cache.n, n);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
