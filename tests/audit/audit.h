// Empirical privacy audits: a statistically valid LOWER bound on epsilon from
// samples of a mechanism's output on two neighbouring inputs.
//
// For each candidate threshold t (fixed before the data are seen) and each
// direction, the test "output >= t" (or "<= t") has rejection probabilities p on D
// and q on D'; an (eps, delta)-DP mechanism has p <= e^eps q + delta. With
// Clopper-Pearson bounds p_lo <= p and q_hi >= q, eps >= ln((p_lo - delta) / q_hi)
// (Jagielski, Ullman, Oprea 2020; Nasr et al. 2021). Every bound holds at once with
// probability >= 1 - beta: each of the 4 * (number of thresholds) one-sided
// Clopper-Pearson bounds is taken at level beta / (4 m) (Bonferroni).
#ifndef DPKIT_TESTS_AUDIT_AUDIT_H_
#define DPKIT_TESTS_AUDIT_AUDIT_H_

#include <cstdint>
#include <vector>

namespace dpkit::audit {

// One-sided Clopper-Pearson bounds for k successes in n trials (Boost.Math beta
// quantiles): P(p < lower) <= beta and P(p > upper) <= beta.
double ClopperPearsonLower(int64_t k, int64_t n, double beta);
double ClopperPearsonUpper(int64_t k, int64_t n, double beta);

struct AuditResult {
  double epsilon_lower = 0;  // max over tests; 0 if no test gives evidence
  double best_threshold = 0;
  int64_t trials_per_input = 0;
};

// Lower bound on epsilon (at the given delta) valid with probability >= 1 - beta,
// from outputs on D (`a`) and D' (`b`) of equal length, over the thresholds.
AuditResult EpsilonLowerBound(const std::vector<double>& a, const std::vector<double>& b,
                              const std::vector<double>& thresholds, double delta,
                              double beta);

}  // namespace dpkit::audit

#endif  // DPKIT_TESTS_AUDIT_AUDIT_H_
