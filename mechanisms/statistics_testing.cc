#include "dpkit/mechanisms/statistics_testing.h"

#include <algorithm>
#include <cmath>

#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/normal.hpp>

namespace dpkit::mechanisms {

double KolmogorovSmirnovStatistic(std::vector<double>& samples,
                                  const std::function<double(double)>& cdf) {
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  double d = 0.0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const double f = cdf(samples[i]);
    d = std::max(d, std::max(f - i / n, (i + 1) / n - f));
  }
  return d;
}

double KolmogorovSmirnovCriticalValue(int64_t n, double alpha) {
  return std::sqrt(std::log(2.0 / alpha) / (2.0 * static_cast<double>(n)));
}

double ChiSquareStatistic(const std::vector<double>& observed,
                          const std::vector<double>& expected, double min_expected,
                          int* degrees_of_freedom) {
  double statistic = 0.0;
  int cells = 0;
  double pooled_observed = 0.0, pooled_expected = 0.0;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (expected[i] < min_expected) {
      pooled_observed += observed[i];
      pooled_expected += expected[i];
      continue;
    }
    statistic += (observed[i] - expected[i]) * (observed[i] - expected[i]) / expected[i];
    ++cells;
  }
  if (pooled_expected > 0.0) {
    statistic += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) /
                 pooled_expected;
    ++cells;
  } else if (pooled_observed > 0.0) {
    statistic = INFINITY;  // observations where none can occur
  }
  *degrees_of_freedom = cells - 1;
  return statistic;
}

double ChiSquareCriticalValue(int degrees_of_freedom, double alpha) {
  boost::math::chi_squared_distribution<double> chi(degrees_of_freedom);
  return boost::math::quantile(boost::math::complement(chi, alpha));
}

double StandardNormalCdf(double x) {
  return boost::math::cdf(boost::math::normal_distribution<double>(0.0, 1.0), x);
}

}  // namespace dpkit::mechanisms
