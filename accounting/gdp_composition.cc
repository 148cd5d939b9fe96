#include "dpkit/accounting/gdp_composition.h"

#include <cmath>
#include <limits>
#include <string>

#include "dpkit/accounting/gdp.h"

namespace dpkit::accounting {
namespace {

// mu^2 of a subtree, in long double so that T steps' sum keeps its precision.
struct MuSquared {
  long double value = 0;
  bool approximate = false;
};

Result<MuSquared> GdpMuSquared(const Event& event) {
  switch (event.kind()) {
    case EventKind::kGaussian: {
      const long double z = event.noise_multiplier();
      return MuSquared{1.0L / (z * z), false};
    }
    case EventKind::kPoissonSampled: {
      if (event.inner().kind() != EventKind::kGaussian) break;
      const double z = event.inner().noise_multiplier();
      if (event.sampling_rate() == 1.0) {
        return MuSquared{1.0L / (static_cast<long double>(z) * z), false};
      }
      Result<double> mu = CltMu(event.sampling_rate(), z, 1);
      if (!mu.ok()) return Error{mu.error()};
      return MuSquared{static_cast<long double>(*mu) * *mu, true};
    }
    case EventKind::kSelfComposed: {
      Result<MuSquared> inner = GdpMuSquared(event.inner());
      if (!inner.ok()) return Error{inner.error()};
      return MuSquared{inner->value * static_cast<long double>(event.count()),
                       inner->approximate};
    }
    case EventKind::kComposed: {
      MuSquared total;
      for (const Event& child : event.children()) {
        Result<MuSquared> part = GdpMuSquared(child);
        if (!part.ok()) return Error{part.error()};
        total.value += part->value;
        total.approximate = total.approximate || part->approximate;
      }
      return total;
    }
    default:
      break;
  }
  std::string message = std::string("GDP accounts only Gaussian and Poisson-subsampled ") +
                        "Gaussian events, not " + EventKindName(event.kind());
  if (!event.children().empty()) {
    message += std::string(" of ") + EventKindName(event.children()[0].kind());
  }
  return Error{message};
}

}  // namespace

Result<GdpComposition> GdpMuOfEvent(const Event& event) {
  Result<MuSquared> mu_squared = GdpMuSquared(event);
  if (!mu_squared.ok()) return Error{mu_squared.error()};
  const long double mu = std::sqrt(mu_squared->value);
  if (!(mu < std::numeric_limits<double>::max())) {
    return Error{"GDP mu overflows: the noise is far too small"};
  }
  return GdpComposition{static_cast<double>(mu), mu_squared->approximate};
}

}  // namespace dpkit::accounting
