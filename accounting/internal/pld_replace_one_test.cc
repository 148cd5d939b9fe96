#include "dpkit/accounting/internal/pld_replace_one.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/fdp.h"
#include "dpkit/accounting/internal/pld_directions.h"
#include "dpkit/accounting/internal/pld_mechanism.h"
#include "dpkit/accounting/internal/pld_quadrature_testing.h"
#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

using pld_testing::Directions;
using pld_testing::GaussianDirections;
using pld_testing::LaplaceDirections;

// The curve of a PMF at eps, summed directly: sum_i w_i (1 - e^{eps - l_i})_+ + w(inf).
long double CurveOf(const Pmf& pmf, double h, long double eps) {
  long double sum = pmf.infinity_mass;
  for (size_t i = 0; i < pmf.mass.size(); ++i) {
    const long double l = static_cast<long double>(pmf.min_index + static_cast<int64_t>(i)) * h;
    if (l > eps) sum += pmf.mass[i] * -std::expm1(eps - l);
  }
  return sum;
}

long double TotalMass(const Pmf& pmf) {
  long double sum = pmf.infinity_mass;
  for (long double v : pmf.mass) sum += v;
  return sum;
}

const std::vector<long double> kEpsilons = {-3, -1.5, -0.7, -0.2, -0.01, 0, 0.01, 0.3, 1, 2.5};

// The lemma of (R1): R >= D_add at eps >= 0 and D_add >= R at eps < 0 (so the curve of
// C_p(f) is the remove direction's on eps >= 0), by quadrature for Gaussian and Laplace
// bases over a range of rates. This checks the proof's claim independently of any PMF.
TEST(PldReplaceOneTest, RemoveDirectionDominatesExactlyWhereEpsilonIsNonNegative) {
  for (const long double p : {0.01L, 0.3L, 0.9L}) {
    for (const Directions& d :
         {GaussianDirections(0.5, p), GaussianDirections(3, p), LaplaceDirections(0.7, p)}) {
      for (const long double eps : kEpsilons) {
        const long double r = d.Remove(eps), a = d.Add(eps);
        if (eps >= 0) {
          EXPECT_GE(r, a - 1e-13L) << "p " << p << " eps " << eps;
        } else {
          EXPECT_GE(a, r - 1e-13L) << "p " << p << " eps " << eps;
        }
      }
    }
  }
}

// The closed forms the end-to-end tests build their references from agree with the
// quadrature.
TEST(PldReplaceOneTest, GaussianClosedFormsAgreeWithQuadrature) {
  for (const long double p : {0.01L, 0.3L, 0.9L}) {
    for (const long double z : {0.5L, 1.0L, 3.0L}) {
      const Directions d = GaussianDirections(z, p);
      for (const long double eps : kEpsilons) {
        EXPECT_NEAR(pld_testing::GaussianRemoveCurve(z, p, eps), d.Remove(eps), 1e-13L);
        EXPECT_NEAR(pld_testing::GaussianAddCurve(z, p, eps), d.Add(eps), 1e-13L);
      }
    }
  }
}

// (R1) also says delta_{C_p(f)} = max(R, D_add) at every eps: compared with fdp's C_p(f)
// (its own implementation of DRS 2019, Thm. 4.2, as a certified lower envelope whose
// delta is slightly above the exact one) through delta = 1 + f*(-e^eps).
TEST(PldReplaceOneTest, MaxOfBothDirectionsIsTheSubsampledTradeoffCurve) {
  const long double z = 0.8, p = 0.3;
  const Directions d = GaussianDirections(z, p);
  auto g = GaussianTradeoffCurve(static_cast<double>(1 / z), 4000);
  ASSERT_TRUE(g.ok()) << g.error();
  auto cp = SubsampledTradeoff(*g, static_cast<double>(p));
  ASSERT_TRUE(cp.ok()) << cp.error();
  for (const long double eps : kEpsilons) {
    const long double exact = std::max(d.Remove(eps), d.Add(eps));
    const double envelope = DeltaFromTradeoff(*cp, static_cast<double>(eps));
    // The envelope's delta is an upper bound within its tangents' error (4000 points).
    EXPECT_GE(envelope, exact - 1e-12L) << "eps " << eps;
    EXPECT_LE(envelope, exact + 2e-5L) << "eps " << eps;
  }
}

