#include "dpkit/accounting/calibrate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dpkit/accounting/calibrate_search.h"
#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/gdp.h"
#include "dpkit/accounting/internal/format.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/rdp.h"

namespace dpkit::accounting {
namespace {

using internal::FormatDouble;

constexpr double kMinNoise = 1e-3;
constexpr double kMaxNoise = 1e4;
// Bracket width at which the bisection stops: 0.05 % (half the promised 0.1 %).
constexpr double kRelativeWidth = 5e-4;

Result<void> CheckCommon(double target_epsilon, double delta, double sampling_rate) {
  if (!(std::isfinite(target_epsilon) && target_epsilon > 0)) {
    return Error{"target_epsilon must be finite and > 0, got " + FormatDouble(target_epsilon)};
  }
  if (!(delta > 0 && delta < 1)) {
    return Error{"delta must be in (0, 1), got " + FormatDouble(delta)};
  }
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return Error{"sampling_rate must be in (0, 1], got " + FormatDouble(sampling_rate)};
  }
  return OkResult();
}

// Where the target is met on a geometric scale: eps_at(x) <= target for x on the "good"
// side of an (assumed) boundary — x large when good_is_large (noise multiplier), x small
// otherwise (sampling rate). Steps by `factor` from `start` until a good and a bad point
// are bracketed inside [min_x, max_x], then bisects in log(x), always keeping an
// evaluated good end, until the bracket is narrower than kRelativeWidth. Returns the
// good end and its epsilon (so the answer is re-accounted by construction); the bad-side
// limit itself when it is good; an error `none` when even the good-side limit is bad.
struct Found {
  double x;
  double epsilon;
};

template <typename EpsAt>
Result<Found> GeometricSearch(const EpsAt& eps_at, double target, double start, double factor,
                              double min_x, double max_x, bool good_is_large,
                              const std::string& none) {
  const double good_limit = good_is_large ? max_x : min_x;
  const double bad_limit = good_is_large ? min_x : max_x;
  auto toward_good = [&](double x) {
    return good_is_large ? std::min(x * factor, max_x) : std::max(x / factor, min_x);
  };
  auto toward_bad = [&](double x) {
    return good_is_large ? std::max(x / factor, min_x) : std::min(x * factor, max_x);
  };
  double good = 0, bad = 0, eps_good = 0;
  const double x0 = std::min(std::max(start, min_x), max_x);
  auto e0 = eps_at(x0);
  if (!e0.ok()) return Error{e0.error()};
  if (*e0 <= target) {
    good = x0;
    eps_good = *e0;
    while (true) {
      if (good == bad_limit) return Found{good, eps_good};
      const double x = toward_bad(good);
      auto e = eps_at(x);
      if (!e.ok()) return Error{e.error()};
      if (!(*e <= target)) {
        bad = x;
        break;
      }
      good = x;
      eps_good = *e;
    }
  } else {
    bad = x0;
    while (true) {
      if (bad == good_limit) return Error{none};
      const double x = toward_good(bad);
      auto e = eps_at(x);
      if (!e.ok()) return Error{e.error()};
      if (*e <= target) {
        good = x;
        eps_good = *e;
        break;
      }
      bad = x;
    }
  }
  // Invariant: eps(good) = eps_good <= target < eps(bad).
  while (std::max(good, bad) / std::min(good, bad) > 1 + kRelativeWidth) {
    const double mid = std::sqrt(good * bad);
    auto e = eps_at(mid);
    if (!e.ok()) return Error{e.error()};
    if (*e <= target) {
      good = mid;
      eps_good = *e;
    } else {
      bad = mid;
    }
  }
  return Found{good, eps_good};
}

// Step factor of the bracketing phase (RDP and GDP searches, blind starts).
constexpr double kBlindFactor = 2;

// The PLD searches (calibrate_search.h): coarse evaluations at 10x the requested grid
// tolerance (capped at PldOptions' largest, 0.1) place the points; the answer and its bad
// neighbour are evaluated with the caller's options.
constexpr double kCoarseToleranceFactor = 10;
constexpr double kLargestTolerance = 0.1;

// Certified PLD bounds on epsilon of DpSgdEvent(q, sigma, T) at delta, with the caller's
// options (fine) or a coarser grid.
Result<calibrate_internal::EpsilonInterval> PldInterval(double sampling_rate,
                                                        double noise_multiplier,
                                                        int64_t steps, double delta,
                                                        const PldOptions& pld, bool fine) {
  auto event = DpSgdEvent(sampling_rate, noise_multiplier, steps);
  if (!event.ok()) return Error{event.error()};
  PldOptions options = pld;
  if (!fine && options.discretization_interval == 0) {
    options.epsilon_tolerance =
        std::min(kLargestTolerance, options.epsilon_tolerance * kCoarseToleranceFactor);
  }
  auto bounds = PldEpsilon(*event, delta, options);
  if (!bounds.ok()) return Error{bounds.error()};
  return calibrate_internal::EpsilonInterval{bounds->epsilon_upper, bounds->epsilon_lower};
}

// d log epsilon / d log x of a cheap accountant (eps_at: x -> its epsilon; the CLT's, or
// RDP's for sampling without replacement) between x0 and x1: the PLD search's first slope.
// 0 when not finite.
template <typename EpsAt>
double CltSlope(const EpsAt& eps_at, double x0, double x1) {
  auto e0 = eps_at(x0);
  auto e1 = eps_at(x1);
  if (!e0.ok() || !e1.ok() || !(*e0 > 0) || !(*e1 > 0)) return 0;
  const double slope = std::log(*e1 / *e0) / std::log(x1 / x0);
  return std::isfinite(slope) ? slope : 0;
}

// A 1 % step for CltSlope.
constexpr double kSlopeStep = 1.01;

}  // namespace

