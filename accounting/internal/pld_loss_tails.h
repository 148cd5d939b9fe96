// Loss tails: the tail probabilities of the privacy loss of one component (Gaussian,
// Laplace or discrete Gaussian base, Poisson-sampled or not) in one direction, with the
// error bounds every cell mass built from them carries (BuildContinuousPmfs).
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_LOSS_TAILS_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_LOSS_TAILS_H_

#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/internal/pld_discrete_gaussian.h"

namespace dpkit::accounting::pld_internal {

// Standard normal upper tail Phi(-z) = P(N(0,1) > z), accurate in both tails.
ld NormalUpper(ld z);

// Base tails (BaseTails) of the Gaussian pair A = N(0, s^2), B = N(1, s^2) at the loss
// threshold t. t_err bounds the error of the threshold t itself (Poisson subsampling's
// map, see SubsampledThreshold): each tail then moves by at most the density of
// z = s t +- 1/(2s) times s t_err, which goes into a_err / b_err (twice that, as a margin).
BaseTails GaussianTails(ld sigma, ld t, ld t_err = 0);

// Base tails of the Laplace pair A = Lap(0, b), B = Lap(1, b) at t. t_err as for GaussianTails: inside (-1/b, 1/b) the tails have
// density at most 1/4 in ell; within 2 t_err of an atom (ell = +-1/b) the side the atom
// falls on is uncertain and its mass (at most 1/2) is added to the errors.
BaseTails LaplaceTails(ld b, ld t, Threshold threshold, ld t_err = 0);

// The base tails of m's base at t. `dg` is the discrete Gaussian's table
// (kDiscreteGaussian only); `t_err` bounds the rounding error of t.
BaseTails BaseTailsAt(const Mechanism& m, ld t, ld t_err, Threshold threshold,
                      const DiscreteGaussianTails* dg);

// The base threshold t = log((e^l - 1 + q)/q) of a subsampled loss threshold l (both
// directions, with l -> -l for add), and a bound on its error against the exact value at
// the grid point l. Needs e^l - 1 + q > 0.
ld SubsampledThreshold(ld l, ld q, ld* t_err);

// The tails of the loss of m (Poisson-sampled at m.sampling_rate, Zhu, Dong, Wang 2022,
// Sec. 5) in direction dir at l (LossTails). `dg`: the discrete Gaussian's table (that
// base only).
LossTails LossTailsAt(const Mechanism& m, Direction dir, ld l,
                      const DiscreteGaussianTails* dg = nullptr);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_LOSS_TAILS_H_
