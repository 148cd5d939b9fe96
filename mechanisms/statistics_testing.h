// Goodness-of-fit statistics with critical values for a chosen false-failure
// probability, for the statistical tests of mechanisms/ and tests/audit/.
#ifndef DPKIT_MECHANISMS_STATISTICS_TESTING_H_
#define DPKIT_MECHANISMS_STATISTICS_TESTING_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace dpkit::mechanisms {

// Kolmogorov–Smirnov statistic D_n = sup_x |F_n(x) - F(x)| of `samples` (sorted
// in place) against the continuous CDF `cdf`.
double KolmogorovSmirnovStatistic(std::vector<double>& samples,
                                  const std::function<double(double)>& cdf);

// Critical value d with P(D_n > d) <= alpha for every n, from the
// Dvoretzky–Kiefer–Wolfowitz inequality with Massart's (1990) constant:
// P(D_n > d) <= 2 exp(-2 n d^2)  =>  d = sqrt(ln(2/alpha) / (2n)).
double KolmogorovSmirnovCriticalValue(int64_t n, double alpha);

// Pearson chi-square statistic sum (observed - expected)^2 / expected. Cells with
// expected count below `min_expected` are pooled into one cell first (the
// chi-square approximation needs expected counts of at least ~5). Returns the
// statistic; *degrees_of_freedom receives (number of cells after pooling) - 1.
double ChiSquareStatistic(const std::vector<double>& observed,
                          const std::vector<double>& expected, double min_expected,
                          int* degrees_of_freedom);

// Upper alpha-quantile of the chi-square distribution (Boost.Math).
double ChiSquareCriticalValue(int degrees_of_freedom, double alpha);

// Standard normal CDF (Boost.Math, accurate in the tails).
double StandardNormalCdf(double x);

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_STATISTICS_TESTING_H_