const char* AccountantName(Accountant accountant) {
  switch (accountant) {
    case Accountant::kPld:
      return "pld";
    case Accountant::kRdp:
      return "rdp";
    case Accountant::kGdp:
      return "gdp";
  }
  return "unknown";
}

Result<double> DpSgdEpsilon(double sampling_rate, double noise_multiplier, int64_t steps,
                            double delta, Accountant accountant,
                            const CalibrationOptions& options) {
  switch (accountant) {
    case Accountant::kPld: {
      auto event = DpSgdEvent(sampling_rate, noise_multiplier, steps);
      if (!event.ok()) return Error{event.error()};
      auto bounds = PldEpsilon(*event, delta, options.pld);
      if (!bounds.ok()) return Error{bounds.error()};
      return bounds->epsilon_upper;
    }
    case Accountant::kRdp: {
      auto event = DpSgdEvent(sampling_rate, noise_multiplier, steps);
      if (!event.ok()) return Error{event.error()};
      const std::vector<double> orders = DefaultRdpOrders();
      auto rdp = ComputeRdp(*event, orders);
      if (!rdp.ok()) return Error{rdp.error()};
      using Conversion = CalibrationOptions::RdpConversion;
      auto eps = options.rdp_conversion == Conversion::kOptimal
                     ? RdpToEpsilonOptimal(orders, *rdp, delta)
                     : RdpToEpsilon(orders, *rdp, delta,
                                    options.rdp_conversion == Conversion::kImproved
                                        ? RdpConversion::kImproved
                                        : RdpConversion::kClassic);
      if (!eps.ok()) return Error{eps.error()};
      return eps->epsilon;
    }
    case Accountant::kGdp: {
      // Bu et al. 2020, eq. (3.1) then eq. (3.2) inverted. APPROXIMATE.
      auto mu = CltMu(sampling_rate, noise_multiplier, steps);
      if (!mu.ok()) return std::numeric_limits<double>::infinity();
      return GdpEpsilon(*mu, delta);
    }
  }
  return Error{"unknown accountant"};
}

