// Privacy loss distribution (PLD) accountant with certified two-sided bounds.
//
// For a pair of output distributions (P, Q) on neighbouring datasets the privacy
// loss is L = log(dP/dQ) under P, and the hockey-stick divergence is
//   delta(eps) = E_P[(1 - e^{eps - L})_+] + P(L = +inf)
// (Sommer, Meiser, Mohammadi 2019; Koskela, Jälkö, Honkela 2020). Composition adds
// independent losses, so the PLD of a composition is the convolution of the PLDs.
//
// dpkit computes, for every call, TWO numbers:
//  * a pessimistic one: the delta of a discrete PLD that DOMINATES the true one
//    (its delta(eps) is >= the true delta(eps) for every eps, and dominance is kept by
//    composition), plus explicit bounds on every truncation, aliasing and
//    floating-point error. It is a proven upper bound on delta(eps), hence on eps(delta).
//  * an optimistic one: the delta of a discrete PLD dominated BY the true one, minus
//    the same error bounds. It is a proven lower bound on the exact value.
// Both are reported so that the user sees how tight the certified value is.
//
// Discretisation (per component, see accounting/internal/pld_cells.cc): "connect the dots"
// (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022) for the pessimistic PLD; for the
// optimistic PLD a mass-preserving chain (each cell merged into one atom, atoms split
// between neighbouring grid points without ever lifting the delta-curve) joined to a
// tangent-corrected connect-the-dots PMF in the tail. Composition: fast Fourier transform
// (internal/real_fft.h: Eigen's kissfft, bit for bit) of exponentially tilted PMFs, raised to the repetition count in the
// frequency domain. The proofs are beside the code in accounting/internal/ (the layout is
// in accounting/README.md).
//
// Adjacency: add/remove. Both directions (the dataset gains or loses the record) are
// bounded and the maximum is reported (Zhu, Dong, Wang 2022, Sec. 5); the lower bound
// comes from the direction with the larger upper bound, and a direction whose certified
// upper bound on a coarse grid is already below the other's is not refined further.
// Replace-one, for SampledWithoutReplacement(n, m, Gaussian | Laplace | DiscreteGaussian)
// (fixed-size batches): the upper bound composes the symmetric PLD of C_p(f), p = m/n (Dong,
// Roth, Su 2019, Thm. 4.2), built from the Poisson-sampled base's remove direction; the lower
// bound is that of an explicit pair of neighbouring datasets, whose outputs are the Poisson
// pairs of the same rate (internal/pld_replace_one.cc has both proofs). Such events may be
// composed with unsampled ones, not with Poisson-sampled ones (add/remove adjacency).
//
// Supported events: Gaussian, Laplace, DiscreteGaussian (its exact lattice-valued loss),
// PoissonSampled(q, Gaussian | Laplace | DiscreteGaussian) (nested Poisson sampling
// multiplies the rates), PureDp, ApproxDp (through their worst-case
// randomized-response pairs, Kairouz, Oh, Viswanath 2015), SelfComposed, Composed, and
// PoissonSampled(q, Composed | SelfComposed) of those (not themselves sampled): the inner
// composed PLD is subsampled as a whole (see internal/pld_sampled_composition.cc), and
// SampledWithoutReplacement(n, m, Gaussian | Laplace | DiscreteGaussian) under replace-one
// adjacency (see "Adjacency").
#ifndef DPKIT_ACCOUNTING_PLD_H_
#define DPKIT_ACCOUNTING_PLD_H_

#include <cstdint>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

struct PldOptions {
  // Requested accuracy: the loss grid is chosen so that epsilon_upper exceeds the exact
  // epsilon by roughly this relative amount or less (the gap to epsilon_lower is
  // larger, about 10x). Finite, in [1e-7, 0.1]. Both bounds are certified whatever the
  // value; a smaller tolerance only costs time and memory.
  double epsilon_tolerance = 1e-4;
  // Loss grid spacing; 0 chooses it from epsilon_tolerance. Otherwise in [1e-7, 1].
  double discretization_interval = 0;
  // PldEpsilon only: also bound delta(0) (EpsilonBounds::delta0_*) on the grids epsilon
  // is computed on, to within 10 epsilon_tolerance delta(0) where those grids allow:
  // composed with its own tilt only where epsilon's curves leave the gap wider (usually
  // one extra composition, for the lower bound), and where that is still too wide, by the
  // decomposed bound of delta(0) on the final grid (pld.cc, Delta0Bounds).
  bool with_delta0 = false;
  // Events with sampling without replacement (replace-one adjacency) only: compute the
  // lower bound on the mechanism's exact value from its explicit pair of datasets (a
  // second PLD computation, see "Adjacency" above). false skips it: epsilon_lower /
  // delta_lower / delta0_lower are then the trivial 0 (analysis_lower is still computed);
  // calibrations, which need only the upper bound, use it.
  bool mechanism_lower_bound = true;
};

