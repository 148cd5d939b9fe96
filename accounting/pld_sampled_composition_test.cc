// The PLD accountant on Poisson-sampled compositions (PoissonSampled(q, Composed{...})),
// against independent computations: a composition of Gaussians is itself a Gaussian in
// distribution (its loss law depends on sum 1/z_i^2 only), whose subsampled hockey-stick
// divergence is integrated here by Gauss-Kronrod quadrature; and for randomized response
// (the PLD's worst case of pure DP) the subsampled product pair over all 2^k outputs is
// summed by brute force.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "boost/math/quadrature/gauss_kronrod.hpp"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

using ld = long double;

// delta(eps) of PoissonSampled(q, Gaussian(sigma)), max of both directions, by quadrature
// on the region where each integrand is positive (split at the kink, 1-sigma pieces).
ld SubsampledGaussianDelta(ld q, ld sigma, ld eps) {
  auto density = [sigma](ld o, ld mean) {
    const ld z = (o - mean) / sigma;
    return std::exp(-z * z / 2) / (sigma * std::sqrt(2 * static_cast<ld>(M_PI)));
  };
  const ld e = std::exp(eps);
  auto remove = [&](ld o) {
    return std::max<ld>((1 - q) * density(o, 0) + q * density(o, 1) - e * density(o, 0), 0);
  };
  auto add = [&](ld o) {
    return std::max<ld>(density(o, 0) - e * ((1 - q) * density(o, 0) + q * density(o, 1)), 0);
  };
  using Integrator = boost::math::quadrature::gauss_kronrod<ld, 61>;
  // Remove integrand > 0 iff q (e^{l(o)} - 1) > e - 1, l(o) = (2o - 1)/(2 sigma^2).
  const ld o1 = sigma * sigma * std::log1p((e - 1) / q) + 0.5L;
  ld remove_value = 0, add_value = 0;
  for (ld a = o1; a < o1 + 40 * sigma; a += sigma) {
    remove_value += Integrator::integrate(remove, a, a + sigma, 15, 1e-16L);
  }
  const ld v = (1 / e - 1 + q) / q;
  if (v > 0) {
    const ld o2 = sigma * sigma * std::log(v) + 0.5L;
    for (ld b = o2; b > o2 - 40 * sigma; b -= sigma) {
      add_value += Integrator::integrate(add, b - sigma, b, 15, 1e-16L);
    }
  }
  return std::max(remove_value, add_value);
}

Event Gaussian(double z) { return *Event::Gaussian(z); }

// PoissonSampled(q, Composed{Gaussian(a), Gaussian(b)}) is PoissonSampled(q, Gaussian(c)),
// 1/c^2 = 1/a^2 + 1/b^2, in distribution: the quadrature value of the latter lies in the
// interval of the former (tolerance 1e-9 relative for the quadrature), which is within
// 2 % of it. T = 1 and T = 20 steps (the latter against the existing subsampled-Gaussian
// path of the accountant, whose certified interval must overlap).
TEST(PldSampledCompositionTest, SampledComposedGaussiansEqualOneSampledGaussian) {
  struct Case { double q, a, b, eps; };
  for (const Case& c : {Case{0.1, 1.5, 2.0, 0.5}, Case{0.01, 1.0, 3.0, 0.05},
                        Case{0.5, 2.0, 2.0, 0.2}}) {
    const double z = 1 / std::sqrt(1 / (c.a * c.a) + 1 / (c.b * c.b));
    const Event composed =
        *Event::PoissonSampled(c.q, *Event::Composed({Gaussian(c.a), Gaussian(c.b)}));
    const ld exact = SubsampledGaussianDelta(c.q, z, c.eps);
    auto bounds = PldDelta(composed, c.eps);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-9L)) << c.q << " " << c.a;
    EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-9L)) << c.q << " " << c.a;
    EXPECT_LE(bounds->delta_upper, exact * 1.02L) << c.q << " " << c.a;
    EXPECT_GE(bounds->delta_lower, exact * 0.98L) << c.q << " " << c.a;
  }
  const Event many = *Event::SelfComposed(
      *Event::PoissonSampled(0.05, *Event::Composed({Gaussian(1.5), Gaussian(2.0)})), 20);
  const Event reference = *DpSgdEvent(0.05, 1.2, 20);  // 1/1.5^2 + 1/2^2 = 1/1.2^2
  auto a = PldEpsilon(many, 1e-6);
  auto b = PldEpsilon(reference, 1e-6);
  ASSERT_TRUE(a.ok()) << a.error();
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_LE(a->epsilon_lower, b->epsilon_upper);
  EXPECT_LE(b->epsilon_lower, a->epsilon_upper);
  EXPECT_NEAR(a->epsilon_upper, b->epsilon_upper, 1e-2 * b->epsilon_upper);
}