Result<Calibration> CalibrateNoiseMultiplier(double target_epsilon, double delta,
                                             double sampling_rate, int64_t steps,
                                             Accountant accountant,
                                             const CalibrationOptions& options) {
  DPKIT_RETURN_IF_ERROR(CheckCommon(target_epsilon, delta, sampling_rate));
  if (steps < 1) return Error{"steps must be >= 1, got " + std::to_string(steps)};
  auto eps_at = [&](double sigma) {
    return DpSgdEpsilon(sampling_rate, sigma, steps, delta, accountant, options);
  };
  const std::string none = "no noise_multiplier <= 1e4 reaches target_epsilon " +
                           FormatDouble(target_epsilon) + " at delta " + FormatDouble(delta);
  if (accountant == Accountant::kPld) {
    // PLD evaluations are the expensive ones: a model-guided search (calibrate_search.h)
    // from the CLT's answer (microseconds; near, on either side) with the CLT's slope.
    auto clt_at = [&](double sigma) {
      return DpSgdEpsilon(sampling_rate, sigma, steps, delta, Accountant::kGdp);
    };
    calibrate_internal::SearchSpec spec{target_epsilon, 1.0, kMinNoise, kMaxNoise,
                                        /*good_is_large=*/true, /*integer=*/false,
                                        kRelativeWidth};
    if (auto clt = CalibrateNoiseMultiplier(target_epsilon, delta, sampling_rate, steps,
                                            Accountant::kGdp);
        clt.ok()) {
      spec.start = clt->noise_multiplier;
      spec.slope_hint = CltSlope(clt_at, spec.start, spec.start * kSlopeStep);
    }
    auto found = calibrate_internal::ModelSearch(
        [&](double sigma, bool fine) {
          return PldInterval(sampling_rate, sigma, steps, delta, options.pld, fine);
        },
        spec);
    if (!found.ok()) return Error{found.error()};
    if (!found->has_value()) return Error{none};
    return Calibration{(*found)->x, (*found)->epsilon};
  }
  const double start = 1, factor = kBlindFactor;
  auto found = GeometricSearch(eps_at, target_epsilon, start, factor, kMinNoise, kMaxNoise,
                               /*good_is_large=*/true, none);
  if (!found.ok()) return Error{found.error()};
  return Calibration{found->x, found->epsilon};
}

namespace {

// epsilon at delta of T steps of SampledWithoutReplacement(n, m, Gaussian(sigma)) (replace-one
// adjacency): kRdp as DpSgdEpsilon's (Wang, Balle, Kasiviswanathan 2019 through ComputeRdp);
// kPld the certified interval with the caller's options (fine) or a coarser grid, without
// the second computation of the mechanism's lower bound (PldOptions::mechanism_lower_bound:
// the search needs the analysis' lower bound, EpsilonBounds::analysis_lower).
Result<Event> WithoutReplacementRun(int64_t population, int64_t sample_size, double sigma,
                                    int64_t steps) {
  auto gaussian = Event::Gaussian(sigma);
  if (!gaussian.ok()) return gaussian.error_value();
  auto step = Event::SampledWithoutReplacement(population, sample_size, *gaussian);
  if (!step.ok()) return step.error_value();
  return Event::SelfComposed(*step, steps);
}

Result<double> WithoutReplacementRdpEpsilon(const Event& run, double delta,
                                            const CalibrationOptions& options) {
  const std::vector<double> orders = DefaultRdpOrders();
  auto rdp = ComputeRdp(run, orders);
  if (!rdp.ok()) return rdp.error_value();
  using Conversion = CalibrationOptions::RdpConversion;
  auto eps = options.rdp_conversion == Conversion::kOptimal
                 ? RdpToEpsilonOptimal(orders, *rdp, delta)
                 : RdpToEpsilon(orders, *rdp, delta,
                                options.rdp_conversion == Conversion::kImproved
                                    ? RdpConversion::kImproved
                                    : RdpConversion::kClassic);
  if (!eps.ok()) return eps.error_value();
  return eps->epsilon;
}

Result<calibrate_internal::EpsilonInterval> WithoutReplacementPldInterval(
    const Event& run, double delta, const PldOptions& pld, bool fine) {
  PldOptions options = pld;
  options.mechanism_lower_bound = false;
  if (!fine && options.discretization_interval == 0) {
    options.epsilon_tolerance =
        std::min(kLargestTolerance, options.epsilon_tolerance * kCoarseToleranceFactor);
  }
  auto bounds = PldEpsilon(run, delta, options);
  if (!bounds.ok()) return bounds.error_value();
  return calibrate_internal::EpsilonInterval{bounds->epsilon_upper, bounds->analysis_lower};
}

}  // namespace

