#include "accounting/calibrate.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "accounting/event.h"
#include "accounting/gdp.h"
#include "accounting/internal/format.h"
#include "accounting/pld.h"
#include "accounting/rdp.h"

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
                            double delta, Accountant accountant) {
  switch (accountant) {
    case Accountant::kPld: {
      auto event = DpSgdEvent(sampling_rate, noise_multiplier, steps);
      if (!event.ok()) return Error{event.error()};
      auto bounds = PldEpsilon(*event, delta);
      if (!bounds.ok()) return Error{bounds.error()};
      return bounds->epsilon_upper;
    }
    case Accountant::kRdp: {
      auto event = DpSgdEvent(sampling_rate, noise_multiplier, steps);
      if (!event.ok()) return Error{event.error()};
      const std::vector<double> orders = DefaultRdpOrders();
      auto rdp = ComputeRdp(*event, orders);
      if (!rdp.ok()) return Error{rdp.error()};
      auto eps = RdpToEpsilon(orders, *rdp, delta, RdpConversion::kImproved);
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
                                             Accountant accountant) {
  DPKIT_RETURN_IF_ERROR(CheckCommon(target_epsilon, delta, sampling_rate));
  if (steps < 1) return Error{"steps must be >= 1, got " + std::to_string(steps)};
  auto eps_at = [&](double sigma) {
    return DpSgdEpsilon(sampling_rate, sigma, steps, delta, accountant);
  };
  // Bracket [lo, hi] with eps(lo) > target >= eps(hi), by doubling / halving from 1.
  double lo = 1, hi = 1;
  double eps_hi;
  {
    auto e = eps_at(1);
    if (!e.ok()) return Error{e.error()};
    eps_hi = *e;
  }
  if (eps_hi <= target_epsilon) {
    // Go down until the target fails.
    while (true) {
      lo = hi / 2;
      if (lo < kMinNoise) {
        auto e = eps_at(kMinNoise);
        if (!e.ok()) return Error{e.error()};
        if (*e <= target_epsilon) return Calibration{kMinNoise, *e};
        lo = kMinNoise;
        break;
      }
      auto e = eps_at(lo);
      if (!e.ok()) return Error{e.error()};
      if (*e > target_epsilon) break;
      hi = lo;
      eps_hi = *e;
    }
  } else {
    while (true) {
      lo = hi;
      hi = lo * 2;
      if (hi > kMaxNoise) {
        return Error{"no noise_multiplier <= 1e4 reaches target_epsilon " +
                     FormatDouble(target_epsilon) + " at delta " + FormatDouble(delta)};
      }
      auto e = eps_at(hi);
      if (!e.ok()) return Error{e.error()};
      if (*e <= target_epsilon) {
        eps_hi = *e;
        break;
      }
    }
  }
  // Invariant: eps(lo) > target >= eps(hi) = eps_hi.
  while (hi / lo > 1 + kRelativeWidth) {
    const double mid = std::sqrt(lo * hi);
    auto e = eps_at(mid);
    if (!e.ok()) return Error{e.error()};
    if (*e <= target_epsilon) {
      hi = mid;
      eps_hi = *e;
    } else {
      lo = mid;
    }
  }
  return Calibration{hi, eps_hi};
}

Result<int64_t> LargestSteps(double target_epsilon, double delta, double sampling_rate,
                             double noise_multiplier, int64_t max_steps,
                             Accountant accountant) {
  DPKIT_RETURN_IF_ERROR(CheckCommon(target_epsilon, delta, sampling_rate));
  if (max_steps < 1) return Error{"max_steps must be >= 1, got " + std::to_string(max_steps)};
  auto ok_at = [&](int64_t t) -> Result<bool> {
    auto e = DpSgdEpsilon(sampling_rate, noise_multiplier, t, delta, accountant);
    if (!e.ok()) return Error{e.error()};
    return *e <= target_epsilon;
  };
  auto first = ok_at(1);
  if (!first.ok()) return Error{first.error()};
  if (!*first) return int64_t{0};
  auto last = ok_at(max_steps);
  if (!last.ok()) return Error{last.error()};
  if (*last) return max_steps;
  int64_t good = 1, bad = max_steps;  // epsilon grows with the number of steps
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    auto m = ok_at(mid);
    if (!m.ok()) return Error{m.error()};
    (*m ? good : bad) = mid;
  }
  return good;
}

}  // namespace dpkit::accounting
