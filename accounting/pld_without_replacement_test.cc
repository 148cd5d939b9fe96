// End-to-end tests of the PLD accountant on sampling without replacement under replace-one
// adjacency (accounting/internal/pld_replace_one.cc), against independent computations:
// quadrature of the hockey stick of the constructed pairs (one and two steps), brute force
// over every batch of tiny datasets, the RDP bound of Wang, Balle, Kasiviswanathan 2019 and
// the closed form of the unsampled Gaussian.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "boost/math/quadrature/gauss_kronrod.hpp"
#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/internal/pld_quadrature_testing.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/rdp.h"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

using pld_testing::Density;
using pld_testing::Directions;
using pld_testing::GaussianDirections;
using pld_testing::HockeyStick;
using pld_testing::Normal;

using GK = boost::math::quadrature::gauss_kronrod<long double, 61>;

Event Wor(int64_t n, int64_t m, double z, int64_t steps) {
  const Event step = *Event::SampledWithoutReplacement(n, m, *Event::Gaussian(z));
  return steps == 1 ? step : *Event::SelfComposed(step, steps);
}

long double Phi(long double x) { return std::erfc(-x / std::sqrt(2.0L)) / 2; }

// One step: at eps >= 0 the curve of C_p(f) is the remove direction's (R1), and the
// explicit pair's is the same, so both bounds bracket the quadrature value.
TEST(PldWithoutReplacementTest, OneStepBracketsTheRemoveCurveByQuadrature) {
  const Directions d = GaussianDirections(0.8, 0.3);
  for (const double eps : {0.0, 0.25, 1.0, 2.0}) {
    auto b = PldDelta(Wor(10, 3, 0.8, 1), eps);
    ASSERT_TRUE(b.ok()) << b.error();
    const long double exact = d.Remove(eps);
    EXPECT_LE(b->delta_lower, exact * (1 + 1e-12L)) << "eps " << eps;
    EXPECT_GE(b->delta_upper, exact * (1 - 1e-12L)) << "eps " << eps;
    EXPECT_LE(b->delta_upper - b->delta_lower, 2e-3 * exact) << "eps " << eps;
  }
  auto e = PldEpsilon(Wor(10, 3, 0.8, 1), 1e-3);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_LE(d.Remove(e->epsilon_upper), 1e-3L * (1 + 1e-9L));
  EXPECT_GE(d.Remove(e->epsilon_lower), 1e-3L * (1 - 1e-9L));
}

// Two steps: the analysis is the 2-fold composition of the symmetric PLD w of C_p(f):
// for y > 1/2 (loss L(y) = log(1 - p + p e^{(2y-1)/(2z^2)}) > 0) an atom at L(y) of mass
// mix(y) dy and one at -L(y) of mass A(y) dy, and w0 = (1 - p)(1 - 2 Phi(-1/(2z))) at 0;
// delta_2(eps) = E_{l ~ w} delta_g(eps - l), with delta_g = max(R, D_add) in closed form
// (checked against quadrature in pld_replace_one_test), the outer integral by quadrature.
// The explicit pair's is max over the directions of E_{y ~ P} delta(eps - L(y)).
struct TwoSteps {
  long double z, p;
  long double Remove(long double eps) const { return pld_testing::GaussianRemoveCurve(z, p, eps); }
  long double Add(long double eps) const { return pld_testing::GaussianAddCurve(z, p, eps); }
  long double Loss(long double y) const {
    return std::log1p(p * std::expm1((2 * y - 1) / (2 * z * z)));
  }
  long double Mix(long double y) const { return (1 - p) * Normal(y, 0, z) + p * Normal(y, 1, z); }
  long double Curve(long double eps) const { return std::max(Remove(eps), Add(eps)); }
  long double Integrate(const std::function<long double(long double)>& f, long double lo,
                        long double hi) const {
    long double sum = 0;
    for (int i = 0; i < 40; ++i) {
      sum += GK::integrate(f, lo + (hi - lo) * i / 40, lo + (hi - lo) * (i + 1) / 40, 10, 1e-10L);
    }
    return sum;
  }
  long double Analysis(long double eps) const {
    const long double w0 = (1 - p) * (1 - 2 * Phi(-1 / (2 * z)));
    const auto f = [&](long double y) {
      const long double l = Loss(y);
      return Mix(y) * Curve(eps - l) + Normal(y, 0, z) * Curve(eps + l);
    };
    return w0 * Curve(eps) + Integrate(f, 0.5L, 1 + 12 * z);
  }
  long double Realized(long double eps) const {
    const auto remove = [&](long double y) { return Mix(y) * Remove(eps - Loss(y)); };
    const auto add = [&](long double y) { return Normal(y, 0, z) * Add(eps + Loss(y)); };
    return std::max(Integrate(remove, -12 * z, 1 + 12 * z), Integrate(add, -12 * z, 1 + 12 * z));
  }
};

