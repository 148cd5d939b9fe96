// The PLD accountant's working arithmetic type `ld` and the rounding units its error
// allowances are multiples of (every step of accounting/internal/pld_*.cc computes in it).
//
// Natively `ld` is long double (x86: 80-bit extended, unit LDBL_EPSILON / 2 = 2^-64).
// Under Emscripten (the browser calculator, web/) it is double: WebAssembly's long double is
// IEEE binary128 in software (tens of times slower than double), and its libm (musl) computes
// the long double exp, expm1, log, log1p, erfc, ... in double anyway (argument rounded to
// double, result a double), so binary128 bought no accuracy the allowances could use.
//
// Why the allowances stay certified with ld = double. Every allowance is written as a
// multiple of kLdUnit: "a few units" per correctly-rounded operation, kCdfUlps units per
// tail function, |argument| units where an argument carries rounding. Under Emscripten
// kLdUnit = DBL_EPSILON = 2 u_d (u_d = 2^-53, the unit roundoff of double), as it was when
// ld was binary128 with double functions: each +, -, *, /, sqrt now rounds to double, by at
// most u_d relative (IEEE 754, sec. 4.3) -- one unit covers it twice over -- and the
// functions are the same musl double functions as before (its long double ones called
// them), accurate to about 1 ulp of double (< 2 u_d), inside the "few units" each allowance
// grants (and a function's argument is now rounded by the arithmetic above, not by the
// call). With gradual underflow a result below the normal range is off by at most 2^-1075
// absolute, far below kLdMin, the smallest normal ld (std::numeric_limits<ld>::min():
// LDBL_MIN natively, DBL_MIN under Emscripten), which the absolute underflow allowances
// use. Every function value already had double's exponent range; stored products and sums
// now have it too: overflow gives inf, which the steps test (isfinite) where it can occur,
// and the calculator keeps its range limits (web/calculator_bindings.cc: epsilon <= 600,
// delta >= 1e-100), far from double's overflow (e^709.78) and underflow (2.2e-308).
// The Gauss-Legendre rule of the cell quadrature (pld_cell_moments.cc, allowed 256 units)
// computed in double: weights within 41 DBL_EPSILON relative of the long double rule and
// the moments of even monomials within 34 DBL_EPSILON for n = 10 (1.7 and 2.7 for n = 5),
// measured natively with the same Newton iteration in both types.
//
// Constants: write them as `1e-10_ld`, not `1e-10L`. Natively the two are the same long
// double; under Emscripten `_ld` rounds the literal to double at compile time, where an `L`
// literal would pull the whole expression into software binary128.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_REAL_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_REAL_H_

#include <cfloat>
#include <limits>

namespace dpkit::accounting::pld_internal {

#if defined(__EMSCRIPTEN__)
using ld = double;
// Two units of double: the arithmetic's rounding and that of a function's argument (above).
constexpr ld kLdUnit = DBL_EPSILON;
#else
using ld = long double;
constexpr ld kLdUnit = LDBL_EPSILON / 2;
#endif
// The smallest normal `ld`: the absolute allowance for a product or function value that
// underflows (LDBL_MIN natively, DBL_MIN under Emscripten).
constexpr ld kLdMin = std::numeric_limits<ld>::min();

// A floating literal of type ld, rounded at compile time: 0.5_ld, 1e-300_ld, 0x1p62_ld.
constexpr ld operator""_ld(long double value) { return static_cast<ld>(value); }

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_REAL_H_
