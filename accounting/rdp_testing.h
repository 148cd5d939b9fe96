// Test-only references shared by the RDP tests (rdp_test.cc, rdp_general_test.cc).
#ifndef DPKIT_ACCOUNTING_RDP_TESTING_H_
#define DPKIT_ACCOUNTING_RDP_TESTING_H_

#include <vector>

#include "boost/multiprecision/cpp_bin_float.hpp"
#include "gtest/gtest.h"
#include "dpkit/accounting/rdp.h"

namespace dpkit::accounting::testing {

using Big = boost::multiprecision::cpp_bin_float_50;

// Independent reference: the binomial sum of Mironov, Talwar, Zhang 2019 (Sec. 3.2)
// written out directly, with no log-space or cancellation tricks, in 50-digit arithmetic.
inline double IntegerOrderReference(double q, double sigma, int alpha) {
  const Big bq = q;
  const Big two_sigma2 = Big(2) * Big(sigma) * Big(sigma);
  Big sum = 0;
  Big binom = 1;
  for (int k = 0; k <= alpha; ++k) {
    if (k > 0) binom = binom * (alpha - k + 1) / k;
    sum += binom * pow(1 - bq, alpha - k) * pow(bq, k) * exp(Big(k * (k - 1)) / two_sigma2);
  }
  return static_cast<double>(log(sum) / (alpha - 1));
}

// epsilon of `event` at delta by the RDP accountant, failing the test on an error.
inline double EpsilonFor(const Event& event, double delta, RdpConversion conversion,
                  const std::vector<double>& orders = DefaultRdpOrders()) {
  Result<std::vector<double>> rdp = ComputeRdp(event, orders);
  EXPECT_TRUE(rdp.ok()) << rdp.error();
  Result<RdpEpsilon> eps = RdpToEpsilon(orders, *rdp, delta, conversion);
  EXPECT_TRUE(eps.ok()) << eps.error();
  return eps->epsilon;
}

}  // namespace dpkit::accounting::testing

#endif  // DPKIT_ACCOUNTING_RDP_TESTING_H_