// The component's PMFs of WOR(n, m, Gaussian(z)), from Prepare and BuildDirection on the
// grid h.
ComponentPmfs WithoutReplacementPmfs(int64_t n, int64_t m, const Event& base, double h) {
  const Event event = *Event::SampledWithoutReplacement(n, m, base);
  auto prepared = Prepare(event, {1e-4, h}, 1e-14L);
  EXPECT_TRUE(prepared.ok()) << prepared.error();
  EXPECT_TRUE(prepared->symmetric);
  EXPECT_EQ(prepared->flat.size(), 1u);
  EXPECT_EQ(prepared->flat[0].first.base, Base::kWithoutReplacement);
  auto built = BuildDirection(&*prepared, Direction::kRemove);
  EXPECT_TRUE(built.ok()) << built.error();
  return (**built)[0];
}

// (R2): the symmetrized dominating PMF's curve is above max(R, D_add) at every eps, the
// dominated ones' below it, both by quadrature. A PMF made of the remove direction alone
// (no reflection) fails the upper check at eps < 0, where D_add is the larger.
TEST(PldReplaceOneTest, SymmetrizedCurvesBracketTheSubsampledCurveAtEveryEpsilon) {
  const double h = 2e-3;
  for (const auto& [base, d] :
       {std::pair<Event, Directions>{*Event::Gaussian(0.8), GaussianDirections(0.8, 0.3)},
        std::pair<Event, Directions>{*Event::Laplace(0.7), LaplaceDirections(0.7, 0.3)}}) {
    const ComponentPmfs c = WithoutReplacementPmfs(10, 3, base, h);
    for (const long double eps : kEpsilons) {
      const long double exact = std::max(d.Remove(eps), d.Add(eps));
      const long double up = CurveOf(c.upper, h, eps), low = CurveOf(c.lower, h, eps);
      EXPECT_GE(up, exact - 1e-12L) << "eps " << eps;
      EXPECT_LE(low, exact + 1e-12L) << "eps " << eps;
      if (!c.lower_alt.mass.empty()) {
        EXPECT_LE(CurveOf(c.lower_alt, h, eps), exact + 1e-12L) << "eps " << eps;
      }
      // Gaussian: second-order discretisation error, (e^h - 1)^2 / 8 of the mass per cell
      // (observed <= 1e-6 at h = 2e-3). Laplace: its loss has two atoms (the loss is
      // constant outside [0, 1]) between grid points, each moved by at most one cell:
      // first order, at most e^h - 1 in all (observed 2.3e-4).
      const long double allowed = base.kind() == EventKind::kGaussian ? 1e-5L : std::expm1(h);
      EXPECT_LE(up - low, allowed) << "eps " << eps;
    }
  }
}

// The same for the discrete Gaussian base (N_Z(0, s^2) on an integer query of sensitivity
// D; its loss is a lattice of atoms), the hockey sticks as sums over the integers.
TEST(PldReplaceOneTest, SymmetrizedDiscreteGaussianCurvesBracketTheSubsampledCurve) {
  const double h = 2e-3;
  const long double s = 3, p = 0.3;
  const int64_t d = 2;
  std::vector<long double> a, b;  // A(x), B(x) = A(x - D) for x = -60 .. 60 + D
  long double z = 0;
  for (int64_t x = -60; x <= 60 + d; ++x) z += std::exp(-(x * x) / (2 * s * s));
  for (int64_t x = -60; x <= 60 + d; ++x) {
    a.push_back(std::exp(-(x * x) / (2 * s * s)) / z);
    b.push_back(std::exp(-((x - d) * (x - d)) / (2 * s * s)) / z);
  }
  const auto stick = [&](bool remove, long double eps) {
    long double sum = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const long double mix = (1 - p) * a[i] + p * b[i];
      sum += std::max(0.0L, remove ? mix - std::exp(eps) * a[i] : a[i] - std::exp(eps) * mix);
    }
    return sum;
  };
  const ComponentPmfs c =
      WithoutReplacementPmfs(10, 3, *Event::DiscreteGaussian(static_cast<double>(s), d), h);
  for (const long double eps : kEpsilons) {
    const long double exact = std::max(stick(true, eps), stick(false, eps));
    const long double up = CurveOf(c.upper, h, eps), low = CurveOf(c.lower, h, eps);
    EXPECT_GE(up, exact - 1e-12L) << "eps " << eps;
    EXPECT_LE(low, exact + 1e-12L) << "eps " << eps;
    // Lattice atoms between grid points, each moved by at most one cell: first order.
    EXPECT_LE(up - low, std::expm1(h)) << "eps " << eps;
  }
}

