#include "dpkit/tests/audit/audit.h"

#include <algorithm>
#include <cmath>

#include <boost/math/special_functions/beta.hpp>

namespace dpkit::audit {

double ClopperPearsonLower(int64_t k, int64_t n, double beta) {
  if (k == 0) return 0.0;
  // Lower bound: the beta-quantile of Beta(k, n - k + 1).
  return boost::math::ibeta_inv(static_cast<double>(k), static_cast<double>(n - k + 1), beta);
}

double ClopperPearsonUpper(int64_t k, int64_t n, double beta) {
  if (k == n) return 1.0;
  // Upper bound: the (1 - beta)-quantile of Beta(k + 1, n - k).
  return boost::math::ibetac_inv(static_cast<double>(k + 1), static_cast<double>(n - k), beta);
}

AuditResult EpsilonLowerBound(const std::vector<double>& a, const std::vector<double>& b,
                              const std::vector<double>& thresholds, double delta,
                              double beta) {
  AuditResult result;
  const int64_t n = static_cast<int64_t>(a.size());
  result.trials_per_input = n;
  const double level = beta / (4.0 * static_cast<double>(thresholds.size()));
  auto count = [](const std::vector<double>& v, double t, bool upper) {
    int64_t k = 0;
    for (double x : v) k += upper ? (x >= t) : (x <= t);
    return k;
  };
  auto consider = [&](int64_t k_p, int64_t k_q, double t) {
    const double p_lo = ClopperPearsonLower(k_p, n, level);
    const double q_hi = ClopperPearsonUpper(k_q, n, level);
    if (p_lo - delta > 0 && q_hi > 0) {
      const double eps = std::log((p_lo - delta) / q_hi);
      if (eps > result.epsilon_lower) {
        result.epsilon_lower = eps;
        result.best_threshold = t;
      }
    }
  };
  for (double t : thresholds) {
    for (bool upper : {true, false}) {
      const int64_t ka = count(a, t, upper), kb = count(b, t, upper);
      consider(ka, kb, t);  // P_D(S) <= e^eps P_D'(S) + delta
      consider(kb, ka, t);  // and the other way round
    }
  }
  return result;
}

}  // namespace dpkit::audit
