#include "dpkit/accounting/gdp_general_clt.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/gdp.h"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

// At p = 1 the step is the Gaussian: L = mu x - mu^2/2 under N(0, 1), so kl = mu^2/2,
// kappa2 = mu^2 + mu^4/4 and E|L|^3 has the closed form of a normal's absolute third
// moment, computed here by the trapezoid rule on a fine grid (an independent method).
TEST(GdpGeneralCltTest, GaussianStepHasClosedFormFunctionals) {
  for (double z : {0.5, 1.0, 4.0}) {
    const double mu = 1 / z;
    auto f = NoisySgdStepFunctionals(1.0, z);
    ASSERT_TRUE(f.ok()) << f.error();
    EXPECT_NEAR(f->kl, mu * mu / 2, 1e-13);
    EXPECT_NEAR(f->kappa2, mu * mu + std::pow(mu, 4) / 4, 1e-12);
    double third = 0;
    const double h = 1e-4;
    for (double x = -40; x <= 40; x += h) {
      third += h * std::exp(-x * x / 2) / std::sqrt(2 * M_PI) *
               std::pow(std::fabs(mu * x - mu * mu / 2), 3);
    }
    EXPECT_NEAR(f->kappa3, third, 1e-8 * third);
    // One Gaussian: 2 kl / sqrt(kappa2 - kl^2) = mu exactly (it is mu-GDP).
    auto event = Event::Gaussian(z);
    ASSERT_TRUE(event.ok());
    auto clt = GeneralCltMu(*event);
    ASSERT_TRUE(clt.ok()) << clt.error();
    EXPECT_NEAR(clt->mu, mu, 1e-12 * mu);
  }
}

// Homogeneous NoisySGD: mu tends to Bu et al.'s mu_CLT (eq. 3.1) as p -> 0 with
// p sqrt(T) fixed (Bu et al. 2020, Sec. 3: the limit of the CLT). At Bu
// et al.'s Table 1 rates the finite-T functionals differ from the limit (p e^{1/z^2} is
// not small at z = 0.55); dividing p by 10 and multiplying T by 100 keeps p sqrt(T) and
// must shrink the gap (linearly in p), to below 0.2% at p / 1000 (measured: 5.4e-4 at
// z = 0.55, 3.9e-6 at z = 1.1).
TEST(GdpGeneralCltTest, HomogeneousCompositionConvergesToEquationThreePointOne) {
  const double p = 256.0 / 60000;
  for (auto [z, steps] : {std::pair{1.1, int64_t{14063}}, std::pair{0.7, int64_t{10547}},
                          std::pair{0.55, int64_t{15938}}}) {
    auto mu = CltMu(p, z, steps);
    ASSERT_TRUE(mu.ok());
    double previous_gap = INFINITY;
    for (int k = 0; k <= 3; ++k) {
      const double scale = std::pow(10.0, k);
      auto event = DpSgdEvent(p / scale, z, steps * static_cast<int64_t>(scale * scale));
      ASSERT_TRUE(event.ok());
      auto clt = GeneralCltMu(*event);
      ASSERT_TRUE(clt.ok()) << clt.error();
      const double gap = std::fabs(clt->mu - *mu) / *mu;
      std::printf("z %g p/%g: general CLT mu %.6f, eq. 3.1 mu %.6f, gap %.2e\n", z, scale,
                  clt->mu, *mu, gap);
      EXPECT_LT(gap, previous_gap / 3) << z << " " << k;  // measured: 4x to 10x per decade
      previous_gap = gap;
    }
    EXPECT_LT(previous_gap, 2e-3) << z;
  }
}

// At p = 1 both directions are the same Gaussian pair (N(0,1) vs N(mu,1) is symmetric).
TEST(GdpGeneralCltTest, DirectionsAgreeForTheGaussian) {
  auto pq = NoisySgdStepFunctionals(1.0, 0.8, CltDirection::kPQ);
  auto qp = NoisySgdStepFunctionals(1.0, 0.8, CltDirection::kQP);
  ASSERT_TRUE(pq.ok() && qp.ok());
  EXPECT_NEAR(pq->kl, qp->kl, 1e-12);
  EXPECT_NEAR(pq->kappa2, qp->kappa2, 1e-11);
  EXPECT_NEAR(pq->kappa3, qp->kappa3, 1e-10);
}

// A schedule composes by adding the functionals: two phases give the mu of the sums, and
// splitting one phase in two changes nothing.
TEST(GdpGeneralCltTest, PhasesAddTheirFunctionals) {
  auto a = DpSgdEvent(0.01, 1.0, 300);
  auto b = DpSgdEvent(0.02, 2.0, 500);
  auto a1 = DpSgdEvent(0.01, 1.0, 100);
  auto a2 = DpSgdEvent(0.01, 1.0, 200);
  ASSERT_TRUE(a.ok() && b.ok() && a1.ok() && a2.ok());
  auto both = Event::Composed({*a, *b});
  auto split = Event::Composed({*a1, *b, *a2});
  ASSERT_TRUE(both.ok() && split.ok());
  auto fa = NoisySgdStepFunctionals(0.01, 1.0);
  auto fb = NoisySgdStepFunctionals(0.02, 2.0);
  ASSERT_TRUE(fa.ok() && fb.ok());
  const double kl = 300 * fa->kl + 500 * fb->kl;
  const double var = 300 * (fa->kappa2 - fa->kl * fa->kl) + 500 * (fb->kappa2 - fb->kl * fb->kl);
  auto clt = GeneralCltMu(*both);
  auto clt_split = GeneralCltMu(*split);
  ASSERT_TRUE(clt.ok() && clt_split.ok());
  EXPECT_NEAR(clt->mu, 2 * kl / std::sqrt(var), 1e-12 * clt->mu);
  EXPECT_NEAR(clt_split->mu, clt->mu, 1e-12 * clt->mu);
}

TEST(GdpGeneralCltTest, RejectsEventsItCannotAccount) {
  auto laplace = Event::Laplace(1);
  ASSERT_TRUE(laplace.ok());
  auto clt = GeneralCltMu(*laplace);
  ASSERT_FALSE(clt.ok());
  EXPECT_NE(clt.error().find("laplace"), std::string::npos);
  EXPECT_FALSE(NoisySgdStepFunctionals(0, 1).ok());
  EXPECT_FALSE(NoisySgdStepFunctionals(0.1, 0.01).ok());
}

}  // namespace
}  // namespace dpkit::accounting
