#include "dpkit/accounting/fdp.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/internal/format.h"
#include "dpkit/accounting/internal/no_throw_policy.h"
#include "dpkit/accounting/rdp.h"
#include "boost/math/special_functions/erf.hpp"

namespace dpkit::accounting {
namespace {

using ::dpkit::accounting::internal::NoThrowPolicy;

using ld = long double;
using Pt = std::pair<ld, ld>;
constexpr ld kSqrt2 = 1.41421356237309504880168872420969808L;

std::string Num(double v) { return internal::FormatDouble(v); }

ld NormalCdf(ld x) { return 0.5L * boost::math::erfc(-x / kSqrt2, NoThrowPolicy()); }

// Sorted vertices with distinct α in [0, 1]; for equal α the smaller β is kept (a
// lower envelope may always be lowered).
TradeoffCurve FromPoints(std::vector<Pt> pts) {
  for (Pt& p : pts) {
    p.first = std::clamp<ld>(p.first, 0, 1);
    p.second = std::clamp<ld>(p.second, 0, 1);
  }
  std::sort(pts.begin(), pts.end());
  TradeoffCurve c;
  for (const Pt& p : pts) {
    const double a = static_cast<double>(p.first), b = static_cast<double>(p.second);
    if (!c.alpha.empty() && c.alpha.back() == a) {
      c.beta.back() = std::min(c.beta.back(), b);
    } else {
      c.alpha.push_back(a);
      c.beta.push_back(b);
    }
  }
  return c;
}

std::vector<Pt> Points(const TradeoffCurve& c) {
  std::vector<Pt> pts;
  pts.reserve(c.alpha.size());
  for (size_t i = 0; i < c.alpha.size(); ++i) pts.emplace_back(c.alpha[i], c.beta[i]);
  return pts;
}

// Lower convex hull of points sorted by x (Andrew's monotone chain).
std::vector<Pt> LowerHull(const std::vector<Pt>& pts) {
  std::vector<Pt> hull;
  for (const Pt& p : pts) {
    while (hull.size() >= 2) {
      const Pt& o = hull[hull.size() - 2];
      const Pt& a = hull.back();
      const ld cross =
          (a.first - o.first) * (p.second - o.second) - (a.second - o.second) * (p.first - o.first);
      if (cross <= 0) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(p);
  }
  return hull;
}

struct Line {
  ld slope;
  ld intercept;
  ld At(ld x) const { return slope * x + intercept; }
};

// Upper envelope max(0, max_i line_i) on [0, 1] (convex hull trick).
TradeoffCurve UpperEnvelope(std::vector<Line> lines) {
  lines.push_back(Line{0, 0});
  std::sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return a.slope < b.slope || (a.slope == b.slope && a.intercept > b.intercept);
  });
  std::vector<Line> hull;
  for (const Line& l : lines) {
    if (!hull.empty() && hull.back().slope == l.slope) continue;  // smaller intercept
    while (hull.size() >= 2) {
      const Line& l1 = hull[hull.size() - 2];
      const Line& l2 = hull.back();
      // l2 is never above both when x(l1 ∩ l) <= x(l1 ∩ l2).
      if ((l1.intercept - l.intercept) * (l2.slope - l1.slope) <=
          (l1.intercept - l2.intercept) * (l.slope - l1.slope)) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(l);
  }
  std::vector<Pt> pts;
  size_t j = 0;
  auto advance = [&](ld x) {
    while (j + 1 < hull.size() && hull[j + 1].At(x) >= hull[j].At(x)) ++j;
  };
  advance(0);
  pts.emplace_back(0, hull[j].At(0));
  for (; j + 1 < hull.size(); ++j) {
    const ld x = (hull[j].intercept - hull[j + 1].intercept) / (hull[j + 1].slope - hull[j].slope);
    if (x >= 1) break;
    if (x > 0) pts.emplace_back(x, hull[j].At(x));
  }
  // j is now the line active at the right end.
  ld right = 0;
  for (const Line& l : hull) right = std::max(right, l.At(1));
  pts.emplace_back(1, right);
  return FromPoints(std::move(pts));
}

// Pointwise max or min of two piecewise-linear curves: breakpoints of both plus the
// crossings inside each merged interval.
TradeoffCurve Combine(const TradeoffCurve& a, const TradeoffCurve& b, bool take_max) {
  std::vector<double> xs = a.alpha;
  xs.insert(xs.end(), b.alpha.begin(), b.alpha.end());
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  std::vector<Pt> pts;
  auto pick = [&](ld u, ld v) { return take_max ? std::max(u, v) : std::min(u, v); };
  for (size_t i = 0; i < xs.size(); ++i) {
    const ld x = xs[i];
    const ld fa = EvaluateTradeoff(a, xs[i]), fb = EvaluateTradeoff(b, xs[i]);
    pts.emplace_back(x, pick(fa, fb));
    if (i + 1 < xs.size()) {
      const ld x2 = xs[i + 1];
      const ld ga = EvaluateTradeoff(a, xs[i + 1]), gb = EvaluateTradeoff(b, xs[i + 1]);
      const ld d1 = fa - fb, d2 = ga - gb;
      if ((d1 < 0 && d2 > 0) || (d1 > 0 && d2 < 0)) {
        const ld t = d1 / (d1 - d2);
        const ld xc = x + t * (x2 - x);
        pts.emplace_back(xc, fa + t * (ga - fa));
      }
    }
  }
  return FromPoints(std::move(pts));
}

}  // namespace

double EvaluateTradeoff(const TradeoffCurve& curve, double alpha) {
  if (!(alpha >= 0 && alpha <= 1) || curve.alpha.empty()) return std::nan("");
  auto it = std::upper_bound(curve.alpha.begin(), curve.alpha.end(), alpha);
  if (it == curve.alpha.begin()) return curve.beta.front();
  if (it == curve.alpha.end()) return curve.beta.back();
  const size_t i = static_cast<size_t>(it - curve.alpha.begin());
  const ld a0 = curve.alpha[i - 1], a1 = curve.alpha[i];
  const ld b0 = curve.beta[i - 1], b1 = curve.beta[i];
  return static_cast<double>(b0 + (b1 - b0) * ((alpha - a0) / (a1 - a0)));
}

Result<void> CheckTradeoffCurve(const TradeoffCurve& curve, bool require_convex) {
  const size_t n = curve.alpha.size();
  if (n < 2 || curve.beta.size() != n) {
    return Error{"a tradeoff curve needs >= 2 vertices and as many betas as alphas"};
  }
  if (curve.alpha.front() != 0 || curve.alpha.back() != 1) {
    return Error{"tradeoff curve alphas must run from 0 to 1"};
  }
  if (curve.beta.back() != 0) return Error{"tradeoff curve must end at beta = 0"};
  for (size_t i = 0; i < n; ++i) {
    if (!(curve.beta[i] >= 0 && curve.beta[i] <= 1)) {
      return Error{"tradeoff curve betas must be in [0, 1], got " + Num(curve.beta[i])};
    }
    if (i > 0 && !(curve.alpha[i] > curve.alpha[i - 1])) {
      return Error{"tradeoff curve alphas must be strictly increasing"};
    }
    if (i > 0 && curve.beta[i] > curve.beta[i - 1]) {
      return Error{"tradeoff curve betas must be non-increasing"};
    }
    if (require_convex && i > 0 && i + 1 < n) {
      const ld s1 = (static_cast<ld>(curve.beta[i]) - curve.beta[i - 1]) /
                    (static_cast<ld>(curve.alpha[i]) - curve.alpha[i - 1]);
      const ld s2 = (static_cast<ld>(curve.beta[i + 1]) - curve.beta[i]) /
                    (static_cast<ld>(curve.alpha[i + 1]) - curve.alpha[i]);
      // Slopes non-decreasing, up to 1e-12 in the value over the segment.
      if (s2 < s1 && (s1 - s2) * (curve.alpha[i + 1] - curve.alpha[i - 1]) > 1e-12L) {
        return Error{"tradeoff curve is not convex at alpha = " + Num(curve.alpha[i])};
      }
    }
  }
  return OkResult();
}

Result<TradeoffCurve> ApproxDpTradeoffCurve(double epsilon, double delta) {
  if (!(std::isfinite(epsilon) && epsilon >= 0)) {
    return Error{"epsilon must be finite and >= 0, got " + Num(epsilon)};
  }
  if (!(delta >= 0 && delta <= 1)) {
    return Error{"delta must be in [0, 1], got " + Num(delta)};
  }
  // DRS 2019, Prop. 2.5: the lines 1 − δ − e^ε α and e^{−ε}(1 − δ − α) meet at
  // α = β = (1 − δ) / (1 + e^ε).
  const ld one_minus = 1.0L - delta;
  const ld corner = one_minus / (1.0L + std::exp(static_cast<ld>(epsilon)));
  return FromPoints({{0, one_minus}, {corner, corner}, {one_minus, 0}, {1, 0}});
}

Result<TradeoffCurve> GaussianTradeoffCurve(double mu, int points) {
  if (!(std::isfinite(mu) && mu >= 0)) {
    return Error{"mu must be finite and >= 0, got " + Num(mu)};
  }
  if (!(points >= 2 && points <= 1000000)) {
    return Error{"points must be in [2, 1000000], got " + std::to_string(points)};
  }
  // DRS 2019, Sec. 2.2: with z = Φ^{-1}(1 − α), G_μ = Φ(z − μ) and
  // G_μ'(α) = −φ(z − μ) / φ(z) = −exp(μ z − μ²/2). Tangents lie below the convex G_μ.
  std::vector<Line> lines;
  const ld lo = -9.0L, hi = static_cast<ld>(mu) + 9.0L;
  for (int i = 0; i < points; ++i) {
    const ld z = lo + (hi - lo) * i / (points - 1);
    const ld alpha = NormalCdf(-z);
    const ld beta = NormalCdf(z - mu);
    const ld slope = -std::exp(mu * z - 0.5L * mu * mu);
    lines.push_back(Line{slope, beta - slope * alpha});
  }
  return UpperEnvelope(std::move(lines));
}

TradeoffCurve PldDirectionTradeoff(const ComposedPld& pld) {
  // δ(ε) = Σ_j m_j (1 − e^{ε − l_j})_+ + m_∞ (pld.h). T(α) = sup_ε e^{−ε}(1 − δ(ε) − α)
  // is the piecewise-linear curve through the vertices of the Neyman–Pearson tests
  // "accept P iff L >= l_k": α_k = 1 − m_∞ − Σ_{j>=k} m_j, β_k = Σ_{j>=k} m_j e^{−l_j}
  // (the supremum over x = e^{−ε} of a concave piecewise-linear function is attained at
  // a kink x = e^{−l_k}, where it equals the line through (α_k, β_k) with slope −e^{−l_k}).
  // If the masses sum to less than 1 the deficit is added to m_∞ (raising δ for every
  // ε keeps dominance); a sum above 1 (error bounds) only lowers the curve.
  ld total = pld.infinity_mass;
  for (double m : pld.masses) total += m;
  const ld excess = std::max<ld>(total - 1, 0);  // α_k = prefix_k − excess
  std::vector<Pt> pts;
  std::vector<ld> suffix_beta(pld.masses.size() + 1, 0);
  for (size_t j = pld.masses.size(); j-- > 0;) {
    const ld loss = static_cast<ld>(pld.min_index + static_cast<int64_t>(j)) * pld.interval;
    suffix_beta[j] = suffix_beta[j + 1] + pld.masses[j] * std::exp(-loss);
  }
  ld prefix = 0;
  Pt previous{-1, 0};
  bool have_previous = false;
  for (size_t k = 0; k <= pld.masses.size(); ++k) {
    const Pt p{prefix - excess, suffix_beta[k]};
    if (p.first >= 0) {
      if (have_previous && previous.first < 0) {
        // Interpolate the segment that crosses α = 0.
        const ld t = -previous.first / (p.first - previous.first);
        pts.emplace_back(0, previous.second + t * (p.second - previous.second));
      }
      pts.push_back(p);
    }
    previous = p;
    have_previous = true;
    if (k < pld.masses.size()) prefix += pld.masses[k];
  }
  if (pts.empty() || pts.front().first > 0) pts.emplace(pts.begin(), 0, pts.empty() ? 0 : pts.front().second);
  pts.emplace_back(1, 0);
  return FromPoints(std::move(pts));
}

Result<TradeoffCurve> PldTradeoffCurve(const Event& event, const PldOptions& options,
                                       double tail_mass) {
  auto plds = PessimisticComposedPlds(event, tail_mass, options);
  if (!plds.ok()) return Error{plds.error()};
  if (plds->empty()) return Error{"the PLD of this event is empty"};
  TradeoffCurve a = PldDirectionTradeoff((*plds)[0]);
  if (plds->size() > 1) {
    a = PointwiseMax(a, InverseTradeoff(PldDirectionTradeoff((*plds)[1])));
  }
  return SymmetrizedHull(a);
}

Result<TradeoffCurve> RdpTradeoffCurve(const std::vector<double>& orders,
                                       const std::vector<double>& rdp, int points) {
  if (!(points >= 8 && points <= 100000)) {
    return Error{"points must be in [8, 100000], got " + std::to_string(points)};
  }
  // Grid: a quarter log-spaced in [1e-16, 1e-2], a quarter even in [1e-2, 0.5], and the
  // mirror image 1 − x (T is symmetric), plus 0 and 1.
  std::vector<double> xs = {0.0, 0.5, 1.0};
  const int quarter = points / 4;
  for (int i = 0; i < quarter; ++i) {
    const double t = quarter > 1 ? static_cast<double>(i) / (quarter - 1) : 0;
    const double small = std::pow(10.0, -16.0 + 14.0 * t);
    const double middle = 1e-2 + (0.5 - 1e-2) * t;
    for (double x : {small, middle}) {
      xs.push_back(x);
      xs.push_back(1 - x);
    }
  }
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  std::vector<ld> v(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    auto t = RdpTradeoffLowerBound(orders, rdp, xs[i]);
    if (!t.ok()) return Error{t.error()};
    v[i] = *t;
  }
  // Secant construction: on [x_i, x_{i+1}] the convex T is above the secant of
  // [x_{i−1}, x_i] extended right and the secant of [x_{i+1}, x_{i+2}] extended left,
  // and above 0. The vertices of that piecewise-linear bound on every interval, then
  // their lower convex hull, give a convex curve below T.
  const int n = static_cast<int>(xs.size());
  auto secant = [&](int i, ld x) -> ld {
    if (i < 0 || i + 1 >= n) return -std::numeric_limits<ld>::infinity();
    const ld slope = (v[i + 1] - v[i]) / (static_cast<ld>(xs[i + 1]) - xs[i]);
    return v[i] + slope * (x - xs[i]);
  };
  std::vector<Pt> pts;
  for (int i = 0; i + 1 < n; ++i) {
    auto bound = [&](ld x) { return std::max<ld>({secant(i - 1, x), secant(i + 1, x), 0}); };
    const ld a = xs[i], b = xs[i + 1];
    pts.emplace_back(a, bound(a));
    pts.emplace_back(b, bound(b));
    if (i >= 1 && i + 2 < n) {
      const ld s1 = (v[i] - v[i - 1]) / (static_cast<ld>(xs[i]) - xs[i - 1]);
      const ld s2 = (v[i + 2] - v[i + 1]) / (static_cast<ld>(xs[i + 2]) - xs[i + 1]);
      if (s1 != s2) {
        const ld x = (v[i + 1] - v[i] + s1 * a - s2 * b) / (s1 - s2);
        if (x > a && x < b) pts.emplace_back(x, bound(x));
      }
    }
  }
  TradeoffCurve raw = FromPoints(std::move(pts));
  return FromPoints(LowerHull(Points(raw)));
}

Result<TradeoffCurve> RdpTradeoffCurveForEvent(const Event& event, int points) {
  const std::vector<double> orders = DefaultRdpOrders();
  auto rdp = ComputeRdp(event, orders);
  if (!rdp.ok()) return Error{rdp.error()};
  return RdpTradeoffCurve(orders, *rdp, points);
}

TradeoffCurve InverseTradeoff(const TradeoffCurve& curve) {
  std::vector<Pt> pts;
  for (size_t i = 0; i < curve.alpha.size(); ++i) pts.emplace_back(curve.beta[i], curve.alpha[i]);
  // f^{-1}(t) = 0 for t >= f(0).
  if (!curve.beta.empty() && curve.beta.front() < 1) pts.emplace_back(1, 0);
  return FromPoints(std::move(pts));
}

TradeoffCurve PointwiseMax(const TradeoffCurve& a, const TradeoffCurve& b) {
  return Combine(a, b, /*take_max=*/true);
}

TradeoffCurve PointwiseMin(const TradeoffCurve& a, const TradeoffCurve& b) {
  return Combine(a, b, /*take_max=*/false);
}

TradeoffCurve LowerConvexHull(const TradeoffCurve& curve) {
  return FromPoints(LowerHull(Points(curve)));
}

TradeoffCurve SymmetrizedHull(const TradeoffCurve& curve) {
  // The epigraph of min{f, g} is the union of the epigraphs, so for piecewise-linear
  // f, g the hull of the min is the lower hull of the union of their vertices.
  std::vector<Pt> pts = Points(curve);
  std::vector<Pt> inverse = Points(InverseTradeoff(curve));
  pts.insert(pts.end(), inverse.begin(), inverse.end());
  TradeoffCurve merged = FromPoints(std::move(pts));
  return FromPoints(LowerHull(Points(merged)));
}

Result<TradeoffCurve> SubsampledTradeoff(const TradeoffCurve& curve, double sampling_rate) {
  const double p = sampling_rate;
  if (!(p >= 0 && p <= 1)) {
    return Error{"sampling_rate must be in [0, 1], got " + Num(p)};
  }
  // DRS 2019, Thm. 4.2: f_p = p f + (1 − p) Id, C_p(f) = min{f_p, f_p^{-1}}**.
  std::vector<Pt> pts;
  for (size_t i = 0; i < curve.alpha.size(); ++i) {
    const ld a = curve.alpha[i];
    pts.emplace_back(a, p * static_cast<ld>(curve.beta[i]) + (1 - static_cast<ld>(p)) * (1 - a));
  }
  return SymmetrizedHull(FromPoints(std::move(pts)));
}

double ConvexConjugate(const TradeoffCurve& curve, double y) {
  ld best = -std::numeric_limits<ld>::infinity();
  for (size_t i = 0; i < curve.alpha.size(); ++i) {
    best = std::max(best, static_cast<ld>(y) * curve.alpha[i] - curve.beta[i]);
  }
  return static_cast<double>(best);
}

double DeltaFromTradeoff(const TradeoffCurve& curve, double epsilon) {
  // DRS 2019, Prop. 2.12: δ(ε) = 1 + f*(−e^ε) = 1 − min_α (f(α) + e^ε α).
  const ld slope = std::exp(static_cast<ld>(epsilon));
  ld best = std::numeric_limits<ld>::infinity();
  for (size_t i = 0; i < curve.alpha.size(); ++i) {
    best = std::min(best, curve.beta[i] + slope * curve.alpha[i]);
  }
  return static_cast<double>(std::clamp<ld>(1 - best, 0, 1));
}

Result<TradeoffCurve> TradeoffFromDeltas(const std::vector<double>& epsilons,
                                         const std::vector<double>& deltas) {
  if (epsilons.empty() || epsilons.size() != deltas.size()) {
    return Error{"epsilons and deltas must be non-empty and of the same length"};
  }
  std::vector<Line> lines;
  for (size_t i = 0; i < epsilons.size(); ++i) {
    if (!(std::isfinite(epsilons[i]) && epsilons[i] >= 0)) {
      return Error{"epsilons must be finite and >= 0, got " + Num(epsilons[i])};
    }
    if (!(deltas[i] >= 0 && deltas[i] <= 1)) {
      return Error{"deltas must be in [0, 1], got " + Num(deltas[i])};
    }
    // DRS 2019, Prop. 2.5 / 2.12: the two sides of f_{ε,δ}.
    const ld e = std::exp(static_cast<ld>(epsilons[i]));
    const ld one_minus = 1.0L - deltas[i];
    lines.push_back(Line{-e, one_minus});
    lines.push_back(Line{-1 / e, one_minus / e});
  }
  return UpperEnvelope(std::move(lines));
}

double MinimumErrorSum(const TradeoffCurve& curve) {
  ld best = 1;
  for (size_t i = 0; i < curve.alpha.size(); ++i) {
    best = std::min(best, static_cast<ld>(curve.alpha[i]) + curve.beta[i]);
  }
  return static_cast<double>(best);
}

}  // namespace dpkit::accounting
