// The PLD accountant on discrete Gaussian events (Canonne, Kamath, Steinke 2020), checked
// against brute-force sums over the integers in long double: the exact hockey-stick
// divergence sum_x (P(x) - e^eps Q(x))_+ of the output laws, CKS Thm. 7's closed form, and
// for compositions the exact law of the summed loss by direct convolution. None of these
// uses the accountant's discretisation, tails or Euler-Maclaurin bounds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

using ld = long double;

// The pmf of N_Z(0, sigma^2) on [-n, n] (n = 45 sigma + 20: the mass outside is below
// e^{-1000}, far below every delta checked), normalised by its own sum.
struct DiscreteGaussianPmf {
  int64_t n;
  std::vector<ld> p;  // p[x + n]
  ld at(int64_t x) const { return (x < -n || x > n) ? 0 : p[x + n]; }
};

DiscreteGaussianPmf MakePmf(ld sigma) {
  DiscreteGaussianPmf out;
  out.n = static_cast<int64_t>(std::ceil(45 * sigma)) + 20;
  out.p.resize(2 * out.n + 1);
  ld z = 0;
  for (int64_t x = -out.n; x <= out.n; ++x) {
    const ld y = static_cast<ld>(x) / sigma;
    out.p[x + out.n] = std::exp(-y * y / 2);
  }
  // Sum from the smallest terms up (both tails first) for accuracy.
  for (int64_t i = 0; i < out.n; ++i) z += out.p[i] + out.p[2 * out.n - i];
  z += out.p[out.n];
  for (ld& v : out.p) v /= z;
  return out;
}

// sum_x (P(x) - e^eps Q(x))_+ for P = (1-q) A + q B, Q = A (remove) and for P = A,
// Q = (1-q) A + q B (add), A = N_Z(0, s^2), B = N_Z(D, s^2); the larger of the two.
ld HockeyStick(const DiscreteGaussianPmf& pmf, int64_t d, ld q, ld eps) {
  const ld x_eps = std::exp(eps);
  ld remove = 0, add = 0;
  for (int64_t x = -pmf.n; x <= pmf.n + d; ++x) {
    const ld a = pmf.at(x), b = pmf.at(x - d);
    const ld mix = (1 - q) * a + q * b;
    remove += std::max<ld>(0, mix - x_eps * a);
    add += std::max<ld>(0, a - x_eps * mix);
  }
  return std::max(remove, add);
}

// CKS 2020, Thm. 7: delta = P[X > eps s^2/D - D/2] - e^eps P[X > eps s^2/D + D/2].
ld CksDelta(const DiscreteGaussianPmf& pmf, ld sigma, int64_t d, ld eps) {
  const ld a = eps * sigma * sigma / d - d / 2.0L, b = eps * sigma * sigma / d + d / 2.0L;
  ld above_a = 0, above_b = 0;
  for (int64_t x = pmf.n; x >= -pmf.n; --x) {  // smallest terms first
    if (x > a) above_a += pmf.at(x);
    if (x > b) above_b += pmf.at(x);
  }
  return above_a - std::exp(eps) * above_b;
}

Event Dg(double sigma, int64_t d) { return *Event::DiscreteGaussian(sigma, d); }

// (i) One discrete Gaussian: delta(eps) from the brute-force hockey stick (which must agree
// with CKS Thm. 7, a check of the reference itself) lies in the certified interval, and
// the interval is tight: the refinement targets a gap of 10 x tolerance (1e-4) relative,
// we allow 1e-2. Sigmas cover the accountant's direct suffix sums (<= 512), its
// Euler-Maclaurin tails (> 512), atoms far apart (sigma 0.5: loss spacing 4) and dense
// (sigma 1500, D 1025: the lattice GaussianMechanism's units).
TEST(PldDiscreteGaussianTest, SingleReleaseDeltaIsInsideTheInterval) {
  struct Case { double sigma; int64_t d; double eps; };
  for (const Case& c : {Case{0.5, 1, 0.5}, Case{0.5, 1, 3.0}, Case{1.0, 1, 1.0},
                        Case{2.5, 3, 0.25}, Case{3.0, 1, 0.0}, Case{10.0, 7, 1.0},
                        Case{700.0, 300, 2.0}, Case{1500.0, 1025, 1.0},
                        Case{1500.0, 1025, 3.0}, Case{4000.0, 2049, 0.1}}) {
    const DiscreteGaussianPmf pmf = MakePmf(c.sigma);
    const ld exact = HockeyStick(pmf, c.d, 1, c.eps);
    const ld cks = CksDelta(pmf, c.sigma, c.d, c.eps);
    // Two long double sums of ~1e5 terms: they agree to 1e-12 relative.
    ASSERT_NEAR(static_cast<double>(exact), static_cast<double>(cks),
                1e-12 * static_cast<double>(exact))
        << c.sigma;
    auto bounds = PldDelta(Dg(c.sigma, c.d), c.eps);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    // 1e-10 relative covers the reference's own rounding.
    EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-10L)) << c.sigma << " " << c.eps;
    EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-10L)) << c.sigma << " " << c.eps;
    EXPECT_LE(bounds->delta_upper, exact * 1.01L) << c.sigma << " " << c.eps;
    EXPECT_GE(bounds->delta_lower, exact * 0.99L) << c.sigma << " " << c.eps;
  }
}

