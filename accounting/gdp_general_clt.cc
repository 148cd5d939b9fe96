#include "dpkit/accounting/gdp_general_clt.h"

#include <cmath>
#include <string>

#include "dpkit/accounting/internal/format.h"
#include "boost/math/quadrature/gauss_kronrod.hpp"

namespace dpkit::accounting {
namespace {

std::string Num(double value) { return internal::FormatDouble(value); }

// E_P[g(L)] for P = N(0, 1) and L(x) = log(dQ/dP)(x) = log(1 + p (e^{mu x - mu^2/2} - 1)),
// integrated over [-40, 40 + mu] (the normal density is below 1e-340 outside, and |L|
// grows at most linearly) by adaptive 61-point Gauss-Kronrod.
template <typename G>
long double GaussianExpectation(long double p, long double mu, G g) {
  auto integrand = [&](long double x) {
    // p = 1: the Gaussian's loss itself (log1p(expm1(y)) would be log 0 far left).
    const long double y = mu * x - mu * mu / 2;
    const long double loss = p == 1 ? y : std::log1p(p * std::expm1(y));
    return std::exp(-x * x / 2) * g(loss);
  };
  long double error = 0;
  const long double value = boost::math::quadrature::gauss_kronrod<long double, 61>::integrate(
      integrand, -40.0L, 40.0L + mu, 20, 1e-15L, &error);
  return value / std::sqrt(2 * static_cast<long double>(M_PI));
}

Result<void> Accumulate(const Event& event, double repetitions, CltDirection direction,
                        CltFunctionals* sums) {
  switch (event.kind()) {
    case EventKind::kGaussian:
    case EventKind::kPoissonSampled: {
      const bool sampled = event.kind() == EventKind::kPoissonSampled;
      if (sampled && event.inner().kind() != EventKind::kGaussian) {
        return Error{std::string("general CLT: a poisson_sampled event must sample a gaussian, "
                                 "got ") + EventKindName(event.inner().kind())};
      }
      const double z = sampled ? event.inner().noise_multiplier() : event.noise_multiplier();
      auto step = NoisySgdStepFunctionals(sampled ? event.sampling_rate() : 1.0, z, direction);
      if (!step.ok()) return step.error_value();
      sums->kl += repetitions * step->kl;
      sums->kappa2 += repetitions * step->kappa2;
      sums->kappa3 += repetitions * step->kappa3;
      sums->kl_squared += repetitions * step->kl * step->kl;
      return {};
    }
    case EventKind::kSelfComposed:
      return Accumulate(event.inner(), repetitions * static_cast<double>(event.count()),
                        direction, sums);
    case EventKind::kComposed:
      for (const Event& child : event.children()) {
        if (auto ok = Accumulate(child, repetitions, direction, sums); !ok.ok()) return ok;
      }
      return {};
    default:
      return Error{std::string("general CLT: unsupported event type ") +
                   EventKindName(event.kind()) +
                   " (gaussian, poisson_sampled gaussian, self_composed, composed)"};
  }
}

}  // namespace

Result<CltFunctionals> NoisySgdStepFunctionals(double sampling_rate, double noise_multiplier,
                                               CltDirection direction) {
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return Error{"sampling_rate must be in (0, 1], got " + Num(sampling_rate)};
  }
  if (!(noise_multiplier >= 0.05 && noise_multiplier <= 1e6)) {
    return Error{"noise_multiplier must be in [0.05, 1e6] for the general CLT, got " +
                 Num(noise_multiplier)};
  }
  const long double p = sampling_rate, mu = 1.0L / noise_multiplier;
  // kl(f) = -E_P[L] = KL(P || Q) for f = T(P, Q) (DRS 2019, Sec. 3.2, with f' = -dQ/dP
  // at the Neyman-Pearson threshold and dx = dP); for f^{-1} = T(Q, P) the roles swap:
  // kl = KL(Q || P) = E_P[e^L L], kappa_k = E_P[e^L |L|^k].
  auto moment = [&](int power, bool under_q) {
    return static_cast<double>(GaussianExpectation(p, mu, [=](long double l) {
      long double value = power == 1 ? l : std::pow(std::fabs(l), power);
      return under_q ? std::exp(l) * value : value;
    }));
  };
  CltFunctionals f;
  if (direction == CltDirection::kPQ) {
    f.kl = -moment(1, false);
    f.kappa2 = moment(2, false);
    f.kappa3 = moment(3, false);
  } else {
    f.kl = moment(1, true);
    f.kappa2 = moment(2, true);
    f.kappa3 = moment(3, true);
  }
  f.kl_squared = f.kl * f.kl;
  return f;
}

Result<GeneralClt> GeneralCltMu(const Event& event) {
  GeneralClt clt{0, {}, CltDirection::kPQ};
  for (CltDirection direction : {CltDirection::kPQ, CltDirection::kQP}) {
    CltFunctionals sums;
    if (auto ok = Accumulate(event, 1, direction, &sums); !ok.ok()) return ok.error_value();
    // DRS 2019, Thm. 3.4: mu = 2 ||kl||_1 / sqrt(||kappa2||_1 - ||kl||_2^2).
    const double variance = sums.kappa2 - sums.kl_squared;
    if (!(variance > 0)) {
      return Error{"general CLT: the composition has zero privacy loss variance"};
    }
    const double mu = 2 * sums.kl / std::sqrt(variance);
    if (!std::isfinite(mu)) return Error{"general CLT: mu overflows a double"};
    if (direction == CltDirection::kPQ || mu > clt.mu) clt = GeneralClt{mu, sums, direction};
  }
  return clt;
}

}  // namespace dpkit::accounting
