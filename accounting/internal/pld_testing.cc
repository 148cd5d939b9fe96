#include "dpkit/accounting/internal/pld_testing.h"

#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_cell_moments.h"
#include "dpkit/accounting/internal/pld_decomposed.h"
#include "dpkit/accounting/internal/pld_loss_tails.h"

namespace dpkit::accounting {

using pld_internal::Bound;
using pld_internal::Direction;
using pld_internal::ld;

Result<CellMomentEnclosure> GaussianCellMomentsForTesting(double sigma, double q, Direction dir,
                                                          long double a, long double b) {
  if (!(sigma > 0 && q > 0 && q <= 1 && a < b)) {
    return Error{"GaussianCellMomentsForTesting: needs sigma > 0, q in (0, 1], a < b"};
  }
  const pld_internal::Mechanism m{pld_internal::Base::kGaussian, sigma, q, 0};
  pld_internal::CellMoments r;
  if (!GaussianLossCellMoments(m, dir, a, LossTailsAt(m, dir, a), b, LossTailsAt(m, dir, b),
                               pld_internal::QuadratureTrigger(1e12), &r)) {
    return Error{"the quadrature (2b) does not apply to this cell"};
  }
  return CellMomentEnclosure{r.c, r.c_err, r.d, r.d_err};
}

std::vector<std::pair<long double, long double>> GaussLegendreRuleForTesting(int points) {
  std::vector<std::pair<long double, long double>> out;
  int r = 0;
  while (r < pld_internal::kGlRules && pld_internal::kGlPoints[r] != points) ++r;
  if (r == pld_internal::kGlRules) return out;
  const pld_internal::GaussLegendreRule& g = pld_internal::GlRule(r);
  for (int i = 0; i < g.n; ++i) out.emplace_back(g.node[i], g.weight[i]);
  return out;
}

Result<double> DecomposedEpsilonBoundForTesting(const Event& event, double delta,
                                                double interval, Bound bound) {
  const pld_internal::GridOptions options{1e-4, interval};
  auto decomposed = DecomposedBoundsForEvent(
      event, options, static_cast<ld>(delta) * 1e-7L, Direction::kRemove, {bound},
      pld_internal::Query{pld_internal::Query::Kind::kEpsilonAtDelta, delta},
      std::numeric_limits<ld>::infinity());
  if (!decomposed.ok()) return decomposed.error_value();
  if (!decomposed->has_value()) {
    return Error{"the decomposed bound (7) does not apply to this event"};
  }
  const Result<std::optional<ld>>& result =
      bound == Bound::kUpper ? (*decomposed)->upper : (*decomposed)->lower;
  if (!result.ok()) return result.error_value();
  if (!result->has_value()) return Error{"the decomposed bound (7) does not apply here"};
  return static_cast<double>(**result);
}

}  // namespace dpkit::accounting