Result<Calibration> CalibrateWithoutReplacementNoiseMultiplier(
    double target_epsilon, double delta, int64_t population, int64_t sample_size,
    int64_t steps, Accountant accountant, const CalibrationOptions& options) {
  if (!(population >= 1 && sample_size >= 1 && sample_size <= population)) {
    return Error{"sample_size must be in [1, population], got " + std::to_string(sample_size) +
                 " of " + std::to_string(population)};
  }
  DPKIT_RETURN_IF_ERROR(CheckCommon(target_epsilon, delta, 1.0));
  if (steps < 1) return Error{"steps must be >= 1, got " + std::to_string(steps)};
  if (accountant == Accountant::kGdp) {
    return Error{"GDP does not account sampling without replacement (use pld or rdp)"};
  }
  const std::string none = "no noise_multiplier <= 1e4 reaches target_epsilon " +
                           FormatDouble(target_epsilon) + " at delta " + FormatDouble(delta);
  auto rdp_at = [&](double sigma) -> Result<double> {
    auto run = WithoutReplacementRun(population, sample_size, sigma, steps);
    if (!run.ok()) return run.error_value();
    return WithoutReplacementRdpEpsilon(*run, delta, options);
  };
  auto rdp = GeometricSearch(rdp_at, target_epsilon, 1.0, kBlindFactor, kMinNoise, kMaxNoise,
                             /*good_is_large=*/true, none);
  if (accountant == Accountant::kRdp || !rdp.ok()) {
    if (!rdp.ok()) return rdp.error_value();
    return Calibration{rdp->x, rdp->epsilon};
  }
  // PLD: a model-guided search (calibrate_search.h) from the RDP answer (PLD's bound is
  // the smaller one where it is tighter, so the answer lies at or below it) with RDP's slope.
  calibrate_internal::SearchSpec spec{target_epsilon, rdp->x, kMinNoise, kMaxNoise,
                                      /*good_is_large=*/true, /*integer=*/false,
                                      kRelativeWidth};
  spec.slope_hint = CltSlope(rdp_at, rdp->x, rdp->x * kSlopeStep);
  auto found = calibrate_internal::ModelSearch(
      [&](double sigma, bool fine) -> Result<calibrate_internal::EpsilonInterval> {
        auto run = WithoutReplacementRun(population, sample_size, sigma, steps);
        if (!run.ok()) return run.error_value();
        return WithoutReplacementPldInterval(*run, delta, options.pld, fine);
      },
      spec);
  if (!found.ok()) return Error{found.error()};
  if (!found->has_value()) return Error{none};
  return Calibration{(*found)->x, (*found)->epsilon};
}

namespace {

// LargestSteps for kPld: a model-guided search (calibrate_search.h) from the CLT's answer
// with its slope. Arguments checked by the caller.
Result<StepsCalibration> PldLargestSteps(double target_epsilon, double delta,
                                         double sampling_rate, double noise_multiplier,
                                         int64_t max_steps, const CalibrationOptions& options) {
  calibrate_internal::SearchSpec spec{target_epsilon, 1.0, 1.0,
                                      static_cast<double>(max_steps),
                                      /*good_is_large=*/false, /*integer=*/true,
                                      kRelativeWidth};
  if (auto clt = LargestSteps(target_epsilon, delta, sampling_rate, noise_multiplier,
                              max_steps, Accountant::kGdp);
      clt.ok() && clt->steps >= 1) {
    spec.start = static_cast<double>(clt->steps);
    spec.slope_hint = CltSlope(
        [&](double t) {
          return DpSgdEpsilon(sampling_rate, noise_multiplier, static_cast<int64_t>(t),
                              delta, Accountant::kGdp);
        },
        spec.start, std::max(spec.start + 1, std::round(spec.start * kSlopeStep)));
  }
  auto found = calibrate_internal::ModelSearch(
      [&](double t, bool fine) {
        return PldInterval(sampling_rate, noise_multiplier, static_cast<int64_t>(t), delta,
                           options.pld, fine);
      },
      spec);
  if (!found.ok()) return Error{found.error()};
  if (!found->has_value()) {
    return StepsCalibration{0, std::numeric_limits<double>::infinity()};
  }
  return StepsCalibration{static_cast<int64_t>((*found)->x), (*found)->epsilon};
}

}  // namespace

