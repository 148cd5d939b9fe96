#include "dpkit/accounting/composition.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/format.h"
#include "boost/math/policies/policy.hpp"
#include "boost/math/tools/toms748_solve.hpp"

namespace dpkit::accounting {
namespace {

using ::boost::math::policies::errno_on_error;
using ::boost::math::policies::evaluation_error;
using ::boost::math::policies::policy;
using NoThrowPolicy = policy<evaluation_error<errno_on_error>>;

constexpr int64_t kMaxOptimalCount = 10'000'000;

std::string Num(double value) { return internal::FormatDouble(value); }

Result<void> CheckGuarantee(double epsilon, double delta) {
  if (!(std::isfinite(epsilon) && epsilon >= 0)) {
    return Error{"epsilon must be finite and >= 0, got " + Num(epsilon)};
  }
  if (!(delta >= 0 && delta <= 1)) {
    return Error{"delta must be in [0, 1], got " + Num(delta)};
  }
  return OkResult();
}

Result<void> CheckCount(int64_t count, int64_t max_count) {
  if (count >= 1 && count <= max_count) return OkResult();
  return Error{"count must be an integer in [1, " + std::to_string(max_count) +
               "], got " + std::to_string(count)};
}

// log of the pure part of KOV's formula, sum_l C(k,l) (e^{(k-l)eps} -
// e^{eps' + l eps})_+ / (1 + e^eps)^k, by log-sum-exp over the positive terms
// (those with (k - 2l) eps > eps'). -inf when the sum is empty.
long double LogOptimalPureDelta(long double epsilon, int64_t count,
                                long double total_epsilon) {
  const long double k = static_cast<long double>(count);
  // log(1 + e^eps) = eps + log1p(e^-eps), stable for every eps >= 0.
  const long double log_normaliser = k * (epsilon + std::log1p(std::exp(-epsilon)));
  // Streaming log-sum-exp (no O(k) buffer): `sum` is scaled by e^-top.
  long double top = -std::numeric_limits<long double>::infinity();
  long double sum = 0;
  for (int64_t l = 0; 2 * l < count; ++l) {
    const long double gap = (k - 2.0L * l) * epsilon - total_epsilon;
    if (!(gap > 0)) break;  // gap decreases in l
    const long double log_binomial =
        std::lgamma(k + 1) - std::lgamma(l + 1.0L) - std::lgamma(k - l + 1);
    // e^{(k-l)eps} - e^{eps' + l eps} = e^{(k-l)eps} (1 - e^{-gap}).
    const long double term = log_binomial + (k - l) * epsilon +
                             std::log(-std::expm1(-gap)) - log_normaliser;
    if (term > top) {
      sum = sum * std::exp(top - term) + 1;
      top = term;
    } else {
      sum += std::exp(term - top);
    }
  }
  if (sum == 0) return -std::numeric_limits<long double>::infinity();
  return top + std::log(sum);
}

// log of the total delta (KOV 2015, Thm. 3.3):
// 1 - (1-delta)^k (1 - pure) = -expm1(k log1p(-delta) + log1p(-pure)).
long double OptimalTotalDelta(long double epsilon, long double delta, int64_t count,
                              long double total_epsilon) {
  const long double pure = std::exp(LogOptimalPureDelta(epsilon, count, total_epsilon));
  const long double log_keep =
      static_cast<long double>(count) * std::log1p(-delta) + std::log1p(-std::min(pure, 1.0L));
  return -std::expm1(log_keep);
}

}  // namespace

Result<ApproxDpGuarantee> BasicComposition(double epsilon, double delta, int64_t count) {
  DPKIT_RETURN_IF_ERROR(CheckGuarantee(epsilon, delta));
  DPKIT_RETURN_IF_ERROR(CheckCount(count, std::numeric_limits<int64_t>::max()));
  // Dwork & Roth 2014, Thm. 3.16.
  return ApproxDpGuarantee{static_cast<double>(count) * epsilon,
                           std::min(1.0, static_cast<double>(count) * delta)};
}

Result<ApproxDpGuarantee> BasicComposition(
    const std::vector<ApproxDpGuarantee>& guarantees) {
  if (guarantees.empty()) return Error{"guarantees must be non-empty"};
  ApproxDpGuarantee total{0, 0};
  for (const ApproxDpGuarantee& g : guarantees) {
    DPKIT_RETURN_IF_ERROR(CheckGuarantee(g.epsilon, g.delta));
    total.epsilon += g.epsilon;
    total.delta += g.delta;
  }
  total.delta = std::min(1.0, total.delta);
  return total;
}

Result<ApproxDpGuarantee> AdvancedComposition(double epsilon, double delta,
                                              int64_t count, double delta_slack) {
  DPKIT_RETURN_IF_ERROR(CheckGuarantee(epsilon, delta));
  DPKIT_RETURN_IF_ERROR(CheckCount(count, std::numeric_limits<int64_t>::max()));
  if (!(delta_slack > 0 && delta_slack < 1)) {
    return Error{"delta_slack must be in (0, 1), got " + Num(delta_slack)};
  }
  const double k = static_cast<double>(count);
  // Dwork, Rothblum, Vadhan 2010, Thm. III.3:
  // eps' = eps sqrt(2k ln(1/delta')) + k eps (e^eps - 1), delta_total = k delta + delta'.
  double advanced =
      epsilon * std::sqrt(2 * k * std::log(1 / delta_slack)) + k * epsilon * std::expm1(epsilon);
  if (!std::isfinite(advanced)) advanced = std::numeric_limits<double>::infinity();
  return ApproxDpGuarantee{std::min(advanced, k * epsilon),
                           std::min(1.0, k * delta + delta_slack)};
}

Result<double> OptimalCompositionDelta(double epsilon, double delta, int64_t count,
                                       double total_epsilon) {
  DPKIT_RETURN_IF_ERROR(CheckGuarantee(epsilon, delta));
  DPKIT_RETURN_IF_ERROR(CheckCount(count, kMaxOptimalCount));
  if (!(std::isfinite(total_epsilon) && total_epsilon >= 0)) {
    return Error{"total_epsilon must be finite and >= 0, got " + Num(total_epsilon)};
  }
  return static_cast<double>(OptimalTotalDelta(epsilon, delta, count, total_epsilon));
}

Result<double> OptimalCompositionEpsilon(double epsilon, double delta, int64_t count,
                                         double total_delta) {
  DPKIT_RETURN_IF_ERROR(CheckGuarantee(epsilon, delta));
  DPKIT_RETURN_IF_ERROR(CheckCount(count, kMaxOptimalCount));
  if (!(total_delta >= 0 && total_delta <= 1)) {
    return Error{"total_delta must be in [0, 1], got " + Num(total_delta)};
  }
  const double k_epsilon = static_cast<double>(count) * epsilon;
  // At eps' = k eps the pure part vanishes: 1 - (1 - delta)^k is the floor.
  const long double floor_delta = OptimalTotalDelta(epsilon, delta, count, k_epsilon);
  if (floor_delta > total_delta) {
    return Error{"total_delta must be >= 1 - (1 - delta)^count = " +
                 Num(static_cast<double>(floor_delta)) + " for this composition, got " +
                 Num(total_delta)};
  }
  if (OptimalTotalDelta(epsilon, delta, count, 0) <= total_delta) return 0.0;
  // f decreases in eps' from > 0 at 0 to <= 0 at k eps.
  auto f = [&](double total_epsilon) {
    return static_cast<double>(OptimalTotalDelta(epsilon, delta, count, total_epsilon) -
                               total_delta);
  };
  const double f_lo = f(0.0);
  const double f_hi = f(k_epsilon);
  if (f_hi == 0) return k_epsilon;
  std::uintmax_t iterations = 200;
  std::pair<double, double> bracket = boost::math::tools::toms748_solve(
      f, 0.0, k_epsilon, f_lo, f_hi, boost::math::tools::eps_tolerance<double>(50),
      iterations, NoThrowPolicy());
  double result = bracket.second;
  if (f(result) > 0) result = k_epsilon;
  return result;
}

}  // namespace dpkit::accounting