struct EpsilonBounds {
  double epsilon_upper;            // certified: the mechanism is (epsilon_upper, delta)-DP
  double epsilon_lower;            // certified: it is NOT (eps, delta)-DP for eps < this
  double discretization_interval;  // the loss grid spacing used
  // Certified bounds on delta(0) = the total variation distance (Dong, Roth, Su 2019, Prop.
  // 2.12 at eps = 0; symmetric, so either direction's bound serves), from the compositions
  // on the grids built for epsilon; with_delta0 adds those PldOptions::with_delta0 says.
  // Else (or where no window covered loss 0) delta0_upper = 1, the trivial bound: callers
  // then compute PldDelta(event, 0).
  double delta0_upper = 1;
  double delta0_lower = 0;
  // Certified lower bound on the exact epsilon of the ANALYSIS behind epsilon_upper: equal
  // to epsilon_lower except for events with sampling without replacement, whose upper bound
  // composes DRS 2019's C_p(f), which may exceed the mechanism's exact value (the gap
  // [analysis_lower, epsilon_upper] is the discretisation's, [epsilon_lower,
  // analysis_lower] the analysis').
  double analysis_lower = 0;
  // Whether the grid epsilon_tolerance asks for exceeded the limits, so that a coarser one
  // (discretization_interval) was used: a second query of the same event on the automatic
  // grid would search for a fitting grid again (callers may pass this one instead).
  bool grid_coarsened = false;
  // with_delta0: whether delta(0)'s gap was still wide on epsilon's final grid and the
  // decomposed bound (pld.cc, (7)) was applied to delta(0) there, which is the last step
  // PldDelta(event, 0) would take too: a second computation of delta(0) would search the
  // same bounds again (q 1e-4, sigma 0.5, T 1e7: 25 s for the same interval).
  bool delta0_decomposed = false;
};

struct DeltaBounds {
  double delta_upper;  // certified upper bound on the smallest delta at this epsilon
  double delta_lower;  // certified lower bound on it
  double discretization_interval;
  double analysis_lower = 0;  // as EpsilonBounds::analysis_lower, for delta
};

// Bounds on the smallest epsilon with delta(epsilon) <= delta. delta in [1e-200, 1).
// epsilon_upper is +inf only when the certified delta bound cannot reach `delta` at any
// finite epsilon (e.g. an ApproxDp event with a larger delta). The loss grid follows
// epsilon_tolerance; where it would exceed the internal limits (2^21 points per
// component, 2^22 in the composed window) a coarser grid is used (both bounds stay
// certified, the gap is larger), and an event that does not fit even at spacing 1 gets
// an error ("the privacy loss grid would need N points ...").
Result<EpsilonBounds> PldEpsilon(const Event& event, double delta,
                                 const PldOptions& options = {});

// Bounds on delta(epsilon). epsilon finite, >= 0. Above epsilon = 1e6 the bounds at 1e6
// are returned with no lower bound (0): delta is nonincreasing in epsilon, so they hold.
Result<DeltaBounds> PldDelta(const Event& event, double epsilon,
                             const PldOptions& options = {});

// The composed pessimistic PLD of one direction on its grid, for tradeoff curves
// (//accounting:fdp): masses[j] is an upper bound on the P-probability of loss
// (min_index + j) * interval (after dominating discretisation), infinity_mass on
// P(L = +inf). The masses are non-negative; their sum may slightly exceed 1 where
// error bounds were added.
struct ComposedPld {
  double interval;
  int64_t min_index;
  std::vector<double> masses;
  double infinity_mass;
};

// Both directions (remove, add) of the pessimistic composed PLD, each truncated to the
// region that carries all but `tail_mass` of its probability (the rest is moved to
// +inf, so dominance is kept). tail_mass in (0, 0.01].
Result<std::vector<ComposedPld>> PessimisticComposedPlds(const Event& event,
                                                         double tail_mass,
                                                         const PldOptions& options = {});

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_PLD_H_
