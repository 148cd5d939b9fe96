// Shared vocabulary of the PLD accountant's internal steps (accounting/pld.cc drives them):
// the arithmetic type ld and its rounding units (pld_real.h), the grid limits, the mechanisms
// (components) of a flattened event, the directions and bounds, and the PMF types the
// steps hand to each other.
//
// Notation used by every step. A PLD is the law of L = log(dP/dQ) under P (with an atom
// at +inf for the P-mass where Q = 0). With x = e^eps, delta(x) = E_P[(1 - x e^{-L})_+] +
// P(L = inf) is convex and non-increasing in x, and delta'(x) = -Q(L > log x).
//
// (1) Dominance is kept by composition. If the tradeoff function of pair A is pointwise
//     below that of pair B (equivalently delta_A(eps) >= delta_B(eps) for all eps), the
//     same holds after composing both with any third pair (Dong, Roth, Su 2019, Lemma
//     3.? "tensor product is monotone"; Zhu, Dong, Wang 2022, Thm. 10). So it suffices
//     to dominate (resp. be dominated by) each component: the pessimistic (Bound::kUpper)
//     PMFs dominate, the optimistic (Bound::kLower) ones are dominated.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_COMMON_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_COMMON_H_

#include <cfloat>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "dpkit/accounting/internal/pld_real.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting::pld_internal {

constexpr double kUnit = DBL_EPSILON / 2;
// Error allowance for a CDF value computed in ld (erfc, exp, threshold).
constexpr ld kCdfUlps = 256;
// Largest number of grid points of one component (about 270 bytes each while it is
// built) and of the FFT window (about 150 bytes each): a few hundred MB at most, and
// seconds, not minutes.
constexpr int64_t kMaxGridPoints = int64_t{1} << 21;
constexpr int64_t kMaxWindowPoints = int64_t{1} << 22;
// Largest |privacy loss| a component's grid covers: e^{kMaxLoss} must stay far below
// LDBL_MAX ~ e^{11356}. Losses beyond it are certified as described in
// BuildContinuousPmfs; an epsilon above it is reported as +inf. (Under Emscripten ld is
// double, whose exp overflows from e^709.78 on, as musl's long double exp did before:
// the steps test isfinite where that can happen, and the calculator limits epsilon to 600.)
constexpr ld kMaxLoss = 10000;

// The error for a grid that would exceed those limits: code ErrorCode::kGridLimit with the
// points needed, so that the driver (CertifiedBounds) retries on a coarser grid. The
// message starts with "the privacy loss grid would need N points".
Error GridLimitError(int64_t need, int64_t limit, double h);

// kBoundedRange: any eps-bounded-range mechanism (parameter eps); see BuildDirection.
// kDiscreteGaussian: N_Z(0, sigma^2) on an integer query (parameter sigma, and
// `sensitivity`); see DiscreteGaussianTails.
// kSampledComposition: Poisson sampling (rate sampling_rate) of a composition, the JSON of
// the composed event in `inner`, parameter an estimate of the per-step loss standard
// deviation (grid choice only); see BuildSampledCompositionPmfs.
// kWithoutReplacement: sampling without replacement of a Gaussian, Laplace or discrete
// Gaussian under replace-one adjacency (rate sampling_rate = m/n rounded up, the JSON of the
// base event in `inner`, parameter an estimate of the per-step loss standard deviation);
// its PMFs are the same in both directions; see pld_replace_one.cc.
enum class Base {
  kGaussian,
  kLaplace,
  kRandomizedResponse,
  kBoundedRange,
  kDiscreteGaussian,
  kSampledComposition,
  kWithoutReplacement
};
// The direction of the add/remove adjacency: the dataset loses the record (remove) or
// gains it (add); see (5) in accounting/pld.cc.
enum class Direction { kRemove, kAdd };
// Which certified bound a PMF or a computation serves: the pessimistic upper bound
// (dominating PMFs) or the optimistic lower bound (dominated PMFs).
enum class Bound { kUpper, kLower };
// What a composition is evaluated for: delta at a given epsilon (kDeltaAtEpsilon), or
// epsilon at a given delta (kEpsilonAtDelta); `value` is that epsilon or delta.
struct Query {
  enum class Kind { kDeltaAtEpsilon, kEpsilonAtDelta };
  Kind kind;
  double value;
  bool at_epsilon() const { return kind == Kind::kDeltaAtEpsilon; }
};

