// The browser calculator's whole C++/JS boundary: one JSON request in, one JSON reply out.
//
// The page (and its Web Worker) calls the accounting core only through HandleRequest,
// compiled to WebAssembly and exported as the C function dpkit_call (calculator_exports.cc).
// Keeping the boundary to one typed function over JSON strings means the JS side needs no
// knowledge of C++ types, and every failure travels back as data:
//
//   request  {"op": "<operation>", ...parameters...}
//   reply    {"ok": true, "result": {...}}   or   {"ok": false, "error": "<one line>"}
//
// Operations (numbers are JSON numbers; steps is an integer >= 1):
//   "epsilon"   sampling_rate, noise_multiplier, steps, delta, accountants (subset of
//               ["pld","rdp","gdp"]) -> per accountant the same keys as
//               `dpkit epsilon --format=json`, plus "min_error" (smallest type I + type II
//               error). An accountant that cannot answer reports {"error": "..."} in its
//               slot instead of failing the whole request.
//   "tradeoff"  mu, epsilon, delta, points -> {"alpha": [...], "gdp": [...],
//               "approx_dp": [...]}: G_mu and f_{eps,delta} on an alpha grid.
//   "version"   -> {"name": "dpkit-calculator", "accountants": [...]}.
// The operations available grow with the accounting core (see web/README.md).
#ifndef DPKIT_WEB_CALCULATOR_BINDINGS_H_
#define DPKIT_WEB_CALCULATOR_BINDINGS_H_

#include <string>
#include <string_view>

namespace dpkit::web {

// Answers one request; never throws, never aborts on bad input (see the file comment).
std::string HandleRequest(std::string_view request_json);

}  // namespace dpkit::web

#endif  // DPKIT_WEB_CALCULATOR_BINDINGS_H_