// The epsilon query inverts the same curve: eps(delta) of the brute-force delta(eps)
// must lie in [epsilon_lower, epsilon_upper].
TEST(PldDiscreteGaussianTest, SingleReleaseEpsilonBracketsTheExactValue) {
  struct Case { double sigma; int64_t d; double delta; };
  for (const Case& c : {Case{1.0, 1, 1e-5}, Case{1500.0, 1025, 1e-6}, Case{0.8, 2, 1e-3}}) {
    const DiscreteGaussianPmf pmf = MakePmf(c.sigma);
    // The exact eps by bisection on the brute-force delta (non-increasing in eps).
    ld lo = 0, hi = 1;
    while (HockeyStick(pmf, c.d, 1, hi) > c.delta) hi *= 2;
    for (int i = 0; i < 80; ++i) {
      const ld mid = (lo + hi) / 2;
      (HockeyStick(pmf, c.d, 1, mid) > c.delta ? lo : hi) = mid;
    }
    auto bounds = PldEpsilon(Dg(c.sigma, c.d), c.delta);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_lower, hi * (1 + 1e-10L)) << c.sigma;
    EXPECT_GE(bounds->epsilon_upper, lo * (1 - 1e-10L)) << c.sigma;
    EXPECT_LE(bounds->epsilon_upper, hi * 1.002L) << c.sigma;
    EXPECT_GE(bounds->epsilon_lower, lo * 0.99L) << c.sigma;
  }
}

// (ii) k-fold composition. Under P = B^k the summed loss is (D/s^2)(S - k D/2) with
// S = x_1 + ... + x_k, x_i ~ N_Z(D, s^2) i.i.d., so delta(eps) = sum_s P(S = s)
// (1 - e^{eps - L(s)})_+ with the exact law of S from k direct convolutions (the add
// direction is the same by the symmetry x -> D - x).
TEST(PldDiscreteGaussianTest, ComposedDeltaIsInsideTheInterval) {
  struct Case { double sigma; int64_t d; int k; double eps; };
  for (const Case& c : {Case{0.5, 1, 5, 2.0}, Case{1.0, 1, 20, 3.0}, Case{2.0, 1, 10, 1.0},
                        Case{3.0, 2, 50, 2.0}, Case{0.7, 1, 100, 10.0}}) {
    const DiscreteGaussianPmf pmf = MakePmf(c.sigma);
    // Law of S (offset: index 0 is s = -k n).
    std::vector<ld> law = {1};
    int64_t offset = 0;
    for (int i = 0; i < c.k; ++i) {
      std::vector<ld> next(law.size() + pmf.p.size() - 1, 0);
      for (size_t a = 0; a < law.size(); ++a) {
        if (law[a] == 0) continue;
        for (size_t b = 0; b < pmf.p.size(); ++b) next[a + b] += law[a] * pmf.p[b];
      }
      law.swap(next);
      offset -= pmf.n;  // x ranges over [-n, n] (B shifts each by D, added below)
    }
    ld exact = 0;
    const ld spacing = static_cast<ld>(c.d) / (static_cast<ld>(c.sigma) * c.sigma);
    for (size_t j = law.size(); j-- > 0;) {
      const ld s = static_cast<ld>(offset + static_cast<int64_t>(j)) +
                   static_cast<ld>(c.k) * c.d;  // x_i ~ B = N_Z(D, s^2)
      const ld loss = spacing * (s - c.k * c.d / 2.0L);
      if (loss > c.eps) exact += law[j] * -std::expm1(c.eps - loss);
    }
    auto bounds = PldDelta(*Event::SelfComposed(Dg(c.sigma, c.d), c.k), c.eps);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-10L)) << c.sigma << " " << c.k;
    EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-10L)) << c.sigma << " " << c.k;
    EXPECT_LE(bounds->delta_upper, exact * 1.01L) << c.sigma << " " << c.k;
    EXPECT_GE(bounds->delta_lower, exact * 0.99L) << c.sigma << " " << c.k;
  }
}