// One component of a composition: a base mechanism, optionally Poisson subsampled.
struct Mechanism {
  Base base;
  double parameter;      // noise multiplier (Gaussian), scale (Laplace), eps (RR), sigma (DG)
  double sampling_rate;  // 1 = not subsampled
  double rr_delta;       // ApproxDp delta (RR only)
  int64_t sensitivity = 0;  // integer L2 sensitivity (discrete Gaussian only)
  std::string inner = {};   // the sampled composition's event JSON (kSampledComposition)
  bool operator<(const Mechanism& o) const {
    return std::tie(base, parameter, sampling_rate, rr_delta, sensitivity, inner) <
           std::tie(o.base, o.parameter, o.sampling_rate, o.rr_delta, o.sensitivity, o.inner);
  }
};

// Where the upper tail of a loss threshold t starts: ell > t (kAbove: the tails are
// P(ell > t) and P(ell <= t)) or ell >= t (kAtOrAbove: P(ell >= t) and P(ell < t)).
enum class Threshold { kAbove, kAtOrAbove };

// Tail probabilities of the base privacy loss ell = log(dB/dA), where A is the output
// without the record and B with it: A(ell > t), A(ell <= t), B(ell > t), B(ell <= t)
// (Threshold::kAbove) or the same with >= / < (Threshold::kAtOrAbove). The smaller of each pair is computed
// directly so that it keeps full relative precision.
// For the continuous bases every value is accurate to kCdfUlps ulps. A lattice base (the
// discrete Gaussian) also states absolute error bounds a_err (on a_above and a_below) and
// b_err, and `atoms`, a key of the set of atoms above the threshold: equal keys at two
// thresholds mean that no atom lies between them, so the cell between is exactly empty
// (NaN when not known: continuous bases, or an atom within rounding of the threshold).
struct BaseTails {
  ld a_above, a_below, b_above, b_below;
  ld a_err = 0, b_err = 0;
  ld atoms = std::numeric_limits<ld>::quiet_NaN();
};

// Tails of the privacy loss L of one direction at l: P(L > l), P(L <= l), Q(L > l),
// Q(L <= l); p_err, q_err and atoms as in BaseTails (0, 0, NaN for continuous bases).
// t, t_err: the base threshold the tails were taken at (l itself unsampled; the subsampling
// map of l (remove) or -l (add) otherwise) and its error bound; t is NaN where the map has
// no finite value (all mass on one side).
struct LossTails {
  ld sp, fp, sq, fq;
  ld p_err = 0, q_err = 0;
  ld atoms = std::numeric_limits<ld>::quiet_NaN();
  ld t = std::numeric_limits<ld>::quiet_NaN(), t_err = 0;
};

// A PMF on the grid: mass[i] at loss (min_index + i) h, plus mass at +inf.
struct Pmf {
  int64_t min_index = 0;
  std::vector<ld> mass;
  std::vector<ld> log_mass;  // log(mass), -inf where mass <= 0 (filled by FillLogs)
  ld infinity_mass = 0;
};

// Fills pmf->log_mass from pmf->mass.
void FillLogs(Pmf* pmf);

struct ComponentPmfs {
  Pmf upper, lower;
  Pmf& of(Bound bound) { return bound == Bound::kUpper ? upper : lower; }
  const Pmf& of(Bound bound) const { return bound == Bound::kUpper ? upper : lower; }
  // The tangent-corrected optimistic PMF alone ((3a); empty where the component has no
  // cells): CertifiedBoundsOnGrid also tries it where the combined one leaves a wide gap.
  Pmf lower_alt;
  double count;
};

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_COMMON_H_
