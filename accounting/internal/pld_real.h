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
// kLdUnit = DBL_EPSILON = 2u_d (u_d = 2^-53 the unit roundoff of double): one unit of the
// arithmetic (u_d per +, -, *, /, sqrt, IEEE 754 sec. 5.4) plus one for the rounding of a
// function's argument, as when the type was binary128 with double functions; musl's exp, log,
// log1p, expm1 and erfc are accurate to about 1 ulp of double (< 2 u_d, musl's
// src/math/*.c), inside the "few units" each allowance grants. The same bound as before
// the switch therefore covers each operation, now at equal or fewer roundings (binary128
// storage rounded nothing the double functions had not already rounded).
// The exponent range is that of double in both cases for every function value (musl
// returns a double); products and sums of stored values now also have double's range, so
// the absolute underflow allowances use kLdMin, the smallest normal `ld`
// (std::numeric_limits<ld>::min(): LDBL_MIN natively, DBL_MIN under Emscripten), and the
// calculator keeps its range limits (web/calculator_bindings.cc: epsilon <= 600,
// delta >= 1e-100), far from double's overflow (e^709.78) and underflow (2.2e-308).
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
