// Test hooks of the PLD accountant (testonly): single proof steps of accounting/pld.cc's
// internals through plain types, for the end-to-end tests in accounting/.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_TESTING_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_TESTING_H_

#include <utility>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

// The decomposed lower or upper bound on epsilon(delta) of (7) (pld_decomposed.cc) alone
// (the remove direction; the event must be one Gaussian or Laplace component,
// Poisson-sampled or not, used 16 to 1e12 times), with the ordinary grid `interval`. An
// error also where (7) does not apply.
Result<double> DecomposedEpsilonBoundForTesting(const Event& event, double delta,
                                                double interval, pld_internal::Bound bound);

// The quadrature enclosures of (2b) (pld_cell_moments.cc) alone, for the cell (a, b] of
// the privacy loss of a Gaussian with noise multiplier sigma, Poisson-sampled at rate q
// (q = 1: not sampled), in direction dir:
// c = P(cell) - e^a Q(cell) lies in [c - c_err, c + c_err] and d = e^b Q(cell) - P(cell)
// in [d - d_err, d + d_err]. An error where (2b) does not apply to the cell.
struct CellMomentEnclosure {
  long double c, c_err, d, d_err;
};
Result<CellMomentEnclosure> GaussianCellMomentsForTesting(double sigma, double q,
                                                          pld_internal::Direction dir,
                                                          long double a, long double b);

// The Gauss-Legendre rules of (2b) (5 or 10 points; empty for other counts), (node,
// weight) pairs on [-1, 1].
std::vector<std::pair<long double, long double>> GaussLegendreRuleForTesting(int points);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_TESTING_H_
