#include "dpkit/accounting/internal/pld_mechanism.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "dpkit/accounting/internal/format.h"
#include "dpkit/accounting/internal/pld_replace_one.h"

namespace dpkit::accounting::pld_internal {

using internal::FormatDouble;

Result<void> CheckGridOptions(const GridOptions& options) {
  if (!(options.epsilon_tolerance >= 1e-7 && options.epsilon_tolerance <= 0.1)) {
    return Error{"epsilon_tolerance must be in [1e-7, 0.1], got " +
                 FormatDouble(options.epsilon_tolerance)};
  }
  if (!(options.discretization_interval == 0 ||
        (options.discretization_interval >= 1e-7 && options.discretization_interval <= 1))) {
    return Error{"discretization_interval must be 0 (automatic) or in [1e-7, 1], got " +
                 FormatDouble(options.discretization_interval)};
  }
  return OkResult();
}

namespace {

// A Poisson-sampled composition becomes one component (BuildSampledCompositionPmfs). Its
// grid-choice parameter: with V the summed rough loss variances of the unsampled inner
// components (1/z^2, 1/b^2, D^2/s^2, eps^2), the subsampled step's loss variance is taken
// as min(q^2 (e^V - 1), q (V + V^2/4)), as ChooseInterval does for a Gaussian.
Result<void> FlattenSampledComposition(const Event& event, double count, double sampling_rate,
                                       std::map<Mechanism, double>* out) {
  std::map<Mechanism, double> inner;
  DPKIT_RETURN_IF_ERROR(Flatten(event, 1.0, 1.0, &inner));
  double v = 0;
  for (const auto& [m, c] : inner) {
    if (m.base == Base::kWithoutReplacement) {
      return Error{"the pld accountant cannot Poisson-sample a sampled_without_replacement "
                   "event (use --accountant=rdp)"};
    }
    if (m.base == Base::kSampledComposition || m.sampling_rate < 1) {
      return Error{"the pld accountant cannot Poisson-sample a composition that contains a "
                   "Poisson-sampled event (use --accountant=rdp)"};
    }
    const double p = m.parameter;
    switch (m.base) {
      case Base::kGaussian:
      case Base::kLaplace:
        v += c / (p * p);
        break;
      case Base::kDiscreteGaussian:
        v += c * std::pow(static_cast<double>(m.sensitivity) / p, 2);
        break;
      default:
        v += c * p * p;
    }
  }
  const double q = sampling_rate;
  v = std::min(q * q * std::expm1(std::min(v, 700.0)), q * (v + v * v / 4));
  Mechanism m{Base::kSampledComposition, std::sqrt(std::min(v, 1e300)), sampling_rate, 0};
  m.inner = event.ToJsonString();
  (*out)[m] += count;
  return OkResult();
}

// Sampling without replacement (replace-one adjacency) of a Gaussian, Laplace or discrete
// Gaussian becomes one kWithoutReplacement component (pld_replace_one.cc); with m = n it is
// the base itself. Its grid-choice parameter: the rough loss standard deviation of the
// Poisson-sampled base at the same rate (the component is that law's remove direction,
// symmetrized).
Result<void> FlattenWithoutReplacement(const Event& event, double count, double sampling_rate,
                                       std::map<Mechanism, double>* out) {
  if (sampling_rate < 1) {
    return Error{"the pld accountant cannot Poisson-sample a sampled_without_replacement event "
                 "(use --accountant=rdp)"};
  }
  const Event& inner = event.inner();
  if (inner.kind() != EventKind::kGaussian && inner.kind() != EventKind::kLaplace &&
      inner.kind() != EventKind::kDiscreteGaussian) {
    return Error{"the pld accountant supports sampled_without_replacement only of gaussian, "
                 "laplace and discrete_gaussian events (use --accountant=rdp)"};
  }
  if (event.sample_size() >= event.population()) return Flatten(inner, count, 1.0, out);
  const double p =
      WithoutReplacementRate(event.population(), event.sample_size(), Bound::kUpper);
  std::map<Mechanism, double> base;
  DPKIT_RETURN_IF_ERROR(Flatten(inner, 1.0, p, &base));
  const double v = RoughLossVariance(base.begin()->first);
  Mechanism m{Base::kWithoutReplacement, std::sqrt(std::min(v, 1e300)), p, 0};
  m.inner = inner.ToJsonString();
  (*out)[m] += count;
  return OkResult();
}

}  // namespace

Result<void> Flatten(const Event& event, double count, double sampling_rate,
                     std::map<Mechanism, double>* out) {
  switch (event.kind()) {
    case EventKind::kGaussian:
      (*out)[{Base::kGaussian, event.noise_multiplier(), sampling_rate, 0}] += count;
      return OkResult();
    case EventKind::kLaplace:
      (*out)[{Base::kLaplace, event.scale(), sampling_rate, 0}] += count;
      return OkResult();
    case EventKind::kDiscreteGaussian:
      (*out)[{Base::kDiscreteGaussian, event.sigma(), sampling_rate, 0,
              event.sensitivity()}] += count;
      return OkResult();
    case EventKind::kBoundedRange:
      if (sampling_rate < 1) {
        return Error{"the pld accountant supports Poisson sampling only of gaussian, "
                     "discrete_gaussian and laplace events and of compositions"};
      }
      (*out)[{Base::kBoundedRange, event.epsilon(), 1.0, 0.0}] += count;
      return OkResult();
    case EventKind::kPureDp:
    case EventKind::kApproxDp:
      if (sampling_rate < 1) {
        return Error{"the pld accountant supports Poisson sampling only of gaussian, "
                     "discrete_gaussian and laplace events and of compositions"};
      }
      (*out)[{Base::kRandomizedResponse, event.epsilon(), 1.0,
              event.kind() == EventKind::kApproxDp ? event.delta() : 0.0}] += count;
      return OkResult();
    case EventKind::kPoissonSampled:
      return Flatten(event.inner(), count, sampling_rate * event.sampling_rate(), out);
    case EventKind::kSampledWithoutReplacement:
      return FlattenWithoutReplacement(event, count, sampling_rate, out);
    case EventKind::kSelfComposed:
      if (sampling_rate < 1) return FlattenSampledComposition(event, count, sampling_rate, out);
      return Flatten(event.inner(), count * static_cast<double>(event.count()),
                     sampling_rate, out);
    case EventKind::kComposed:
      if (sampling_rate < 1) return FlattenSampledComposition(event, count, sampling_rate, out);
      for (const Event& child : event.children()) {
        DPKIT_RETURN_IF_ERROR(Flatten(child, count, sampling_rate, out));
      }
      return OkResult();
  }
  return Error{"unknown event kind"};
}

// Rough per-step loss variance of a component (grid choice only): per step the loss
// variance of a q-subsampled Gaussian is about q^2 (e^{1/sigma^2} - 1) (the chi^2
// divergence) for small q, and at most about q (1/sigma^2 + 1/(4 sigma^4)) (second moment
// of the unsampled loss N(1/(2 sigma^2), 1/sigma^2), weighted by q) when e^{1/sigma^2} is
// large.
double RoughLossVariance(const Mechanism& m) {
  const double q = m.sampling_rate;
  const double inv2 = 1.0 / (m.parameter * m.parameter);
  switch (m.base) {
    case Base::kGaussian:
      return std::min(q * q * std::expm1(std::min(inv2, 700.0)), q * (inv2 + inv2 * inv2 / 4));
    case Base::kDiscreteGaussian: {  // as the Gaussian with noise multiplier sigma/D
      const double d = static_cast<double>(m.sensitivity);
      const double r2 = std::min(d * d * inv2, 1e300);
      return std::min(q * q * std::expm1(std::min(r2, 700.0)), q * (r2 + r2 * r2 / 4));
    }
    case Base::kLaplace:  // |loss| <= 1/b
      return std::min(q * q * std::expm1(std::min(2 * inv2, 700.0)), q * inv2);
    default:  // the parameter is the standard deviation itself (or eps for RR / BR)
      return m.parameter * m.parameter;
  }
}

// Grid spacing from the tolerance: the connect-the-dots error of a T-fold composition
// grows like T h^2 times the per-step loss variance (second order), so for a relative
// accuracy tol of eps we take h ~ sqrt(tol * eps_scale / (T var)), clamped.
double ChooseInterval(const std::map<Mechanism, double>& flat, const GridOptions& options) {
  if (options.discretization_interval > 0) return options.discretization_interval;
  // Total variance of the losses (rough, RoughLossVariance).
  double var = 0, max_step_var = 0;
  for (const auto& [m, count] : flat) {
    const double v = RoughLossVariance(m);
    var += count * v;
    max_step_var = std::max(max_step_var, v);
  }
  const double sd = std::sqrt(std::max(var, 1e-12));
  // Empirically (see pld_test.cc), h = 2 tol^{1/2} * sd / sqrt(sum T) keeps the upper
  // bound within about tol on typical DP-SGD settings; CertifiedBounds refines it where
  // the resulting gap shows that it did not (and coarsens it where the grid would exceed
  // the limits).
  double total_count = 0;
  for (const auto& [m, count] : flat) total_count += count;
  double h = 2.0 * std::sqrt(options.epsilon_tolerance) * std::max(sd, 0.05) /
             std::sqrt(std::max(total_count, 1.0));
  // At most 2e-3 in the units of the per-step loss spread (when that exceeds 1): a fixed
  // resolution for few compositions, where the formula above would be coarse.
  const double cap = std::min(1.0, 2e-3 * std::max(1.0, std::sqrt(max_step_var)));
  return std::min(cap, std::max(1e-6, h));
}

}  // namespace dpkit::accounting::pld_internal
