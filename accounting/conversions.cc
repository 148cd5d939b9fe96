#include "dpkit/accounting/conversions.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/format.h"
#include "dpkit/accounting/internal/no_throw_policy.h"
#include "boost/math/tools/toms748_solve.hpp"

// Proofs.
//
// (1) Reduction to binary pairs. Let (P, Q) satisfy D_α(P‖Q) <= ε_α and
//     D_α(Q‖P) <= ε_α for α in a set A. For any measurable S put u = P(S), y = Q(S).
//     The map "output ∈ S" is a channel, so by the data-processing inequality for
//     Rényi divergences (van Erven, Harremoës 2014, Thm. 9) the Bernoulli pair
//     B_u = (u, 1−u), B_y = (y, 1−y) satisfies the same bounds. Since
//     δ_{P‖Q}(ε) = sup_S P(S) − e^ε Q(S) (hockey-stick divergence), δ(ε) <= sup over
//     feasible (u, y) of u − e^ε y. The Bernoulli pair attaining it is itself feasible,
//     so no smaller bound follows from the Rényi values: the conversion is optimal
//     (Asoodeh et al. 2021, Sec. III, where the joint range of E_γ and the Rényi
//     divergence is shown to be attained by binary pairs). The same argument with
//     x = 1 − u (type I error) and y (type II error) gives the testing region.
//
// (2) The feasible set. With c = e^{(α−1) ε_α}, D_α(B_u‖B_y) <= ε_α reads
//       h1(u, y) = u^α y^{1−α} + (1−u)^α (1−y)^{1−α} <= c,
//     and D_α(B_y‖B_u) <= ε_α reads
//       h2(u, y) = y^α u^{1−α} + (1−y)^α (1−u)^{1−α} <= c.
//     (a, b) -> a^α b^{1−α} is jointly convex for α > 1 (the perspective of t^α), so
//     h1, h2 are convex and F is convex. For fixed u, h1(u, ·) and h2(u, ·) are convex
//     in y with minimum 1 at y = u (P = Q), so on y in [0, u] each is decreasing and
//     the smallest feasible y, T_i(u), is the unique root of h_i = c there (T_2 = 0
//     when h2(u, 0) = (1−u)^{1−α} <= c; T_1 > 0 since h1 -> inf as y -> 0). The lower
//     boundary T(u) = max_α max(T_1, T_2) is convex in u (the lower boundary of a
//     convex set), hence in x = 1 − u.
//
// (3) δ(ε) = sup_u g(u), g(u) = u − e^ε T(u), is a concave maximisation in u. We
//     locate the maximiser by golden-section search in log u (g is unimodal there as
//     well) and bound the supremum from above with concavity (ConcaveSupUpperBound):
//     between two samples a < b, g lies below both secant lines of the neighbouring
//     sample pairs extended into [a, b]. T is always the infeasible-side end of the
//     root bracket, so each sample of g is itself an upper bound.
//
// (4) ε(δ): u − e^ε y <= δ for all feasible (u, y) iff e^ε >= (u − δ) / T(u) for all
//     u > δ (for u <= δ it holds trivially). R(u) = (u − δ) / T(u) is quasi-concave
//     (its super-level sets {u − δ − k T(u) >= 0} are convex), so golden-section search
//     in log(u − δ) finds its maximum; the candidate ε is then VERIFIED by (3) and
//     increased until the certified δ(ε) <= δ.

