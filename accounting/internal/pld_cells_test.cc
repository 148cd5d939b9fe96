#include "dpkit/accounting/internal/pld_cells.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

// delta(x) of a PMF on the grid: sum_j p_j (1 - x e^{-l_j})_+ + p(+inf).
long double Delta(const Pmf& p, double h, long double eps) {
  long double d = p.infinity_mass;
  for (size_t j = 0; j < p.mass.size(); ++j) {
    const long double l = static_cast<long double>(p.min_index + static_cast<int64_t>(j)) * h;
    if (l > eps) d += p.mass[j] * (1 - std::exp(eps - l));
  }
  return d;
}

// A law of atoms (loss, P-mass) off the grid: its cell moments and its own delta-curve.
struct Atoms {
  std::vector<long double> loss, mass;
  long double Delta(long double eps) const {
    long double d = 0;
    for (size_t i = 0; i < loss.size(); ++i) {
      if (loss[i] > eps) d += mass[i] * (1 - std::exp(eps - loss[i]));
    }
    return d;
  }
  CellBounds Cells(int64_t lo, int64_t n, double h) const {
    CellBounds c{std::vector<long double>(n, 0), std::vector<long double>(n, 0),
                 std::vector<long double>(n, 0), std::vector<long double>(n, 0)};
    for (size_t i = 0; i < loss.size(); ++i) {
      const int64_t cell = static_cast<int64_t>(std::ceil(loss[i] / h)) - 1 - lo;
      const long double a = (lo + cell) * h, b = a + h;
      const long double q = mass[i] * std::exp(-loss[i]);
      c.c_up[cell] += mass[i] - std::exp(a) * q;
      c.d_up[cell] += std::exp(b) * q - mass[i];
    }
    c.c_lo = c.c_up;
    c.d_lo = c.d_up;
    return c;
  }
};

TEST(PldCellsTest, PessimisticPmfDominatesAndOptimisticIsDominated) {
  const double h = 0.05;
  const Atoms atoms{{-0.33L, -0.12L, 0.07L, 0.21L, 0.38L}, {0.1L, 0.25L, 0.3L, 0.2L, 0.15L}};
  const int64_t lo = -8, n = 18;  // grid points -0.4 .. 0.5
  Pmf upper, lower, tangent;
  CellsToPmfs(lo, h, atoms.Cells(lo, n, h), 0, 0, &upper, &lower, &tangent);
  for (long double eps = -0.5L; eps <= 0.6L; eps += 0.01L) {
    const long double exact = atoms.Delta(eps);
    EXPECT_GE(Delta(upper, h, eps), exact * (1 - 1e-15L)) << static_cast<double>(eps);
    EXPECT_LE(Delta(lower, h, eps), exact * (1 + 1e-15L) + 1e-18L) << static_cast<double>(eps);
    EXPECT_LE(Delta(tangent, h, eps), exact * (1 + 1e-15L) + 1e-18L);
  }
  // Connect-the-dots keeps the P-mass; an optimistic PMF never has more.
  long double up = 0, low = 0;
  for (long double v : upper.mass) up += v;
  for (long double v : lower.mass) low += v;
  EXPECT_NEAR(static_cast<double>(up), 1.0, 1e-12);
  EXPECT_LE(low, 1 + 1e-15L);
  EXPECT_GT(low, 0.5L);
}

TEST(PldCellsTest, RemoveNegativeKinksLeavesANonNegativeLowerCurve) {
  const double h = 0.1;
  std::vector<long double> mass = {0.2L, -0.05L, 0.3L, 0.4L, -0.02L, 0.1L};
  Pmf before;
  before.mass = mass;
  RemoveNegativeKinks(h, &mass);
  Pmf after;
  after.mass = mass;
  for (long double v : mass) EXPECT_GE(v, 0);
  for (long double eps = -0.2L; eps <= 0.7L; eps += 0.02L) {
    EXPECT_LE(Delta(after, h, eps), Delta(before, h, eps) + 1e-15L);
  }
}

TEST(PldCellsTest, CombineKeepsTheChainWhereTheTangentPmfIsNotAbove) {
  Pmf chain, tangent, out;
  chain.mass = {0.5L, 0.5L};
  tangent.mass = {0.4L, 0.4L};
  CombineLowerPmfs(0.1, chain, tangent, &out);
  EXPECT_EQ(out.mass, chain.mass);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