// Poisson sampling: one step against the brute-force hockey stick of the mixtures (both
// directions), and three steps against the exact sum over all triples of outputs.
TEST(PldDiscreteGaussianTest, PoissonSampledDeltaIsInsideTheInterval) {
  struct Case { double q, sigma; int64_t d; double eps; };
  for (const Case& c : {Case{0.01, 1.0, 1, 0.01}, Case{0.1, 0.8, 1, 0.5},
                        Case{0.5, 2.0, 3, 0.1}, Case{0.2, 1500.0, 1025, 0.2},
                        // Sparse lattice (spacing D/s^2 = 3.1) sampled: the delta at large
                        // eps comes from isolated top atoms.
                        Case{0.05, 0.8, 2, 8.0}, Case{0.0123, 0.76, 2, 20.0}}) {
    const DiscreteGaussianPmf pmf = MakePmf(c.sigma);
    const ld exact = HockeyStick(pmf, c.d, c.q, c.eps);
    auto bounds = PldDelta(*Event::PoissonSampled(c.q, Dg(c.sigma, c.d)), c.eps);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-10L)) << c.q << " " << c.sigma;
    EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-10L)) << c.q << " " << c.sigma;
    EXPECT_LE(bounds->delta_upper, exact * 1.01L) << c.q << " " << c.sigma;
    EXPECT_GE(bounds->delta_lower, exact * 0.99L) << c.q << " " << c.sigma;
  }
  // Three steps, q = 0.3, sigma = 1, D = 1: outputs restricted to [-13, 14] (mass outside
  // < 1e-36 per step), delta = sum over triples of (P - e^eps Q)_+ of the product laws.
  const ld q = 0.3, eps = 0.3;
  const DiscreteGaussianPmf pmf = MakePmf(1.0);
  std::vector<ld> pa, pb;
  for (int64_t x = -13; x <= 14; ++x) {
    pa.push_back(pmf.at(x));
    pb.push_back(pmf.at(x - 1));
  }
  ld remove = 0, add = 0;
  const ld x_eps = std::exp(eps);
  const size_t m = pa.size();
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < m; ++j) {
      for (size_t k = 0; k < m; ++k) {
        const ld a = pa[i] * pa[j] * pa[k];
        const ld mix = ((1 - q) * pa[i] + q * pb[i]) * ((1 - q) * pa[j] + q * pb[j]) *
                       ((1 - q) * pa[k] + q * pb[k]);
        remove += std::max<ld>(0, mix - x_eps * a);
        add += std::max<ld>(0, a - x_eps * mix);
      }
    }
  }
  const ld exact = std::max(remove, add);
  auto bounds = PldDelta(*Event::SelfComposed(*Event::PoissonSampled(0.3, Dg(1.0, 1)), 3), 0.3);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-10L));
  EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-10L));
  EXPECT_LE(bounds->delta_upper, exact * 1.01L);
  EXPECT_GE(bounds->delta_lower, exact * 0.99L);
}

// (iv) For sigma >> D the loss lattice (spacing D/s^2) is fine and N_Z(0, s^2) is within
// e^{-2 pi^2 s^2} of the sampled continuous Gaussian: the discrete Gaussian's interval
// approaches that of the continuous Gaussian with noise multiplier s/D. Checked with an
// explicit tolerance of 2e-3 relative in eps (the two intervals are each ~1e-3 wide and
// the lattice shifts eps by O(D/s^2) = 5e-4 at s = 2000, D = 1000).
TEST(PldDiscreteGaussianTest, LargeSigmaApproachesTheContinuousGaussian) {
  for (int64_t steps : {int64_t{1}, int64_t{100}}) {
    const Event discrete = *Event::SelfComposed(Dg(2000.0, 1000), steps);
    const Event continuous = *Event::SelfComposed(*Event::Gaussian(2.0), steps);
    auto d = PldEpsilon(discrete, 1e-6);
    auto c = PldEpsilon(continuous, 1e-6);
    ASSERT_TRUE(d.ok()) << d.error();
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_NEAR(d->epsilon_upper, c->epsilon_upper, 2e-3 * c->epsilon_upper) << steps;
    EXPECT_NEAR(d->epsilon_lower, c->epsilon_lower, 2e-3 * c->epsilon_upper) << steps;
  }
}

// A Poisson-subsampled, composed discrete Gaussian with many steps (the lattice mechanism
// inside DP-SGD-like loops) gives finite, ordered bounds below the unsampled ones.
TEST(PldDiscreteGaussianTest, SubsampledManyStepsGivesOrderedBounds) {
  const Event sampled =
      *Event::SelfComposed(*Event::PoissonSampled(0.01, Dg(1100.0, 1025)), 10000);
  auto b = PldEpsilon(sampled, 1e-5);
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_GT(b->epsilon_lower, 0);
  EXPECT_LE(b->epsilon_lower, b->epsilon_upper);
  EXPECT_LE(b->epsilon_upper, b->epsilon_lower * 1.01);
  auto continuous = PldEpsilon(*DpSgdEvent(0.01, 1100.0 / 1025, 10000), 1e-5);
  ASSERT_TRUE(continuous.ok());
  EXPECT_NEAR(b->epsilon_upper, continuous->epsilon_upper, 5e-3 * continuous->epsilon_upper);
}

}  // namespace
}  // namespace dpkit::accounting
