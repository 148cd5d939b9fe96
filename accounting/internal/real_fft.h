#ifndef DPKIT_ACCOUNTING_INTERNAL_REAL_FFT_H_
#define DPKIT_ACCOUNTING_INTERNAL_REAL_FFT_H_

// The real-input FFT of the PLD composition (pld_fft_composition.cc, (4)): a forward
// transform to the half spectrum and its inverse, scaled by 1/n.
//
// Its results are bit for bit those of Eigen's kissfft backend (Eigen::FFT<double> with the
// HalfSpectrum flag), which dpkit used before: the same mixed-radix decimation in time
// (radix 4 first, then 2, then odd radices; Borgerding's kissfft), the same twiddle values,
// the same butterfly arithmetic in the same order, and the same packing of a real array of
// even length n (n % 4 == 0) into a complex one of length n / 2. So the floating-point error
// bound of (4) (Higham 2002, Thm. 24.2, with eta = 16 u for radix-2/3/4/5 stages) holds
// unchanged, and no certified bound moves. real_fft_test compares both, byte for byte.
//
// What differs is the cost:
//  - one twiddle table per transform size serves both directions. The inverse uses the
//    table's conjugate, which is exact (kissfft computes the inverse table with the same
//    cos and sin and the sign of the sine flipped), so a 1.7M-point window needs one
//    13.8 MB table instead of two;
//  - a product with a twiddle factor is written as real arithmetic,
//    (a.re b.re - a.im b.im, a.re b.im + a.im b.re): the same operations, hence the same
//    results, as std::complex's product for finite operands, without the branch that
//    recovers infinities from NaNs (every value here is finite).
// Not thread-safe (its plans are cached); one object per computation.

#include <complex>
#include <map>
#include <vector>

namespace dpkit::accounting::pld_internal {

class RealFft {
 public:
  using Complex = std::complex<double>;

  // spec = the first n / 2 + 1 bins of the DFT of x (n = x.size() >= 1),
  // X_k = sum_j x_j e^{-2 pi i j k / n}.
  void Forward(const std::vector<double>& x, std::vector<Complex>* spec);

  // y = the real sequence of length n = 2 (spec.size() - 1) whose DFT has the half
  // spectrum spec, y_j = (1/n) sum_k X_k e^{2 pi i j k / n} (spec.size() >= 2).
  void Inverse(const std::vector<Complex>& spec, std::vector<double>* y);

 private:
  // A complex transform of one size: its radices and the forward twiddles
  // w_k = e^{-2 pi i k / n}.
  struct Plan {
    std::vector<Complex> twiddles;
    std::vector<int> radix;      // stage s splits a length radix[s] * remainder[s]
    std::vector<int> remainder;  // transform into radix[s] of length remainder[s]
    std::vector<Complex> scratch;  // for radices above 5
  };

  Plan& PlanFor(int n);
  const std::vector<Complex>& RealTwiddles(int quarter);
  // The complex DFT of length n of in (forward: e^{-...}; inverse: e^{+...}, unscaled).
  // stage0: a buffer of n values for stage 0's regrouping (or nullptr: none); in_regrouped:
  // in is already in that order (see Work in real_fft.cc; only where Regroups(n)).
  template <bool kInverse>
  void Transform(int n, const Complex* in, Complex* out, Complex* stage0, bool in_regrouped);
  // Whether stage 0 of a length-n transform regroups its input.
  bool Regroups(int n);

  std::map<int, Plan> plans_;
  std::map<int, std::vector<Complex>> real_twiddles_;
  std::vector<Complex> buffer_, buffer2_;
  std::vector<std::vector<Complex>> regroup_;  // per stage (see Work in real_fft.cc)
};

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_REAL_FFT_H_