// Randomized response with eps_i (the pure-DP leaves' PLD, exact for it): the inner pair
// is the product of k RR pairs; sampled with rate q, delta is summed over all 2^k outputs
// in both directions.
// A single leaf composed once (PoissonSampled(q, SelfComposed(PureDp(eps), 1))) as well.
TEST(PldSampledCompositionTest, SampledRandomizedResponseProductMatchesBruteForce) {
  const double q = 0.2;
  for (const std::vector<double>& eps_i :
       {std::vector<double>{0.5, 1.0, 0.25}, std::vector<double>{2.0}}) {
  for (double eps : {0.0, 0.1, 0.4}) {
    std::vector<Event> leaves;
    for (double e : eps_i) leaves.push_back(*Event::PureDp(e));
    const Event event = leaves.size() == 1
                            ? *Event::PoissonSampled(q, *Event::SelfComposed(leaves[0], 1))
                            : *Event::PoissonSampled(q, *Event::Composed(leaves));
    ld remove = 0, add = 0;
    const int k = static_cast<int>(eps_i.size());
    for (int mask = 0; mask < (1 << k); ++mask) {
      ld p = 1, qq = 1;  // B (with the record) and A (without)
      for (int i = 0; i < k; ++i) {
        const ld hi = 1 / (1 + std::exp(-static_cast<ld>(eps_i[i])));
        const bool one = (mask >> i) & 1;
        p *= one ? hi : 1 - hi;
        qq *= one ? 1 - hi : hi;
      }
      const ld mix = (1 - q) * qq + q * p;
      remove += std::max<ld>(0, mix - std::exp(static_cast<ld>(eps)) * qq);
      add += std::max<ld>(0, qq - std::exp(static_cast<ld>(eps)) * mix);
    }
    const ld exact = std::max(remove, add);
    auto bounds = PldDelta(event, eps);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-12L)) << eps;
    EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-12L)) << eps;
    EXPECT_LE(bounds->delta_upper, exact * 1.02L) << eps;
    EXPECT_GE(bounds->delta_lower, exact * 0.9L) << eps;
  }
  }
}

// The sparse DP-SGD step (optim/sparse): PoissonSampled(q, Composed{SelfComposed(
// BoundedRange(eps), 10), Gaussian(z)}) now has certified PLD bounds: ordered, above the
// Gaussian part alone (DP-SGD with the same q, z, T: a post-processing of the step), and
// below the RDP bound.
TEST(PldSampledCompositionTest, SparseDpSgdStepHasCertifiedBounds) {
  const Event step = *Event::PoissonSampled(
      0.01, *Event::Composed({*Event::SelfComposed(*Event::BoundedRange(0.01), 10),
                              Gaussian(1.0)}));
  const Event run = *Event::SelfComposed(step, 300);
  auto bounds = PldEpsilon(run, 1e-5);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
  EXPECT_GT(bounds->epsilon_lower, 0.98 * bounds->epsilon_upper);  // measured 0.9988
  auto gaussian_only = PldEpsilon(*DpSgdEvent(0.01, 1.0, 300), 1e-5);
  ASSERT_TRUE(gaussian_only.ok());
  EXPECT_GT(bounds->epsilon_upper, gaussian_only->epsilon_lower);
}

TEST(PldSampledCompositionTest, NestedSampledCompositionIsAClearError) {
  const Event inner =
      *Event::PoissonSampled(0.5, *Event::Composed({Gaussian(1.0), Gaussian(2.0)}));
  const Event event = *Event::PoissonSampled(0.1, *Event::Composed({inner, Gaussian(1.0)}));
  auto bounds = PldEpsilon(event, 1e-5);
  ASSERT_FALSE(bounds.ok());
  EXPECT_NE(bounds.error().find("cannot Poisson-sample a composition that contains"),
            std::string::npos)
      << bounds.error();
}

}  // namespace
}  // namespace dpkit::accounting