// (R2) at the boundary: with the full rate the component is the unsampled Gaussian, whose
// curve is the closed form Phi(-eps z + 1/(2z)) - e^eps Phi(-eps z - 1/(2z)) on both sides
// of 0 (the symmetrization must give back a symmetric law unchanged).
TEST(PldReplaceOneTest, FullSamplingRateGivesBackTheGaussianOnBothSides) {
  const double h = 2e-3, z = 0.7;
  Mechanism m{Base::kWithoutReplacement, 1 / z, 1.0, 0};
  m.inner = Event::Gaussian(z)->ToJsonString();
  Prepared p;
  p.h = h;
  p.tail = 1e-15L;
  p.flat = {{m, 1.0}};
  p.symmetric = true;
  auto built = BuildDirection(&p, Direction::kRemove);
  ASSERT_TRUE(built.ok()) << built.error();
  const ComponentPmfs& c = (**built)[0];
  const auto phi = [](long double x) { return std::erfc(-x / std::sqrt(2.0L)) / 2; };
  for (const long double eps : kEpsilons) {
    const long double exact =
        phi(-eps * z + 1 / (2 * z)) - std::exp(eps) * phi(-eps * z - 1 / (2 * z));
    EXPECT_GE(CurveOf(c.upper, h, eps), exact - 1e-13L) << "eps " << eps;
    EXPECT_LE(CurveOf(c.lower, h, eps), exact + 1e-13L) << "eps " << eps;
    EXPECT_NEAR(CurveOf(c.upper, h, eps), exact, 1e-6L) << "eps " << eps;
  }
}

// (R2)'s masses: the upper PMF has total mass >= 1, the lower <= 1; where the remove PMF
// carries more than a symmetric law can (P- plus Q-mass above 0 over 1), the lower one is
// trimmed at its lowest positive losses (no atom is lifted) and the upper one keeps it all.
TEST(PldReplaceOneTest, LowerPmfIsTrimmedWhereAnAtomAtZeroWouldBeNegative) {
  const double h = 0.1;
  Pmf heavy;
  heavy.min_index = -2;
  heavy.mass = {0.3, 0, 0, 0.2, 0.2, 0.2, 0.2, 0.2};  // losses -0.2 .. 0.5
  const Pmf low = SymmetrizeRemovePmf(heavy, h, Bound::kLower);
  const Pmf up = SymmetrizeRemovePmf(heavy, h, Bound::kUpper);
  EXPECT_LE(TotalMass(low), 1);
  EXPECT_GE(TotalMass(up), 1);
  for (long double v : low.mass) EXPECT_GE(v, 0);
  // The atom at 0: what the trimming's margin (1e-9 of the excess) leaves.
  EXPECT_LE(low.mass[static_cast<size_t>(-low.min_index)], 1e-8L);
  EXPECT_EQ(up.mass[static_cast<size_t>(-up.min_index)], 0);
  // The lowest positive loss lost mass; the curve on eps >= 0 never rose.
  EXPECT_LT(low.mass[static_cast<size_t>(1 - low.min_index)], 0.2L);
  for (const long double eps : {0.0L, 0.05L, 0.15L, 0.3L}) {
    EXPECT_LE(CurveOf(low, h, eps), CurveOf(heavy, h, eps)) << "eps " << eps;
    EXPECT_NEAR(CurveOf(up, h, eps), CurveOf(heavy, h, eps), 1e-15L) << "eps " << eps;
  }
  // A light one: the atom at 0 takes the rest, total 1 up to rounding on the bound's side.
  Pmf light;
  light.min_index = -1;
  light.mass = {0.5, 0, 0.1, 0.05};
  const Pmf low2 = SymmetrizeRemovePmf(light, h, Bound::kLower);
  const Pmf up2 = SymmetrizeRemovePmf(light, h, Bound::kUpper);
  EXPECT_LE(TotalMass(low2), 1);
  EXPECT_GE(TotalMass(up2), 1);
  EXPECT_NEAR(TotalMass(low2), 1, 1e-15L);
  EXPECT_NEAR(TotalMass(up2), 1, 1e-15L);
  EXPECT_NEAR(up2.mass[static_cast<size_t>(-2 - up2.min_index)], 0.05L * std::exp(-0.2L), 1e-17L);
}

