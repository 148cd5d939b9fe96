#include "dpkit/accounting/internal/real_fft.h"

#include <cmath>
#include <complex>
#include <algorithm>
#include <cstddef>
#include <vector>

namespace dpkit::accounting::pld_internal {
namespace {

using Complex = RealFft::Complex;

// Stages longer than this (complex values; 256 KiB) regroup their input (see Work).
constexpr size_t kRegroupAbove = 1 << 14;

// The kissfft twiddle w_i = e^{-+2 pi i / n}: the forward table's entry, or its conjugate
// for the inverse transform (exactly kissfft's inverse table; see the header).
template <bool kInverse>
inline Complex Twiddle(const Complex* table, size_t i) {
  const Complex w = table[i];
  return kInverse ? Complex(w.real(), -w.imag()) : w;
}

// a * w, the operations of std::complex's product for finite operands.
inline Complex Mul(Complex a, Complex w) {
  return Complex(a.real() * w.real() - a.imag() * w.imag(),
                 a.real() * w.imag() + a.imag() * w.real());
}

// The butterflies combine `radix` transforms of length m, stored at out[r m .. r m + m),
// into one of length radix m (Cooley-Tukey decimation in time). fstride = n / (radix m)
// turns an index of the length-(radix m) transform into one of the n-point table. Each is
// kissfft's butterfly, operation for operation.
template <bool kInverse>
void Radix2(Complex* out, const Complex* table, size_t fstride, size_t m) {
  for (size_t k = 0; k < m; ++k) {
    const Complex t = Mul(out[m + k], Twiddle<kInverse>(table, k * fstride));
    out[m + k] = out[k] - t;
    out[k] += t;
  }
}

template <bool kInverse>
void Radix3(Complex* out, const Complex* table, size_t fstride, size_t m) {
  // w^{n/3}: its imaginary part is -+sin(2 pi / 3).
  const double sin_third = Twiddle<kInverse>(table, fstride * m).imag();
  for (size_t k = 0; k < m; ++k) {
    Complex* f = out + k;
    const Complex a = Mul(f[m], Twiddle<kInverse>(table, k * fstride));
    const Complex b = Mul(f[2 * m], Twiddle<kInverse>(table, 2 * k * fstride));
    const Complex sum = a + b;
    Complex diff = a - b;
    f[m] = Complex(f[0].real() - 0.5 * sum.real(), f[0].imag() - 0.5 * sum.imag());
    diff *= sin_third;
    f[0] += sum;
    f[2 * m] = Complex(f[m].real() + diff.imag(), f[m].imag() - diff.real());
    f[m] += Complex(-diff.imag(), diff.real());
  }
}

template <bool kInverse>
void Radix4(Complex* out, const Complex* table, size_t fstride, size_t m) {
  for (size_t k = 0; k < m; ++k) {
    const Complex a = Mul(out[k + m], Twiddle<kInverse>(table, k * fstride));
    const Complex b = Mul(out[k + 2 * m], Twiddle<kInverse>(table, 2 * k * fstride));
    const Complex c = Mul(out[k + 3 * m], Twiddle<kInverse>(table, 3 * k * fstride));
    const Complex d0 = out[k] - b;
    out[k] += b;
    const Complex s = a + c;
    const Complex t = a - c;
    // -+i (a - c): multiplying by +1 or -1, as kissfft does, is exact.
    const Complex rot = kInverse ? Complex(-t.imag(), t.real()) : Complex(t.imag(), -t.real());
    out[k + 2 * m] = out[k] - s;
    out[k] += s;
    out[k + m] = d0 + rot;
    out[k + 3 * m] = d0 - rot;
  }
}

template <bool kInverse>
void Radix5(Complex* out, const Complex* table, size_t fstride, size_t m) {
  const Complex ya = Twiddle<kInverse>(table, fstride * m);      // w^{n/5}
  const Complex yb = Twiddle<kInverse>(table, 2 * fstride * m);  // w^{2n/5}
  Complex* f0 = out;
  Complex* f1 = out + m;
  Complex* f2 = out + 2 * m;
  Complex* f3 = out + 3 * m;
  Complex* f4 = out + 4 * m;
  for (size_t u = 0; u < m; ++u) {
    const Complex s0 = f0[u];
    const Complex s1 = Mul(f1[u], Twiddle<kInverse>(table, u * fstride));
    const Complex s2 = Mul(f2[u], Twiddle<kInverse>(table, 2 * u * fstride));
    const Complex s3 = Mul(f3[u], Twiddle<kInverse>(table, 3 * u * fstride));
    const Complex s4 = Mul(f4[u], Twiddle<kInverse>(table, 4 * u * fstride));
    const Complex s7 = s1 + s4, s10 = s1 - s4, s8 = s2 + s3, s9 = s2 - s3;
    f0[u] += s7;
    f0[u] += s8;
    const Complex s5 = s0 + Complex((s7.real() * ya.real()) + (s8.real() * yb.real()),
                                    (s7.imag() * ya.real()) + (s8.imag() * yb.real()));
    const Complex s6 = Complex((s10.imag() * ya.imag()) + (s9.imag() * yb.imag()),
                               -(s10.real() * ya.imag()) - (s9.real() * yb.imag()));
    f1[u] = s5 - s6;
    f4[u] = s5 + s6;
    const Complex s11 = s0 + Complex((s7.real() * yb.real()) + (s8.real() * ya.real()),
                                     (s7.imag() * yb.real()) + (s8.imag() * ya.real()));
    const Complex s12 = Complex(-(s10.imag() * yb.imag()) + (s9.imag() * ya.imag()),
                                (s10.real() * yb.imag()) - (s9.real() * ya.imag()));
    f2[u] = s11 + s12;
    f3[u] = s11 - s12;
  }
}

// Any other radix p: the direct p-point DFT of each column, accumulated in kissfft's order.
template <bool kInverse>
void RadixGeneric(Complex* out, const Complex* table, int table_size, size_t fstride,
                  size_t m, int p, Complex* scratch) {
  for (size_t u = 0; u < m; ++u) {
    for (int q = 0; q < p; ++q) scratch[q] = out[u + q * m];
    size_t k = u;
    for (int q1 = 0; q1 < p; ++q1) {
      int index = 0;
      out[k] = scratch[0];
      for (int q = 1; q < p; ++q) {
        index += static_cast<int>(fstride) * static_cast<int>(k);
        if (index >= table_size) index -= table_size;
        out[k] += Mul(scratch[q], Twiddle<kInverse>(table, index));
      }
      k += m;
    }
  }
}

struct Stages {
  const Complex* table;
  int table_size;
  const int* radix;
  const int* remainder;
  Complex* scratch;
  Complex* const* regroup;  // per stage: a buffer of the stage's length, or nullptr
};

// Stage s of the recursion: out (length p m, p = radix[s], m = remainder[s]) is the DFT of
// the inputs in[0], in[istride], in[2 istride], ...; fstride = n / (p m) steps through the
// n-point twiddle table. kissfft passes the same stride for both (its input is contiguous
// at stage 0); here they part where a stage regroups its input.
//
// The recursion reads sub-transform r's inputs in[(r + j p) istride], j = 0..m-1: at the
// leaves that is a gather across the whole array, one element per cache line, and for a
// 1.7M-point window most of the transform's time went to those misses. A stage with a
// regroup buffer (inputs contiguous, longer than kRegroupAbove) first copies its input to
// it sub-transform by sub-transform (buffer[r m + j] = in[r + j p], a sequential read), so
// each sub-transform reads a contiguous block. Only copies move; every butterfly sees the
// same operands, so the results are bit for bit the same. `regrouped`: the caller wrote
// the input in that order already (RealFft::Inverse packs it so).
template <bool kInverse>
void Work(const Stages& st, int stage, Complex* out, const Complex* in, size_t fstride,
          size_t istride, bool regrouped = false) {
  const int p = st.radix[stage];
  const size_t m = static_cast<size_t>(st.remainder[stage]);
  Complex* const end = out + p * m;
  Complex* o = out;
  if (m > 1) {
    Complex* regroup = st.regroup[stage];
    if (regrouped || (regroup != nullptr && istride == 1)) {
      if (!regrouped) {
        for (size_t j = 0; j < m; ++j) {
          for (int r = 0; r < p; ++r) regroup[r * m + j] = in[j * p + r];
        }
      }
      const Complex* blocks = regrouped ? in : regroup;
      for (int r = 0; r < p; ++r) {
        Work<kInverse>(st, stage + 1, out + r * m, blocks + r * m, fstride * p, 1);
      }
    } else {
      do {
        Work<kInverse>(st, stage + 1, o, in, fstride * p, istride * p);
        in += istride;
      } while ((o += m) != end);
    }
  } else {
    do {
      *o = *in;
      in += istride;
    } while (++o != end);
  }
  switch (p) {
    case 2: Radix2<kInverse>(out, st.table, fstride, m); break;
    case 3: Radix3<kInverse>(out, st.table, fstride, m); break;
    case 4: Radix4<kInverse>(out, st.table, fstride, m); break;
    case 5: Radix5<kInverse>(out, st.table, fstride, m); break;
    default:
      if (p > 1) RadixGeneric<kInverse>(out, st.table, st.table_size, fstride, m, p, st.scratch);
      break;
  }
}

}  // namespace

RealFft::Plan& RealFft::PlanFor(int n) {
  Plan& plan = plans_[n];
  if (!plan.twiddles.empty()) return plan;
  // kissfft's twiddles: w_i = e^{-2 pi i i / n}, from cos and sin of an angle reduced to
  // [0, pi/4] by the table's symmetries (angle 8 i phinc, phinc = pi / (4 n)).
  plan.twiddles.resize(n);
  const double phinc = 0.25 * 3.141592653589793 / n;
  const double flip = -1;
  plan.twiddles[0] = Complex(1, 0);
  if ((n & 1) == 0) plan.twiddles[n / 2] = Complex(-1, 0);
  int i = 1;
  for (; i * 8 < n; ++i) {
    const double c = std::cos(i * 8 * phinc), s = std::sin(i * 8 * phinc);
    plan.twiddles[i] = Complex(c, s * flip);
    plan.twiddles[n - i] = Complex(c, -s * flip);
  }
  for (; i * 4 < n; ++i) {
    const double c = std::cos((2 * n - 8 * i) * phinc), s = std::sin((2 * n - 8 * i) * phinc);
    plan.twiddles[i] = Complex(s, c * flip);
    plan.twiddles[n - i] = Complex(s, -c * flip);
  }
  for (; i * 8 < 3 * n; ++i) {
    const double c = std::cos((8 * i - 2 * n) * phinc), s = std::sin((8 * i - 2 * n) * phinc);
    plan.twiddles[i] = Complex(-s, c * flip);
    plan.twiddles[n - i] = Complex(-s, -c * flip);
  }
  for (; i * 2 < n; ++i) {
    const double c = std::cos((4 * n - 8 * i) * phinc), s = std::sin((4 * n - 8 * i) * phinc);
    plan.twiddles[i] = Complex(-c, s * flip);
    plan.twiddles[n - i] = Complex(-c, -s * flip);
  }
  // Radices: 4s first, then 2, then 3, 5, 7, ... (the last one may be a prime > sqrt).
  int rest = n, p = 4;
  do {
    while (rest % p != 0) {
      p = p == 4 ? 2 : p == 2 ? 3 : p + 2;
      if (p * p > rest) p = rest;
    }
    rest /= p;
    plan.radix.push_back(p);
    plan.remainder.push_back(rest);
    if (p > 5) plan.scratch.resize(p);
  } while (rest > 1);
  return plan;
}

// e^{-i pi (k / (2 quarter) + 1/2)}, k = 1..quarter: the factors that separate the even-
// and odd-indexed halves of a real transform packed into a complex one.
const std::vector<Complex>& RealFft::RealTwiddles(int quarter) {
  std::vector<Complex>& w = real_twiddles_[quarter];
  if (static_cast<int>(w.size()) != quarter) {
    w.resize(quarter);
    const int half = quarter << 1;
    const double pi = std::acos(-1.0);
    for (int k = 1; k <= quarter; ++k) {
      w[k - 1] = std::exp(Complex(0, -pi * (static_cast<double>(k) / half + 0.5)));
    }
  }
  return w;
}

template <bool kInverse>
void RealFft::Transform(int n, const Complex* in, Complex* out, Complex* stage0,
                        bool in_regrouped) {
  Plan& plan = PlanFor(n);
  // Regroup buffers for the leading stages longer than kRegroupAbove (see Work); stage 0's
  // is the caller's (a buffer it has anyway), or none where the input comes regrouped.
  const size_t stages = plan.radix.size();
  if (regroup_.size() < stages) regroup_.resize(stages);
  std::vector<Complex*> regroup(stages, nullptr);
  size_t length = static_cast<size_t>(n);
  for (size_t s = 0; s < stages && length > kRegroupAbove; ++s) {
    if (s == 0) {
      regroup[s] = in_regrouped ? nullptr : stage0;
    } else {
      if (regroup_[s].size() < length) regroup_[s].resize(length);
      regroup[s] = regroup_[s].data();
    }
    length = static_cast<size_t>(plan.remainder[s]);
  }
  const Stages st{plan.twiddles.data(), n, plan.radix.data(), plan.remainder.data(),
                  plan.scratch.data(), regroup.data()};
  Work<kInverse>(st, 0, out, in, 1, 1, in_regrouped);
}

bool RealFft::Regroups(int n) {
  const Plan& plan = PlanFor(n);
  return static_cast<size_t>(n) > kRegroupAbove && plan.remainder[0] > 1;
}

void RealFft::Forward(const std::vector<double>& x, std::vector<Complex>* spec) {
  const int n = static_cast<int>(x.size());
  spec->resize((x.size() >> 1) + 1);
  Complex* dst = spec->data();
  if ((n & 3) != 0) {
    buffer_.assign(x.begin(), x.end());  // x_j + 0 i
    buffer2_.resize(n);
    Transform<false>(n, buffer_.data(), buffer2_.data(), nullptr, false);
    for (int k = 0; k <= n / 2; ++k) dst[k] = buffer2_[k];
    return;
  }
  // n % 4 == 0: z_j = x_{2j} + i x_{2j+1}, Z = DFT_{n/2}(z), then
  // X_k = (Z_k + conj Z_{n/2-k}) / 2 + (Z_k - conj Z_{n/2-k}) e^{-i pi (k/(n/2) + 1/2)} / 2.
  const int half = n >> 1, quarter = n >> 2;
  const std::vector<Complex>& w = RealTwiddles(quarter);
  if (buffer_.size() < static_cast<size_t>(half)) buffer_.resize(half);
  Transform<false>(half, reinterpret_cast<const Complex*>(x.data()), dst, buffer_.data(),
                   false);
  const Complex dc(dst[0].real() + dst[0].imag());
  const Complex nyquist(dst[0].real() - dst[0].imag());
  for (int k = 1; k <= quarter; ++k) {
    const Complex a = dst[k];
    const Complex b = std::conj(dst[half - k]);
    const Complex sum = a + b;
    const Complex t = Mul(a - b, w[k - 1]);
    dst[k] = (sum + t) * 0.5;
    dst[half - k] = std::conj(sum - t) * 0.5;
  }
  dst[0] = dc;
  dst[half] = nyquist;
}

void RealFft::Inverse(const std::vector<Complex>& spec, std::vector<double>* y) {
  const int n = static_cast<int>(2 * (spec.size() - 1));
  y->resize(n);
  double* dst = y->data();
  const Complex* src = spec.data();
  if ((n & 3) != 0) {
    buffer_.resize(n);
    buffer2_.resize(n);
    for (int k = 0; k <= n / 2; ++k) buffer_[k] = src[k];
    for (int k = 1; k <= n / 2; ++k) buffer_[n - k] = std::conj(buffer_[k]);
    Transform<true>(n, buffer_.data(), buffer2_.data(), nullptr, false);
    for (int k = 0; k < n; ++k) dst[k] = buffer2_[k].real();
  } else {
    // The forward packing undone: Z_k = E_k + O_k, E and O from X_k and conj X_{n/2-k}.
    const int half = n >> 1, quarter = n >> 2;
    const std::vector<Complex>& w = RealTwiddles(quarter);
    buffer_.resize(half);
    // Entry k goes where stage 0 of the transform would regroup it (see Work), saving it
    // that pass and a buffer: k = j p + r to r m + j.
    const bool regroup = Regroups(half);
    const size_t p = regroup ? static_cast<size_t>(plans_[half].radix[0]) : 1;
    const size_t m = regroup ? static_cast<size_t>(plans_[half].remainder[0]) : 0;
    Complex* packed = buffer_.data();
    const auto at = [&](size_t k) -> Complex& {
      return regroup ? packed[(k % p) * m + k / p] : packed[k];
    };
    at(0) = Complex(src[0].real() + src[half].real(), src[0].real() - src[half].real());
    for (int k = 1; k <= half / 2; ++k) {
      const Complex a = src[k];
      const Complex b = std::conj(src[half - k]);
      const Complex even = a + b;
      const Complex odd = Mul(a - b, std::conj(w[k - 1]));
      at(k) = even + odd;
      at(half - k) = std::conj(even - odd);
    }
    Transform<true>(half, packed, reinterpret_cast<Complex*>(dst), nullptr, regroup);
  }
  // Eigen scales the inverse by the rounded reciprocal of n.
  const double scale = 1. / n;
  for (int k = 0; k < n; ++k) dst[k] *= scale;
}

}  // namespace dpkit::accounting::pld_internal