TEST(PldWithoutReplacementTest, TwoStepsBracketTheComposedAnalysisAndTheExplicitPair) {
  const TwoSteps two{0.8, 0.3};
  for (const double eps : {0.5, 1.5}) {
    auto b = PldDelta(Wor(10, 3, 0.8, 2), eps);
    ASSERT_TRUE(b.ok()) << b.error();
    const long double analysis = two.Analysis(eps), realized = two.Realized(eps);
    // The reference integrals are accurate to about 1e-10 (relative tolerance 1e-10).
    EXPECT_GE(b->delta_upper, analysis - 1e-9L) << "eps " << eps;
    EXPECT_LE(b->analysis_lower, analysis + 1e-9L) << "eps " << eps;
    EXPECT_LE(b->delta_lower, realized + 1e-9L) << "eps " << eps;
    EXPECT_GE(b->delta_lower, realized * (1 - 2e-3L)) << "eps " << eps;
    // The composed C_p(f) is strictly above the explicit pair here (so composing the
    // remove direction alone, without the symmetrization, would fail the first check).
    EXPECT_GT(analysis, realized * 1.01L) << "eps " << eps;
  }
}

// Brute force over every batch: n = 4 records with values in {-1/2, 0, 1/2} (a sum query
// of sensitivity 1 under replace-one), batches of m = 2 (all 6 equally likely), noise
// N(0, z^2). Every pair of neighbouring datasets (one record changed; the records are
// exchangeable, so a dataset is its sorted values) gives two mixtures of 6 Gaussians; their
// hockey stick (T = 1) and that of their product laws (T = 2, as E_{y ~ P} of the one-step
// hockey stick at eps - log(P(y)/Q(y))) must stay below the PLD upper bound, and the
// largest must reach the PLD lower bound (the explicit pair of (R4) is among them: 3
// records at -1/2, the changed one 1/2 vs -1/2).
struct Datasets {
  std::vector<long double> d, e;  // neighbouring datasets
};

Density MixtureOfBatches(const std::vector<long double>& data, long double z) {
  std::vector<long double> sums;
  for (size_t i = 0; i < data.size(); ++i) {
    for (size_t j = i + 1; j < data.size(); ++j) sums.push_back(data[i] + data[j]);
  }
  return [sums, z](long double y) {
    long double s = 0;
    for (long double m : sums) s += Normal(y, m, z);
    return s / static_cast<long double>(sums.size());
  };
}

long double TwoStepHockeyStick(const Density& p, const Density& q, long double eps) {
  const auto outer = [&](long double y) {
    const long double py = p(y);
    if (!(py > 0)) return 0.0L;
    return py * HockeyStick(p, q, eps - std::log(py / q(y)), -8, 8, 32);
  };
  long double s = 0;
  for (int i = 0; i < 16; ++i) s += GK::integrate(outer, -8 + i, -7 + i, 5, 1e-10L);
  return s;
}

TEST(PldWithoutReplacementTest, BruteForceOverAllBatchesOfTinyDatasetsStaysWithinTheBounds) {
  const long double z = 1;
  const std::vector<long double> values = {-0.5, 0, 0.5};
  std::vector<Datasets> pairs;
  for (int a = 0; a < 3; ++a) {
    for (int b = a; b < 3; ++b) {
      for (int c = b; c < 3; ++c) {
        for (int d = c; d < 3; ++d) {
          const std::vector<long double> data = {values[a], values[b], values[c], values[d]};
          for (int k = 0; k < 4; ++k) {
            if (k > 0 && data[k] == data[k - 1]) continue;  // the same change again
            for (const long double v : values) {
              if (v == data[k]) continue;
              std::vector<long double> changed = data;
              changed[k] = v;
              pairs.push_back({data, changed});
            }
          }
        }
      }
    }
  }
  for (const double eps : {0.2, 1.0}) {
    auto one = PldDelta(Wor(4, 2, 1.0, 1), eps);
    auto two = PldDelta(Wor(4, 2, 1.0, 2), eps);
    ASSERT_TRUE(one.ok()) << one.error();
    ASSERT_TRUE(two.ok()) << two.error();
    long double worst = 0;
    std::vector<std::pair<long double, size_t>> ranked;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const long double delta = HockeyStick(MixtureOfBatches(pairs[i].d, z),
                                            MixtureOfBatches(pairs[i].e, z), eps, -8, 8, 32);
      EXPECT_LE(delta, one->delta_upper * (1 + 1e-9)) << "pair " << i << " eps " << eps;
      worst = std::max(worst, delta);
      ranked.push_back({delta, i});
    }
    EXPECT_GE(worst, one->delta_lower * (1 - 1e-9)) << "eps " << eps;
    // T = 2 for the three pairs that are worst at T = 1.
    std::sort(ranked.rbegin(), ranked.rend());
    long double worst2 = 0;
    for (size_t r = 0; r < 3; ++r) {
      const Datasets& pr = pairs[ranked[r].second];
      const long double delta =
          TwoStepHockeyStick(MixtureOfBatches(pr.d, z), MixtureOfBatches(pr.e, z), eps);
      EXPECT_LE(delta, two->delta_upper * (1 + 1e-8)) << "eps " << eps;
      worst2 = std::max(worst2, delta);
    }
    EXPECT_GE(worst2, two->delta_lower * (1 - 1e-8)) << "eps " << eps;
    std::printf("eps %g: T=1 worst %.9Lg in [%.9g, %.9g]; T=2 worst %.9Lg in [%.9g, %.9g]\n", eps,
                worst, one->delta_lower, one->delta_upper, worst2, two->delta_lower,
                two->delta_upper);
  }
}