TEST(PldReplaceOneTest, RatesAreRoundedToTheSideOfEachBound) {
  EXPECT_GE(WithoutReplacementRate(60000, 256, Bound::kUpper) * 60000, 256);
  EXPECT_LE(WithoutReplacementRate(60000, 256, Bound::kLower) * 60000, 256);
  EXPECT_EQ(WithoutReplacementRate(7, 7, Bound::kLower), 1);
  EXPECT_EQ(WithoutReplacementRate(7, 7, Bound::kUpper), 1);
  EXPECT_NEAR(WithoutReplacementRate(3, 1, Bound::kUpper), 1.0 / 3, 1e-14);
}

TEST(PldReplaceOneTest, RealizedPairEventReplacesEachWithoutReplacementNode) {
  const Event g = *Event::Gaussian(1.5);
  const Event wor = *Event::SampledWithoutReplacement(1000, 10, g);
  auto none = RealizedPairEvent(*Event::SelfComposed(g, 4));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto full = RealizedPairEvent(*Event::SampledWithoutReplacement(5, 5, g));
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(full->has_value());  // m = n: the base itself, no lower bound of its own
  auto tree = RealizedPairEvent(*Event::Composed({*Event::SelfComposed(wor, 30), g}));
  ASSERT_TRUE(tree.ok()) << tree.error();
  ASSERT_TRUE(tree->has_value());
  const Event expected = *Event::Composed(
      {*Event::SelfComposed(
           *Event::PoissonSampled(WithoutReplacementRate(1000, 10, Bound::kLower), g), 30),
       g});
  EXPECT_EQ(**tree, expected);
}

TEST(PldReplaceOneTest, UnsupportedCombinationsAreRefusedWithOneLine) {
  const Event g = *Event::Gaussian(1);
  const Event wor = *Event::SampledWithoutReplacement(100, 10, g);
  const auto error = [](const Event& e) {
    auto p = Prepare(e, {1e-4, 0}, 1e-12L);
    return p.ok() ? std::string() : p.error();
  };
  EXPECT_NE(error(*Event::SampledWithoutReplacement(100, 10, *Event::PureDp(1)))
                .find("only of gaussian, laplace and discrete_gaussian"),
            std::string::npos);
  EXPECT_NE(error(*Event::Composed({wor, *Event::PoissonSampled(0.1, g)}))
                .find("cannot compose sampled_without_replacement"),
            std::string::npos);
  EXPECT_NE(error(*Event::PoissonSampled(0.5, wor)).find("cannot Poisson-sample"),
            std::string::npos);
  EXPECT_NE(error(*Event::PoissonSampled(0.5, *Event::Composed({wor, g})))
                .find("cannot Poisson-sample a sampled_without_replacement"),
            std::string::npos);
  EXPECT_EQ(error(*Event::Composed({wor, g, *Event::PureDp(0.5)})), "");
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