namespace dpkit::accounting {
namespace {

using ::dpkit::accounting::internal::NoThrowPolicy;

constexpr double kInf = std::numeric_limits<double>::infinity();
// Smallest log u searched: below e^-700 every term is below any representable δ.
constexpr double kMinLog = -700.0;
// Golden-section stops when the bracket in log u is this narrow.
constexpr double kBracketWidth = 1e-11;
constexpr int kRootBits = 52;
constexpr std::uintmax_t kMaxRootIterations = 200;

std::string Num(double v) { return internal::FormatDouble(v); }

// log(e^a + e^b), with -inf allowed.
double LogAddExp(double a, double b) {
  if (a < b) std::swap(a, b);
  if (a == -kInf) return -kInf;
  return a + std::log1p(std::exp(b - a));
}

struct Constraint {
  double order;
  double log_c;  // (α − 1) ε_α
};

// A point of the binary problem: acceptance probability u under P, kept as log u and
// log(1 − u) so that both u -> 0 and u -> 1 keep full precision.
struct Point {
  double log_u;
  double log_1mu;
};

// Infeasible-side root of a decreasing function f on [lo, hi] with f(lo) > 0 >= f(hi):
// returns a with f(a) > 0 (or lo), so the exact root is >= the result.
template <typename F>
double LowerRoot(F f, double lo, double hi) {
  std::uintmax_t iterations = kMaxRootIterations;
  const auto bracket = boost::math::tools::toms748_solve(
      f, lo, hi, boost::math::tools::eps_tolerance<double>(kRootBits), iterations,
      NoThrowPolicy());
  double a = bracket.first;
  // toms748 may return a bracket end where f is 0 on the feasible side; step to lo's
  // side if needed so that a is infeasible or lo.
  if (!(f(a) > 0) && a != lo) a = std::max(lo, std::nextafter(a, lo));
  return a;
}

// A candidate value of log T(u) (the running maximum over orders), with log(1 − e^ly)
// computed once for every order that is tested against it.
struct Ceiling {
  double ly = -kInf;
  double l1y = 0;
  explicit Ceiling(double log_y) : ly(log_y), l1y(std::log1p(-std::exp(log_y))) {}
  Ceiling() = default;
};

// Whether log(e^x1 + e^x2) <= log_c, with the logarithm computed only where
// max(x1, x2) does not decide it (log(e^x1 + e^x2) lies in [max, max + ln 2]; 0.7 > ln 2).
bool LogSumAtMost(double x1, double x2, double log_c) {
  const double m = std::max(x1, x2);
  if (m > log_c) return false;
  if (m + 0.7 <= log_c) return true;
  return !(LogAddExp(x1, x2) > log_c);
}

// log h1(u, y) − log c and log h2(u, y) − log c for order k (proof (2)), from log y and
// log(1 − y); and whether h1 (h2) <= c there.
double LogH1Term2(const Constraint& k, const Point& p, double l1y) {
  const double a = k.order;
  return p.log_1mu == -kInf ? -kInf : a * p.log_1mu + (1 - a) * l1y;
}
double LogH1MinusLogC(const Constraint& k, const Point& p, double ly, double l1y) {
  const double a = k.order;
  return LogAddExp(a * p.log_u + (1 - a) * ly, LogH1Term2(k, p, l1y)) - k.log_c;
}
bool H1AtMostC(const Constraint& k, const Point& p, double ly, double l1y) {
  const double a = k.order;
  return LogSumAtMost(a * p.log_u + (1 - a) * ly, LogH1Term2(k, p, l1y), k.log_c);
}
double LogH2MinusLogC(const Constraint& k, const Point& p, double ly, double l1y) {
  const double a = k.order;
  return LogAddExp(a * ly + (1 - a) * p.log_u, a * l1y + (1 - a) * p.log_1mu) - k.log_c;
}
bool H2AtMostC(const Constraint& k, const Point& p, double ly, double l1y) {
  const double a = k.order;
  return LogSumAtMost(a * ly + (1 - a) * p.log_u, a * l1y + (1 - a) * p.log_1mu, k.log_c);
}

// log T(u) for one order: the log of the smallest y with h1 <= c and h2 <= c (proof (2)).
// Returns a value <= the exact log T(u). With a `ceiling` the caller only needs the value
// if it exceeds ceiling.ly: h1 and h2 decrease in y on [0, u], so where both are <= c at
// y = e^ceiling.ly (one evaluation each, instead of a root search) the root is <= it and
// -inf is returned instead. Skipping such an order can only lower the maximum over
// orders, which stays a lower bound on T(u): the bound stays certified.
double LogMinTypeTwo(const Constraint& k, const Point& p, const Ceiling& ceiling = Ceiling()) {
  const double a = k.order;
  if (p.log_u == -kInf) return -kInf;  // u = 0: y = 0 is feasible
  if (k.log_c == 0) return p.log_u;    // ε_α = 0: P = Q, y = u
  const double lu = p.log_u, l1u = p.log_1mu;
  if (ceiling.ly >= lu) return -kInf;  // T(u) <= u for every order
  // T_1: root of log h1 − log c in log y on [ly_lo, log u]. At ly_lo the first term of
  // h1 alone equals c, so f >= 0; at log u, h1 = 1 < c.
  auto f1 = [&](double ly) { return LogH1MinusLogC(k, p, ly, std::log1p(-std::exp(ly))); };
  const double ly_lo = std::min(lu, (a * lu - k.log_c) / (a - 1));
  double log_t1;
  if (ceiling.ly > ly_lo && H1AtMostC(k, p, ceiling.ly, ceiling.l1y)) {
    log_t1 = -kInf;  // the root is <= ceiling.ly
  } else if (!(f1(ly_lo) > 0)) {
    log_t1 = ly_lo;
  } else {
    log_t1 = LowerRoot(f1, ly_lo, lu);
  }
  // T_2: u = 1 forces y = 1 ((1−y)^α 0^{1−α} = inf unless y = 1).
  double log_t2;
  if (l1u == -kInf) {
    log_t2 = 0;
  } else {
    const double at_zero = (1 - a) * l1u - k.log_c;  // log h2(u, 0) − log c
    if (!(at_zero > 0)) {
      log_t2 = -kInf;
    } else if (ceiling.ly > -kInf && H2AtMostC(k, p, ceiling.ly, ceiling.l1y)) {
      log_t2 = -kInf;  // the root is <= e^ceiling.ly
    } else {
      auto f2 = [&](double y) {
        const double ly = y > 0 ? std::log(y) : -kInf;
        return LogH2MinusLogC(k, p, ly, std::log1p(-y));
      };
      log_t2 = std::log(LowerRoot(f2, 0.0, std::exp(lu)));
    }
  }
  return std::max(log_t1, log_t2);
}

// log T(u) = max over orders (proof (2)), each order's value a lower bound. The order
// whose T_1 bracket starts highest usually binds: it is solved first, and every other
// order only where it can exceed the running maximum.
double LogMinTypeTwo(const std::vector<Constraint>& constraints, const Point& p,
                     double* binding_order) {
  if (constraints.empty()) return -kInf;
  size_t first = 0;
  double first_floor = -kInf;
  for (size_t i = 0; i < constraints.size(); ++i) {
    const Constraint& k = constraints[i];
    const double floor = (k.order * p.log_u - k.log_c) / (k.order - 1);
    if (floor > first_floor) {
      first_floor = floor;
      first = i;
    }
  }
  double best = LogMinTypeTwo(constraints[first], p);
  if (binding_order != nullptr) *binding_order = constraints[first].order;
  Ceiling ceiling(best);
  for (size_t i = 0; i < constraints.size(); ++i) {
    if (i == first) continue;
    const double v = LogMinTypeTwo(constraints[i], p, ceiling);
    if (v > best) {
      best = v;
      ceiling = Ceiling(best);
      if (binding_order != nullptr) *binding_order = constraints[i].order;
    }
  }
  return best;
}

Point PointFromLogU(double log_u) {
  return Point{log_u, std::log1p(-std::exp(log_u))};
}

// Golden-section search for the maximum of a unimodal F on [lo, hi]; returns every
// sample (t, F(t)).
template <typename F>
std::vector<std::pair<double, double>> GoldenSamples(F f, double lo, double hi) {
  const double r = (std::sqrt(5.0) - 1) / 2;
  std::vector<std::pair<double, double>> samples;
  samples.emplace_back(lo, f(lo));
  samples.emplace_back(hi, f(hi));
  double a = lo, b = hi;
  double c = b - r * (b - a), d = a + r * (b - a);
  double fc = f(c), fd = f(d);
  samples.emplace_back(c, fc);
  samples.emplace_back(d, fd);
  for (int i = 0; i < 200 && b - a > kBracketWidth * std::max(1.0, std::fabs(a)); ++i) {
    if (fc >= fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - r * (b - a);
      fc = f(c);
      samples.emplace_back(c, fc);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + r * (b - a);
      fd = f(d);
      samples.emplace_back(d, fd);
    }
  }
  return samples;
}

// Upper bound on sup g over [0, max sample] for a concave g with g(u) <= u, from
// samples (u_i, g(u_i)) (proof (3)).
double ConcaveSupUpperBound(std::vector<std::pair<double, double>> s) {
  std::sort(s.begin(), s.end());
  const int n = static_cast<int>(s.size());
  int k = 0;
  for (int i = 1; i < n; ++i) {
    if (s[i].second > s[k].second) k = i;
  }
  // Secant through samples i, i+1, evaluated at x (valid outside [u_i, u_{i+1}]).
  auto secant = [&](int i, double x) {
    if (i < 0 || i + 1 >= n) return kInf;
    const double du = s[i + 1].first - s[i].first;
    if (!(du > 0)) return kInf;
    return s[i].second + (s[i + 1].second - s[i].second) / du * (x - s[i].first);
  };
  // Max over x in [s[i], s[i+1]] of min(left secant extended right, right secant
  // extended left).
  auto piece = [&](int i) {
    if (i < 0 || i + 1 >= n) return -kInf;
    const double a = s[i].first, b = s[i + 1].first;
    auto bound = [&](double x) { return std::min(secant(i - 1, x), secant(i + 1, x)); };
    double best = std::max(bound(a), bound(b));
    // Crossing of the two lines, if inside.
    if (i - 1 >= 0 && i + 2 < n) {
      const double s1 = (s[i].second - s[i - 1].second) / (s[i].first - s[i - 1].first);
      const double s2 = (s[i + 2].second - s[i + 1].second) / (s[i + 2].first - s[i + 1].first);
      if (s1 != s2 && std::isfinite(s1) && std::isfinite(s2)) {
        const double x = (s[i + 1].second - s[i].second + s1 * s[i].first - s2 * s[i + 1].first) /
                         (s1 - s2);
        if (x > a && x < b) best = std::max(best, bound(x));
      }
    }
    return best;
  };
  // Outside [u_{k−1}, u_{k+1}] concavity gives g <= g(u_k); below the smallest sample
  // g(u) <= u <= u_0.
  double bound = std::max(s[k].second, s[0].first);
  bound = std::max(bound, piece(k - 1));
  bound = std::max(bound, piece(k));
  if (!std::isfinite(bound)) bound = 1;  // unbounded secant: trivial bound
  return bound;
}

Result<std::vector<Constraint>> MakeConstraints(const std::vector<double>& orders,
                                                const std::vector<double>& rdp) {
  if (orders.empty()) return Error{"orders must be non-empty"};
  if (orders.size() != rdp.size()) {
    return Error{"orders and rdp must have the same length, got " +
                 std::to_string(orders.size()) + " and " + std::to_string(rdp.size())};
  }
  std::vector<Constraint> out;
  for (size_t i = 0; i < orders.size(); ++i) {
    if (!(std::isfinite(orders[i]) && orders[i] > 1)) {
      return Error{"orders must be finite and > 1, got " + Num(orders[i])};
    }
    if (!(rdp[i] >= 0)) {
      return Error{"rdp values must be >= 0 (+inf allowed), got " + Num(rdp[i]) +
                   " at order " + Num(orders[i])};
    }
    if (rdp[i] == kInf) continue;
    const double log_c = (orders[i] - 1) * rdp[i];
    if (!std::isfinite(log_c)) continue;  // (α − 1) ε_α overflows: no information
    out.push_back(Constraint{orders[i], log_c});
  }
  return out;
}

// Certified sup_u u − e^ε T(u) (proof (3)).
double OptimalDelta(const std::vector<Constraint>& constraints, double epsilon,
                    double* binding_order) {
  if (constraints.empty()) return 1;
  bool all_zero = true;
  for (const Constraint& k : constraints) all_zero = all_zero && k.log_c == 0;
  if (all_zero) return 0;  // P = Q: δ(ε) = 0 for ε >= 0
  auto g_of_log_u = [&](double log_u) {
    const double log_t = LogMinTypeTwo(constraints, PointFromLogU(log_u), nullptr);
    return std::exp(log_u) - std::exp(epsilon + log_t);
  };
  auto samples = GoldenSamples(g_of_log_u, kMinLog, 0.0);
  std::vector<std::pair<double, double>> in_u;
  double best_log_u = 0, best = -kInf;
  for (const auto& [t, g] : samples) {
    in_u.emplace_back(std::exp(t), g);
    if (g > best) {
      best = g;
      best_log_u = t;
    }
  }
  if (binding_order != nullptr) {
    *binding_order = constraints.front().order;
    LogMinTypeTwo(constraints, PointFromLogU(best_log_u), binding_order);
  }
  return std::clamp(ConcaveSupUpperBound(std::move(in_u)), 0.0, 1.0);
}

Result<void> CheckEpsilon(double epsilon) {
  if (std::isfinite(epsilon) && epsilon >= 0) return OkResult();
  return Error{"epsilon must be finite and >= 0, got " + Num(epsilon)};
}

}  // namespace

Result<RdpDelta> RdpToDeltaOptimal(const std::vector<double>& orders,
                                   const std::vector<double>& rdp, double epsilon) {
  auto constraints = MakeConstraints(orders, rdp);
  if (!constraints.ok()) return Error{constraints.error()};
  DPKIT_RETURN_IF_ERROR(CheckEpsilon(epsilon));
  double order = orders.front();
  const double delta = OptimalDelta(*constraints, epsilon, &order);
  return RdpDelta{delta, order};
}

Result<double> RdpOrderToDeltaOptimal(double order, double rdp_value, double epsilon) {
  if (!std::isfinite(rdp_value)) {
    return Error{"rdp_value must be finite and >= 0, got " + Num(rdp_value)};
  }
  auto r = RdpToDeltaOptimal({order}, {rdp_value}, epsilon);
  if (!r.ok()) return Error{r.error()};
  return r->delta;
}

Result<RdpEpsilon> RdpToEpsilonOptimal(const std::vector<double>& orders,
                                       const std::vector<double>& rdp, double delta) {
  auto constraints = MakeConstraints(orders, rdp);
  if (!constraints.ok()) return Error{constraints.error()};
  if (!(delta > 0 && delta < 1)) {
    return Error{"delta must be in (0, 1), got " + Num(delta)};
  }
  if (constraints->empty()) return RdpEpsilon{kInf, orders.front()};
  double order = orders.front();
  if (OptimalDelta(*constraints, 0.0, &order) <= delta) return RdpEpsilon{0.0, order};
  // Proof (4): maximise log R = log(u − δ) − log T(u) over log v, v = u − δ in (0, 1−δ].
  const double log_v_max = std::log1p(-delta);
  auto log_ratio = [&](double log_v) {
    const double v = std::exp(log_v);
    // 1 − u = (1 − δ) − v, accurate when v is small; log1p(−u) otherwise.
    const double u = delta + v;
    const double one_minus_u = (1 - delta) - v;
    const Point p{std::log(u), one_minus_u > 0 ? std::log(one_minus_u) : -kInf};
    return log_v - LogMinTypeTwo(*constraints, p, nullptr);
  };
  auto samples = GoldenSamples(log_ratio, kMinLog, log_v_max);
  double eps = -kInf;
  for (const auto& [t, value] : samples) eps = std::max(eps, value);
  eps = std::max(eps, 0.0);
  // Verify with the certified δ; step up until it holds (the golden-section maximum is
  // within ~1e-12 relative of the supremum, so one or two steps suffice).
  double step = 1e-12 * std::max(1.0, eps);
  for (int i = 0; i < 80; ++i) {
    if (OptimalDelta(*constraints, eps, &order) <= delta) return RdpEpsilon{eps, order};
    eps += step;
    step *= 2;
  }
  return Error{"optimal RDP conversion did not converge at delta " + Num(delta)};
}

Result<double> RdpTradeoffLowerBound(const std::vector<double>& orders,
                                     const std::vector<double>& rdp,
                                     double type_one_error) {
  auto constraints = MakeConstraints(orders, rdp);
  if (!constraints.ok()) return Error{constraints.error()};
  const double x = type_one_error;
  if (!(x >= 0 && x <= 1)) {
    return Error{"type_one_error must be in [0, 1], got " + Num(x)};
  }
  if (constraints->empty() || x == 1) return 0.0;
  const Point p{std::log1p(-x), std::log(x)};
  return std::min(1.0, std::exp(LogMinTypeTwo(*constraints, p, nullptr)));
}

}  // namespace dpkit::accounting