Result<StepsCalibration> LargestSteps(double target_epsilon, double delta,
                                      double sampling_rate, double noise_multiplier,
                                      int64_t max_steps, Accountant accountant,
                                      const CalibrationOptions& options) {
  DPKIT_RETURN_IF_ERROR(CheckCommon(target_epsilon, delta, sampling_rate));
  if (!(std::isfinite(noise_multiplier) && noise_multiplier > 0)) {
    return Error{"noise_multiplier must be finite and > 0, got " +
                 FormatDouble(noise_multiplier)};
  }
  if (max_steps < 1) return Error{"max_steps must be >= 1, got " + std::to_string(max_steps)};
  auto eps_at = [&](int64_t t) {
    return DpSgdEpsilon(sampling_rate, noise_multiplier, t, delta, accountant, options);
  };
  if (accountant == Accountant::kPld) {
    return PldLargestSteps(target_epsilon, delta, sampling_rate, noise_multiplier, max_steps,
                           options);
  }
  // epsilon is nondecreasing in T: where max_steps meets the target it is the answer (one
  // evaluation instead of ~2 log2(max_steps); issue 21: sigma = 1e308 searched up to 1e9
  // steps for over a minute).
  {
    auto e = eps_at(max_steps);
    if (!e.ok()) return Error{e.error()};
    if (*e <= target_epsilon) return StepsCalibration{max_steps, *e};
  }
  // Blind: an exponential search from T = 1.
  const int64_t start = 1;
  const double factor = kBlindFactor;
  // Bracket: good satisfies the target, bad (once found) does not; good < bad.
  int64_t good = 0, bad = 0;
  double eps_good = std::numeric_limits<double>::infinity();
  {
    auto e = eps_at(start);
    if (!e.ok()) return Error{e.error()};
    if (*e <= target_epsilon) {
      good = start;
      eps_good = *e;
    } else {
      bad = start;
    }
  }
  if (bad == 0) {  // go up
    while (true) {
      if (good == max_steps) return StepsCalibration{good, eps_good};
      const double up = std::ceil(static_cast<double>(good) * factor);
      const int64_t next = up >= static_cast<double>(max_steps)
                               ? max_steps
                               : std::max(good + 1, static_cast<int64_t>(up));
      auto e = eps_at(next);
      if (!e.ok()) return Error{e.error()};
      if (!(*e <= target_epsilon)) {
        bad = next;
        break;
      }
      good = next;
      eps_good = *e;
    }
  } else {  // go down
    while (true) {
      if (bad == 1) return StepsCalibration{0, std::numeric_limits<double>::infinity()};
      const int64_t next = std::min(
          bad - 1, std::max<int64_t>(1, static_cast<int64_t>(
                                            std::floor(static_cast<double>(bad) / factor))));
      auto e = eps_at(next);
      if (!e.ok()) return Error{e.error()};
      if (*e <= target_epsilon) {
        good = next;
        eps_good = *e;
        break;
      }
      bad = next;
    }
  }
  // Invariant: eps(good) <= target < eps(bad), good < bad.
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    auto e = eps_at(mid);
    if (!e.ok()) return Error{e.error()};
    if (*e <= target_epsilon) {
      good = mid;
      eps_good = *e;
    } else {
      bad = mid;
    }
  }
  return StepsCalibration{good, eps_good};
}

namespace {

constexpr double kMinSamplingRate = 1e-12;
constexpr long double kMaxStepsFromEpochs = 1e12L;

// The largest q in [1e-12, 1] with eps(q) <= target, to kRelativeWidth (GeometricSearch;
// PLD: ModelSearch). steps_at(q) gives T (fixed, or ceil(epochs / q)); it returns 0 when q
// gives too many steps, which counts as missing the target. PLD starts at the CLT's
// answer, where extreme rates such as q = 1 that PLD evaluates slowly are not visited.
template <typename StepsAt>
Result<SamplingRateCalibration> SearchSamplingRate(double target_epsilon, double delta,
                                                   double noise_multiplier,
                                                   Accountant accountant,
                                                   const CalibrationOptions& options,
                                                   const StepsAt& steps_at) {
  DPKIT_RETURN_IF_ERROR(CheckCommon(target_epsilon, delta, 1.0));
  if (!(std::isfinite(noise_multiplier) && noise_multiplier > 0)) {
    return Error{"noise_multiplier must be finite and > 0, got " +
                 FormatDouble(noise_multiplier)};
  }
  auto eps_with = [&](Accountant a) {
    return [&, a](double q) -> Result<double> {
      const int64_t t = steps_at(q);
      if (t < 1) return std::numeric_limits<double>::infinity();
      return DpSgdEpsilon(q, noise_multiplier, t, delta, a, options);
    };
  };
  const std::string none = "no sampling_rate >= 1e-12 reaches target_epsilon " +
                           FormatDouble(target_epsilon) + " at delta " + FormatDouble(delta);
  if (accountant == Accountant::kPld) {
    // A model-guided search (calibrate_search.h) from the CLT's answer with its slope.
    calibrate_internal::SearchSpec spec{target_epsilon, 1.0, kMinSamplingRate, 1.0,
                                        /*good_is_large=*/false, /*integer=*/false,
                                        kRelativeWidth};
    if (auto clt = GeometricSearch(eps_with(Accountant::kGdp), target_epsilon, 1.0,
                                   kBlindFactor, kMinSamplingRate, 1.0,
                                   /*good_is_large=*/false, none);
        clt.ok()) {
      spec.start = clt->x;
      spec.slope_hint = CltSlope(eps_with(Accountant::kGdp), spec.start,
                                 spec.start < 1 ? spec.start * kSlopeStep
                                                : spec.start / kSlopeStep);
    }
    auto found = calibrate_internal::ModelSearch(
        [&](double q, bool fine) -> Result<calibrate_internal::EpsilonInterval> {
          const int64_t t = steps_at(q);
          if (t < 1) {
            constexpr double kInf = std::numeric_limits<double>::infinity();
            return calibrate_internal::EpsilonInterval{kInf, kInf};
          }
          return PldInterval(q, noise_multiplier, t, delta, options.pld, fine);
        },
        spec);
    if (!found.ok()) return Error{found.error()};
    if (!found->has_value()) return Error{none};
    return SamplingRateCalibration{(*found)->x, steps_at((*found)->x), (*found)->epsilon};
  }
  const double start = 1, factor = kBlindFactor;
  auto found = GeometricSearch(eps_with(accountant), target_epsilon, start, factor,
                               kMinSamplingRate, 1.0, /*good_is_large=*/false, none);
  if (!found.ok()) return Error{found.error()};
  return SamplingRateCalibration{found->x, steps_at(found->x), found->epsilon};
}

}  // namespace

