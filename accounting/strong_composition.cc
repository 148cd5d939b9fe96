#include "dpkit/accounting/strong_composition.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "dpkit/accounting/composition.h"
#include "dpkit/accounting/gdp.h"
#include "dpkit/accounting/internal/format.h"

namespace dpkit::accounting {
namespace {

std::string Num(double value) { return internal::FormatDouble(value); }

constexpr int64_t kMaxSteps = 10000000;

Result<void> CheckInputs(double sampling_rate, double noise_multiplier, int64_t steps,
                         double delta) {
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return Error{"sampling_rate must be in (0, 1], got " + Num(sampling_rate)};
  }
  if (!(std::isfinite(noise_multiplier) && noise_multiplier > 0)) {
    return Error{"noise_multiplier must be finite and > 0, got " + Num(noise_multiplier)};
  }
  if (steps < 1 || steps > kMaxSteps) {
    return Error{"steps must be in [1, 1e7], got " + std::to_string(steps)};
  }
  if (!(delta > 0 && delta < 1)) return Error{"delta must be in (0, 1), got " + Num(delta)};
  return {};
}

// Share of delta spent on the steps as a function of x in R: the logistic function,
// so that the search covers shares close to 0 and to 1 alike.
double ShareOf(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace

const char* StrongCompositionTheoremName(StrongCompositionTheorem theorem) {
  return theorem == StrongCompositionTheorem::kAdvanced ? "advanced" : "optimal";
}

Result<StrongCompositionBound> StrongCompositionAtShare(double sampling_rate,
                                                        double noise_multiplier,
                                                        int64_t steps, double delta,
                                                        StrongCompositionTheorem theorem,
                                                        double step_share) {
  if (auto ok = CheckInputs(sampling_rate, noise_multiplier, steps, delta); !ok.ok()) {
    return ok.error_value();
  }
  if (!(step_share > 0 && step_share < 1)) {
    return Error{"step_share must be in (0, 1), got " + Num(step_share)};
  }
  const double count = static_cast<double>(steps);
  // Target delta of one unsampled Gaussian step: T q d0 = step_share * delta.
  const double target_d0 = std::fmin(step_share * delta / (count * sampling_rate), 0.5);
  StrongCompositionBound bound;
  // Balle & Wang 2018, Thm. 8 (= Bu et al. 2020, eq. 3.2 at mu = 1/z): the smallest e0
  // with d0(e0) <= target; GdpEpsilon returns it on the safe side, and d0 is recomputed
  // at the returned e0 so that the reported pair is exact.
  const double mu = 1 / noise_multiplier;
  auto e0 = GdpEpsilon(mu, target_d0);
  if (!e0.ok()) return e0.error_value();
  auto d0 = GdpDelta(mu, *e0);
  if (!d0.ok()) return d0.error_value();
  bound.gaussian_epsilon = *e0;
  bound.gaussian_delta = *d0;
  // Amplification by Poisson subsampling (Li, Qardaji, Su 2012, Thm. 1; Balle, Barthe,
  // Gaboardi 2018, Thm. 8): (log(1 + q(e^e0 - 1)), q d0).
  bound.step_epsilon = std::log1p(sampling_rate * std::expm1(*e0));
  bound.step_delta = sampling_rate * *d0;
  bound.slack_delta = delta - count * bound.step_delta;
  if (!(bound.slack_delta > 0)) {
    return Error{"the steps' delta leaves no slack: T q d0 = " +
                 Num(count * bound.step_delta) + " >= delta = " + Num(delta)};
  }
  if (theorem == StrongCompositionTheorem::kAdvanced) {
    // Dwork, Rothblum, Vadhan 2010, Thm. III.3: (e_s sqrt(2 T ln(1/d')) +
    // T e_s (e^e_s - 1), T d_s + d')-DP (and basic composition, T e_s, always holds).
    auto total = AdvancedComposition(bound.step_epsilon, bound.step_delta, steps,
                                     bound.slack_delta);
    if (!total.ok()) return total.error_value();
    bound.epsilon = total->epsilon;
  } else {
    // Kairouz, Oh, Viswanath 2015, Thm. 3.3: the exact epsilon of the T-fold
    // composition of an (e_s, d_s)-DP mechanism at total delta.
    auto total = OptimalCompositionEpsilon(bound.step_epsilon, bound.step_delta, steps, delta);
    if (!total.ok()) return total.error_value();
    bound.epsilon = *total;
  }
  return bound;
}

Result<StrongCompositionBound> StrongCompositionDpSgd(double sampling_rate,
                                                      double noise_multiplier, int64_t steps,
                                                      double delta,
                                                      StrongCompositionTheorem theorem) {
  if (auto ok = CheckInputs(sampling_rate, noise_multiplier, steps, delta); !ok.ok()) {
    return ok.error_value();
  }
  auto at = [&](double x) {
    return StrongCompositionAtShare(sampling_rate, noise_multiplier, steps, delta, theorem,
                                    ShareOf(x));
  };
  // A coarse grid of shares (logit -12 .. 12), then golden-section search between the
  // neighbours of the best grid point. Every evaluated split is a valid bound, so the
  // minimum found is certified even where the search misses the exact optimum.
  constexpr int kGrid = 13;
  constexpr int kGoldenIterations = 20;  // bracket 2 * 0.618^20 ~ 1e-4 wide in logit
  Result<StrongCompositionBound> best = Error{"no split of delta gave a bound"};
  double best_x = 0;
  auto consider = [&](double x) -> double {
    auto bound = at(x);
    if (!bound.ok()) return INFINITY;
    if (!best.ok() || bound->epsilon < best->epsilon) {
      best = bound;
      best_x = x;
    }
    return bound->epsilon;
  };
  for (int i = 0; i < kGrid; ++i) consider(-12 + 24.0 * i / (kGrid - 1));
  if (!best.ok()) return best;
  const double golden = (std::sqrt(5.0) - 1) / 2;
  double lo = best_x - 2, hi = best_x + 2;
  double a = hi - golden * (hi - lo), b = lo + golden * (hi - lo);
  double fa = consider(a), fb = consider(b);
  for (int iteration = 0; iteration < kGoldenIterations; ++iteration) {
    if (fa <= fb) {
      hi = b;
      b = a;
      fb = fa;
      a = hi - golden * (hi - lo);
      fa = consider(a);
    } else {
      lo = a;
      a = b;
      fa = fb;
      b = lo + golden * (hi - lo);
      fb = consider(b);
    }
  }
  return best;
}

}  // namespace dpkit::accounting
