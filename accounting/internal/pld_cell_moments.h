// Quadrature cell moments, (2b): certified enclosures of the moments c = A - e^a B and
// d = e^b B - A of a loss cell (a, b] of a (Poisson-sampled) Gaussian component by
// Gauss-Legendre quadrature, for cells whose tail differences leave them too uncertain
// (BuildContinuousPmfs intersects both enclosures). The proof is in the .cc file.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_CELL_MOMENTS_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_CELL_MOMENTS_H_

#include "dpkit/accounting/internal/pld_common.h"

namespace dpkit::accounting::pld_internal {

// Gauss-Legendre rules with kGlPoints[r] points. Nodes: the zeros of the Legendre
// polynomial P_n by Newton's method (from cos(pi (i + 3/4)/(n + 1/2)), Tricomi's estimate),
// weights 2 / ((1 - x^2) P_n'(x)^2). trunc_log[k - 1]: the rho-dependent part of the log
// of the truncation bound at rho = 2^k (see GaussianCellMoments).
constexpr int kGlRules = 2;
constexpr int kGlPoints[kGlRules] = {5, 10};
constexpr int kGlMaxPoints = 10;
constexpr int kRhoSteps = 12;

struct GaussLegendreRule {
  int n;
  ld node[kGlMaxPoints];
  ld weight[kGlMaxPoints];
  ld trunc_log[kRhoSteps];
};

// Rule r (0 <= r < kGlRules), computed once.
const GaussLegendreRule& GlRule(int r);

// Enclosures [c - c_err, c + c_err] of C(u, v) and [d - d_err, d + d_err] of D(u, v) for
// the exact base thresholds within u_err, v_err of u < v. The 5-point rule is kept where
// its truncation bound is below 1e-3 `target` relative, else the 10-point one is used.
// false where the quadrature does not apply (far tails, cells wide against the density's
// scale).
struct CellMoments {
  ld c, c_err, d, d_err;
};
// (C and D of the base pair with noise multiplier s on the base cell (u, v], see (2b).)
bool GaussianCellMoments(ld s, ld u, ld u_err, ld v, ld v_err, ld target, CellMoments* out);

// The error bound of a base threshold LossTails::t, the map of l' = l (remove) or -l (add),
// against the threshold of the exact grid value k h, which l (rounded) is within kLdUnit |l|
// of: the map's own error plus that rounding times dt/dl' = e^{l'} / (q e^t) (1 unsampled;
// none at the exact l = 0).
ld GridThresholdError(ld q, ld l_signed, const LossTails& tails);

// Enclosures of the moments c, d of the cell (l_a, l_b] of a (sub)sampled Gaussian
// component in direction dir, by (2b), from the loss tails at its ends (LossTailsAt, which
// carry the base thresholds). false where (2b) does not apply.
bool GaussianLossCellMoments(const Mechanism& m, Direction dir, ld l_a, const LossTails& at_a,
                             ld l_b, const LossTails& at_b, ld target, CellMoments* out);

// Relative uncertainty of a cell moment above which BuildContinuousPmfs also encloses it
// by quadrature (2b), for a component used `steps` times: a relative error r of every
// cell compounds to about steps * r in delta, kept below 1e-4 (the refinement aims at
// gaps of 1e-3 in epsilon, and epsilon moves by 1e-4 / (eps dlog(delta)/deps) <= 1e-4
// for delta <= 1e-3); at most 1e-8, at least 1e-12.
// Under Emscripten (see kLdUnit) the tail differences are ~2000x less precise, and the
// browser's numbers should agree with the command line's to 1e-6: there 1e-6 / steps.
ld QuadratureTrigger(double steps);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_CELL_MOMENTS_H_