// The RDP bound of Wang et al. 2019 is an upper bound on the mechanism's exact epsilon, so
// it is at least PLD's lower bound (MNIST's B = 256 of 60000 at sigma 1.1 and 4, 60 epochs,
// and two small populations).
TEST(PldWithoutReplacementTest, RdpBoundIsAboveThePldLowerBound) {
  struct Case {
    int64_t n, m;
    double z;
    int64_t steps;
  };
  const std::vector<double> orders = DefaultRdpOrders();
  for (const Case& c : {Case{60000, 256, 0.55, 14063}, Case{60000, 256, 2.0, 14063},
                        Case{1000, 100, 1.0, 50}, Case{100, 10, 2.0, 200}}) {
    const Event event = Wor(c.n, c.m, c.z, c.steps);
    auto pld = PldEpsilon(event, 1e-5);
    ASSERT_TRUE(pld.ok()) << pld.error();
    auto rdp = ComputeRdp(event, orders);
    ASSERT_TRUE(rdp.ok()) << rdp.error();
    auto eps = RdpToEpsilonOptimal(orders, *rdp, 1e-5);
    ASSERT_TRUE(eps.ok()) << eps.error();
    EXPECT_GE(eps->epsilon, pld->epsilon_lower) << c.n << " " << c.m;
    EXPECT_LE(pld->epsilon_lower, pld->analysis_lower);
    EXPECT_LE(pld->analysis_lower, pld->epsilon_upper);
    // The analysis' own gap is the grid's: refined to 10 x the tolerance (1e-4) relative.
    EXPECT_LE(pld->epsilon_upper - pld->analysis_lower, 1e-3 * pld->epsilon_upper);
  }
}

// p = 1: every record is in every batch, and the event is the Gaussian at sensitivity 1:
// T steps are the Gaussian with noise z / sqrt(T), delta(eps) = Phi(-eps s + 1/(2s)) -
// e^eps Phi(-eps s - 1/(2s)).
TEST(PldWithoutReplacementTest, FullBatchesAreTheGaussianClosedForm) {
  const double z = 2, steps = 50;
  const long double s = z / std::sqrt(steps);
  for (const double eps : {0.5, 2.0}) {
    auto b = PldDelta(Wor(500, 500, z, 50), eps);
    ASSERT_TRUE(b.ok()) << b.error();
    const long double exact =
        Phi(-eps * s + 1 / (2 * s)) - std::exp(eps) * Phi(-eps * s - 1 / (2 * s));
    EXPECT_LE(b->delta_lower, exact * (1 + 1e-12L));
    EXPECT_GE(b->delta_upper, exact * (1 - 1e-12L));
    EXPECT_EQ(b->analysis_lower, b->delta_lower);  // no analysis gap without sampling
  }
}

// Without the second computation (mechanism_lower_bound = false, what calibrations use)
// the upper bound is unchanged and the lower bound is the trivial 0.
TEST(PldWithoutReplacementTest, SkippingTheMechanismLowerBoundKeepsTheUpperBound) {
  const Event event = Wor(60000, 256, 0.55, 500);
  PldOptions options;
  auto full = PldEpsilon(event, 1e-5, options);
  options.mechanism_lower_bound = false;
  auto quick = PldEpsilon(event, 1e-5, options);
  ASSERT_TRUE(full.ok() && quick.ok());
  EXPECT_EQ(quick->epsilon_upper, full->epsilon_upper);
  EXPECT_EQ(quick->epsilon_lower, 0);
  EXPECT_GT(quick->analysis_lower, 0);
  EXPECT_GT(full->epsilon_lower, 0);
}

TEST(PldWithoutReplacementTest, UnsupportedEventsGetOneLineErrors) {
  auto pure = PldEpsilon(*Event::SampledWithoutReplacement(10, 2, *Event::PureDp(1)), 1e-5);
  ASSERT_FALSE(pure.ok());
  EXPECT_EQ(pure.error().find('\n'), std::string::npos);
  EXPECT_NE(pure.error().find("gaussian, laplace and discrete_gaussian"), std::string::npos);
  auto mixed = PldEpsilon(
      *Event::Composed({Wor(10, 2, 1, 1), *Event::PoissonSampled(0.2, *Event::Gaussian(1))}), 1e-5);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().find("add/remove"), std::string::npos);
}

}  // namespace
}  // namespace dpkit::accounting
