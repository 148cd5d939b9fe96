#include "dpkit/accounting/internal/real_fft.h"

#include <cmath>
#include <complex>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "unsupported/Eigen/FFT"

namespace dpkit::accounting::pld_internal {
namespace {

using Complex = std::complex<double>;

std::vector<double> RandomSeries(int n, std::mt19937_64* rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(n);
  for (double& v : x) v = u(*rng);
  return x;
}

bool SameBytes(const void* a, const void* b, size_t bytes) {
  return std::memcmp(a, b, bytes) == 0;
}

// The PLD bounds' error analysis ((4) in pld_fft_composition.cc) is that of Eigen's kissfft
// backend, and the golden outputs were recorded with it: RealFft must give the same bits.
// Sizes cover every code path: n % 4 == 0 (packed half-length transform) and not, and the
// radices 4, 2, 3, 5 and the generic one (7, 11, 13, a prime above sqrt), and lengths
// whose leading stages regroup their input (65536 and up; 141750 = 2 3^4 5^3 7 with n % 4 = 2).
TEST(RealFftTest, MatchesEigenKissFftBitForBit) {
  std::mt19937_64 rng(20261129);
  RealFft ours;  // one object across sizes: cached plans must not leak between sizes
  for (const int n : {2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 15, 20, 22, 26, 28, 44, 49, 98, 100, 121,
                      1000, 1728, 5040, 30030, 65536, 141750, 172800}) {
    SCOPED_TRACE(n);
    for (int round = 0; round < 2; ++round) {  // the second uses the cached plans
      const std::vector<double> x = RandomSeries(n, &rng);
      Eigen::FFT<double> eigen;
      eigen.SetFlag(Eigen::FFT<double>::HalfSpectrum);
      std::vector<Complex> want_spec, got_spec;
      eigen.fwd(want_spec, x);
      ours.Forward(x, &got_spec);
      ASSERT_EQ(got_spec.size(), static_cast<size_t>(n / 2 + 1));
      ASSERT_EQ(got_spec.size(), want_spec.size());
      EXPECT_TRUE(SameBytes(got_spec.data(), want_spec.data(), got_spec.size() * sizeof(Complex)));
      if (n % 2 != 0) continue;  // a half spectrum describes an even length
      std::vector<double> want_y, got_y;
      eigen.inv(want_y, want_spec);
      ours.Inverse(want_spec, &got_y);
      ASSERT_EQ(got_y.size(), want_y.size());
      EXPECT_TRUE(SameBytes(got_y.data(), want_y.data(), got_y.size() * sizeof(double)));
    }
  }
}

// Independent of Eigen: the transform is the DFT (direct sum in long double) and the
// inverse undoes it, to rounding (kissfft's error is O(u log n); 1e-12 is loose for n <= 60).
TEST(RealFftTest, IsTheDiscreteFourierTransformAndItsInverse) {
  std::mt19937_64 rng(7);
  RealFft fft;
  for (const int n : {6, 8, 9, 12, 30, 44, 60}) {
    SCOPED_TRACE(n);
    const std::vector<double> x = RandomSeries(n, &rng);
    std::vector<Complex> spec;
    fft.Forward(x, &spec);
    for (int k = 0; k <= n / 2; ++k) {
      long double re = 0, im = 0;
      for (int j = 0; j < n; ++j) {
        const long double a = -2 * 3.14159265358979323846264338327950288L * j * k / n;
        re += x[j] * std::cos(a);
        im += x[j] * std::sin(a);
      }
      EXPECT_NEAR(spec[k].real(), static_cast<double>(re), 1e-12);
      EXPECT_NEAR(spec[k].imag(), static_cast<double>(im), 1e-12);
    }
    if (n % 2 != 0) continue;
    std::vector<double> y;
    fft.Inverse(spec, &y);
    ASSERT_EQ(y.size(), x.size());
    for (int j = 0; j < n; ++j) EXPECT_NEAR(y[j], x[j], 1e-13);
  }
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