Result<SamplingRateCalibration> LargestSamplingRate(double target_epsilon, double delta,
                                                    double noise_multiplier, int64_t steps,
                                                    Accountant accountant,
                                                    const CalibrationOptions& options) {
  if (steps < 1) return Error{"steps must be >= 1, got " + std::to_string(steps)};
  return SearchSamplingRate(target_epsilon, delta, noise_multiplier, accountant, options,
                            [steps](double) { return steps; });
}

Result<SamplingRateCalibration> LargestSamplingRateForEpochs(
    double target_epsilon, double delta, double noise_multiplier, double epochs,
    Accountant accountant, const CalibrationOptions& options) {
  if (!(std::isfinite(epochs) && epochs > 0)) {
    return Error{"epochs must be finite and > 0, got " + FormatDouble(epochs)};
  }
  // T = ceil(epochs / q), in long double (exact for the integral epochs of practice).
  return SearchSamplingRate(target_epsilon, delta, noise_multiplier, accountant, options,
                            [epochs](double q) -> int64_t {
                              const long double t = std::ceil(
                                  static_cast<long double>(epochs) / q);
                              if (!(t <= kMaxStepsFromEpochs)) return 0;
                              return std::max<int64_t>(1, static_cast<int64_t>(t));
                            });
}

Result<CltEquivalentNoise> CltEquivalentNoiseMultiplier(double sampling_rate,
                                                        double noise_multiplier,
                                                        int64_t steps, double delta,
                                                        const PldOptions& options) {
  auto event = DpSgdEvent(sampling_rate, noise_multiplier, steps);
  if (!event.ok()) return Error{event.error()};
  if (!(delta > 0 && delta < 1)) {
    return Error{"delta must be in (0, 1), got " + FormatDouble(delta)};
  }
  auto bounds = PldEpsilon(*event, delta, options);
  if (!bounds.ok()) return Error{bounds.error()};
  if (!std::isfinite(bounds->epsilon_upper)) {
    return Error{"the certified epsilon is infinite: no sigma~ matches it"};
  }
  // Bu et al. 2020, eq. (3.3): mu with mu-GDP exactly (epsilon, delta)-DP.
  auto mu = GdpMu(bounds->epsilon_upper, delta);
  if (!mu.ok()) return Error{mu.error()};
  // Eq. (3.4): sigma~ with mu_CLT(sigma~) = mu (eq. 3.1 inverted), at both ends of the
  // certified interval; a larger epsilon gives a larger mu and a smaller sigma~.
  auto at_upper = CltNoiseMultiplier(bounds->epsilon_upper, delta, sampling_rate, steps);
  if (!at_upper.ok()) return Error{at_upper.error()};
  auto at_lower = CltNoiseMultiplier(bounds->epsilon_lower, delta, sampling_rate, steps);
  if (!at_lower.ok()) return Error{at_lower.error()};
  return CltEquivalentNoise{bounds->epsilon_upper, bounds->epsilon_lower, *mu, *at_upper,
                            *at_lower};
}

}  // namespace dpkit::accounting
