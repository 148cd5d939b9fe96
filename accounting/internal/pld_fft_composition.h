// Tilted-FFT composition, (4): the composition of component PMFs by FFT of exponentially
// tilted PMFs raised to their use counts in the frequency domain, on a window sized by
// Chernoff bounds, with a certified bound on every error (aliasing, floating point). The
// proof is in the .cc file.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_FFT_COMPOSITION_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_FFT_COMPOSITION_H_

#include <complex>
#include <cstdint>
#include <limits>
#include <vector>

#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/result.h"
#include "dpkit/accounting/internal/real_fft.h"

namespace dpkit::accounting::pld_internal {

// log M(t) = log sum_i p_i e^{t eps_i} (finite part). The terms are summed in long
// double from double exponentials (relative error a few ulps, covered by the callers'
// safety factors).
ld LogMgf(const Pmf& pmf, double h, ld t);

// A coarse version of a PMF (blocks of points merged at their mean loss) for cheap
// approximate cumulant evaluations when choosing the tilt and the window.
struct Coarse {
  std::vector<double> loss, log_mass;
};
Coarse Coarsen(const Pmf& pmf, double h);

// Approximate cumulant generating function K(t) = sum_c T_c log M_c(t) and its first
// two derivatives, from the coarse PMFs.
struct Cumulants {
  ld k, k1, k2;
};
Cumulants CoarseCumulants(const std::vector<Coarse>& coarse, const std::vector<double>& counts,
                          ld t);

// Smallest N >= n of the form 4 * 2^a 3^b 5^c (kissfft's fast radices).
int64_t FftSize(int64_t n);

// The composed PMF of one direction and bound on a window, in tilted form, with the
// quantities needed to evaluate certified delta bounds.
struct Composed {
  double h;
  int64_t window_start;   // grid index of the first window entry
  int64_t n;              // window length (= FFT size)
  std::vector<double> tilted;  // c~ at window entries (index = grid index - start)
  ld lambda;              // tilt
  ld log_scale;           // K(lambda): c_j = c~_j exp(K - lambda eps_j)
  ld entry_error;         // bound on |computed c~_j - exact circular c~_j|
  ld tilted_outside;      // bound on the tilted mass outside the window (aliasing)
  ld log_above_bound;     // log of a bound on the untilted mass above the window
  ld infinity_mass;       // composed mass at +inf (upper: rounded up, lower: down)
  // First stage of a two-stage composition, upper PMF only: log of a bound on the
  // untilted mass below the window (else -inf; see (6)).
  ld log_below_bound = -std::numeric_limits<ld>::infinity();
  // Grid indices outside which the composition has no mass: the sums over the components of
  // count times their lowest (highest) index of positive mass. Window entries outside hold
  // only aliasing and rounding noise, and their true (linear) mass is 0: they count as 0 in
  // the upper bound (see (4), "Support", in pld_fft_composition.cc).
  int64_t support_lo = std::numeric_limits<int64_t>::min();
  int64_t support_hi = std::numeric_limits<int64_t>::max();
};

// Whether grid index g of a composed window can carry mass (see Composed::support_lo).
inline bool InSupport(const Composed& c, int64_t g) {
  return g >= c.support_lo && g <= c.support_hi;
}

// Tilt for a query: minimises the Chernoff estimate of its answer (lambda >= 0) on the
// coarse cumulants. For eps(delta): (K(t) - log delta)/t; for delta(eps): K(t) - t eps.
// Any lambda >= 0 gives certified results; this one makes them tight (see (4)).
ld ChooseTilt(const std::vector<Coarse>& coarse, const std::vector<double>& counts,
              const Query& query);

// What a stage's window must cover: the region of the query's answer as well as the tilted
// bulk (kTarget), or the tilted bulk only (kBulkOnly: the first stage of a two-stage
// composition, whose result is composed further).
enum class WindowCover { kTarget, kBulkOnly };

// A stage of a two-stage composition (see ComposeStaged): a fixed tilt (that of the whole
// composition) and, for the first stage, no target (the window covers the tilted bulk
// only) and an aliasing requirement of its own.
// The tilted transform of a single component (its tilted PMF folded modulo n, its FFT and
// the transform's error bound e_f), kept between compositions of the same PMF object with
// the same spacing, tilt and window size, which differ only in the power: the decomposed
// bound's block law composes F^{*(T0-k)} for k = 0..K (pld_decomposed.cc), one transform
// for all K + 1 powers. The key is the PMF's address: valid only while that PMF is alive
// and unchanged.
struct TransformCache {
  const Pmf* pmf = nullptr;
  double h = 0;
  ld lambda = 0;
  int64_t n = 0;
  std::vector<std::complex<double>> spec;
  ld e_f = 0;
  // Per frequency, the parts of the power's terms that do not depend on the power
  // (AddFrequencyTerms): log(|X| + e_f), and once a power needed them, log|X| and arg X
  // (log_m is NaN until then). Kept only by a shared cache (StageOptions::transform):
  // each power multiplies the same doubles by its count, so every bit is as before.
  std::vector<double> log_a, log_m, arg;
};

struct StageOptions {
  ld lambda;
  WindowCover cover;
  ld required;           // kBulkOnly: largest tilted mass allowed outside the window
  ld log_above_allowed;  // kBulkOnly: log of the largest untilted mass above it
  TransformCache* transform = nullptr;  // reuse of a single component's transform, if set
};

// Composes the components (their `bound` PMFs, each used count times) for a query.
// `tolerance` (the requested relative accuracy of eps) sets how much aliasing the window
// may leave: the tilted mass outside it is at most 1e-2 tolerance / (1 + lambda spread),
// which changes delta by a relative 1e-2 tolerance or less and so eps by far less than
// the tolerance. (This only affects tightness: the aliasing is bounded and accounted for
// either way.) `fft` keeps its plans (twiddle tables) between calls of the same size.
// `stage`: the tilt and window of a stage of a two-stage composition (else the tilt is
// chosen for the query). A grid-limit error where the window would exceed
// kMaxWindowPoints.
Result<Composed> Compose(const std::vector<ComponentPmfs>& comps, Bound bound, double h,
                         const Query& query, double tolerance, RealFft* fft,
                         const StageOptions* stage = nullptr);

// An estimate of the window Compose (one stage, no StageOptions) would choose at the finer
// spacing h_target, from these components built on spacing h: its width search on the
// coarse estimates, with each window's span counted in points of h_target. The points, or
// the grid-limit error whose need the search reached. Not a bound and not the certified
// window (the tilted law's centre and spread converge as the spacing shrinks, but are
// estimated here on the coarser grid): it decides only whether building the components on
// the finer grid is worth it (pld.cc, CertifiedBounds), never a privacy number.
Result<int64_t> EstimatedWindowPoints(const std::vector<ComponentPmfs>& comps, Bound bound,
                                      double h, const Query& query, double tolerance,
                                      double h_target);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_FFT_COMPOSITION_H_
