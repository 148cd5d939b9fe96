#include "dpkit/accounting/calibrate_search.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace dpkit::accounting::calibrate_internal {
namespace {

constexpr double kLn2 = 0.6931471805599453;
constexpr int kMaxCoarse = 12;
constexpr int kMaxFine = 64;
// A coarse model step shorter than this (in log x) ends the locating phase.
constexpr double kCoarseDone = 2e-3;
// Two points closer than this (in log x) give no slope.
constexpr double kMinSlopeSpan = 1e-5;
// The coarse point's estimate of the fine upper bound: lower + 0.7 (upper - lower). The
// coarse upper bound exceeds the exact epsilon by about the coarse tolerance and the fine
// one by about a tenth of it, while the lower bound's gap is larger (pld.h); the fraction
// only places points, it certifies nothing.
constexpr double kCoarseFraction = 0.7;
// Fine evaluations inside a two-sided bracket that fail to close it before one bisects it.
constexpr int kModelStepsPerBisection = 2;

struct ModelPoint {
  double v;  // sgn * log x: good points lie at larger v
  double f;  // log epsilon (fine upper bound, or the coarse estimate of it)
};

class Searcher {
 public:
  Searcher(const IntervalAt& eval, const SearchSpec& spec)
      : eval_(eval),
        spec_(spec),
        sgn_(spec.good_is_large ? 1.0 : -1.0),
        vlo_(std::min(ToV(spec.min_x), ToV(spec.max_x))),
        vhi_(std::max(ToV(spec.min_x), ToV(spec.max_x))),
        log_target_(std::log(spec.target)),
        width_(std::log1p(spec.relative_width * 0.999)) {}

  Result<std::optional<SearchPoint>> Run() {
    auto located = Locate();
    if (!located.ok()) return Error{located.error()};
    for (int it = 0; it < kMaxFine; ++it) {
      if (has_good_ && (good_v_ <= vlo_ || Closed())) return std::optional<SearchPoint>(SearchPoint{good_x_, good_eps_});
      if (has_bad_ && bad_v_ >= vhi_) return std::optional<SearchPoint>();
      const double x = NextFine();
      one_sided_evaluations_ = has_good_ && has_bad_ ? 0 : one_sided_evaluations_ + 1;
      auto interval = eval_(x, /*fine=*/true);
      if (!interval.ok()) return Error{interval.error()};
      const double v = ToV(x);
      if (interval->upper <= spec_.target) {
        if (!has_good_ || v < good_v_) SetGood(x, interval->upper);
        if (has_bad_ && bad_v_ >= v) has_bad_ = false;  // not monotone here: keep the good
      } else {
        SetBad(x);
        if (has_good_ && good_v_ <= v) has_good_ = false;
      }
      if (std::isfinite(interval->upper) && interval->upper > 0) {
        fine_.push_back({v, std::log(interval->upper)});
      }
    }
    if (has_good_) return std::optional<SearchPoint>(SearchPoint{good_x_, good_eps_});
    return Error{"the calibration search did not converge"};
  }

 private:
  double ToV(double x) const { return sgn_ * std::log(x); }

  double ToX(double v) const {
    const double x = std::min(std::max(std::exp(sgn_ * v), spec_.min_x), spec_.max_x);
    if (!spec_.integer) return x;
    return std::min(std::max(std::round(x), spec_.min_x), spec_.max_x);
  }

  void SetGood(double x, double epsilon) {
    has_good_ = true;
    good_x_ = x;
    good_v_ = ToV(x);
    good_eps_ = epsilon;
  }

  void SetBad(double x) {
    const double v = ToV(x);
    if (has_bad_ && v <= bad_v_) return;
    has_bad_ = true;
    bad_x_ = x;
    bad_v_ = v;
  }

  bool Closed() const {
    if (!(has_good_ && has_bad_)) return false;
    if (spec_.integer) return std::abs(good_x_ - bad_x_) <= 1;
    return std::max(good_x_, bad_x_) / std::min(good_x_, bad_x_) <= 1 + spec_.relative_width;
  }

  // Secant slope df/dv of the last two points of `points` at least kMinSlopeSpan apart.
  static std::optional<double> Secant(const std::vector<ModelPoint>& points) {
    if (points.size() < 2) return std::nullopt;
    const ModelPoint& b = points.back();
    for (auto it = points.rbegin() + 1; it != points.rend(); ++it) {
      if (std::abs(b.v - it->v) >= kMinSlopeSpan) return (b.f - it->f) / (b.v - it->v);
    }
    return std::nullopt;
  }

  // The model's slope: from the fine points, else the coarse ones, else the hint; epsilon
  // falls towards the good side, so a slope >= 0 is replaced.
  double Slope() const {
    for (const auto* points : {&fine_, &coarse_}) {
      std::optional<double> s = Secant(*points);
      if (s && std::isfinite(*s) && *s < 0) return *s;
    }
    const double hint = sgn_ * spec_.slope_hint;
    return std::isfinite(hint) && hint < 0 ? hint : -1.0;
  }

  // The predicted boundary (in v) from the latest fine point, else the latest coarse one;
  // NaN without either.
  double Root() const {
    const std::vector<ModelPoint>& points = fine_.empty() ? coarse_ : fine_;
    if (points.empty()) return std::nan("");
    return points.back().v + (log_target_ - points.back().f) / Slope();
  }

  // Phase 1: coarse evaluations until the model's step is shorter than kCoarseDone.
  Result<void> Locate() {
    double v = std::min(std::max(ToV(spec_.start), vlo_), vhi_);
    for (int it = 0; it < kMaxCoarse; ++it) {
      const double x = ToX(v);
      auto interval = eval_(x, /*fine=*/false);
      if (!interval.ok()) return Error{interval.error()};
      if (interval->lower > spec_.target) SetBad(x);
      const double estimate =
          interval->lower + kCoarseFraction * (interval->upper - interval->lower);
      double step;
      if (std::isfinite(estimate) && estimate > 0) {
        coarse_.push_back({ToV(x), std::log(estimate)});
        step = Root() - ToV(x);
        if (!std::isfinite(step)) step = estimate > spec_.target ? kLn2 : -kLn2;
        if (std::abs(step) < kCoarseDone) return OkResult();
        step = std::min(std::max(step, -kLn2), kLn2);
      } else {
        step = estimate > 0 ? kLn2 : -kLn2;  // +inf (or NaN): towards the good side
      }
      const double next = std::min(std::max(ToV(x) + step, vlo_), vhi_);
      if (ToX(next) == x) return OkResult();
      v = next;
    }
    return OkResult();
  }

  double NextFine() {
    const bool bisect = has_good_ && has_bad_ && steps_in_bracket_ >= kModelStepsPerBisection;
    if (has_good_ && has_bad_) ++steps_in_bracket_;
    if (bisect) steps_in_bracket_ = 0;
    if (spec_.integer) return NextFineInteger(bisect);
    double v;
    const double root = Root();
    if (bisect || (!std::isfinite(root) && has_good_ && has_bad_)) {
      v = (good_v_ + bad_v_) / 2;
    } else if (!std::isfinite(root)) {
      v = has_good_ ? good_v_ - kLn2 : (has_bad_ ? bad_v_ + kLn2 : ToV(spec_.start));
    } else if (has_good_ && root >= good_v_ - width_) {
      v = good_v_ - OneSidedStep();  // one width across the boundary: closes if it is bad
    } else if (has_bad_ && root <= bad_v_ + width_) {
      v = bad_v_ + OneSidedStep();
    } else {
      v = root + width_ / 2;  // just inside the good side
      // One-sided: at most a factor 2 past the nearest evaluated point.
      if (has_good_ && !has_bad_) v = std::max(v, good_v_ - kLn2);
      if (has_bad_ && !has_good_) v = std::min(v, bad_v_ + kLn2);
    }
    return ToX(std::min(std::max(v, vlo_), vhi_));
  }

  // One width; doubled for each further fine evaluation that still leaves the boundary on
  // one side (a model that keeps missing it), up to a factor 2 in x.
  double OneSidedStep() const {
    if (has_good_ && has_bad_) return width_;
    const int doublings = std::min(std::max(one_sided_evaluations_ - 1, 0), 30);
    return std::min(width_ * std::ldexp(1.0, doublings), kLn2);
  }

  // Integral x: the boundary lies between a good x and its neighbour on the bad side.
  double NextFineInteger(bool bisect) {
    const double toward_bad = spec_.good_is_large ? -1.0 : 1.0;
    const double root_v = Root();
    const double root = std::exp(sgn_ * root_v);  // the predicted boundary, as a real x
    double x;
    if (bisect || (!std::isfinite(root_v) && has_good_ && has_bad_)) {
      x = std::round((good_x_ + bad_x_) / 2);
      if (x == good_x_ || x == bad_x_) x = good_x_ + toward_bad;
    } else if (!std::isfinite(root_v)) {
      x = has_good_ ? ToX(good_v_ - kLn2) : (has_bad_ ? ToX(bad_v_ + kLn2) : spec_.start);
    } else if (has_good_ && (root - good_x_) * toward_bad < 1) {
      x = good_x_ + toward_bad;
    } else if (has_bad_ && (bad_x_ - root) * toward_bad <= 1) {
      x = bad_x_ - toward_bad;
    } else {
      x = spec_.good_is_large ? std::ceil(root) : std::floor(root);
      if (has_good_ && !has_bad_) x = ClampOneSided(x, good_x_, ToX(good_v_ - kLn2));
      if (has_bad_ && !has_good_) x = ClampOneSided(x, bad_x_, ToX(bad_v_ + kLn2));
      if (has_good_ && has_bad_ &&
          !((x - good_x_) * toward_bad > 0 && (bad_x_ - x) * toward_bad > 0)) {
        x = std::round((good_x_ + bad_x_) / 2);
      }
    }
    return std::min(std::max(x, spec_.min_x), spec_.max_x);
  }

  // x limited to the interval between `from` and `limit` (a factor 2 away).
  static double ClampOneSided(double x, double from, double limit) {
    return std::min(std::max(x, std::min(from, limit)), std::max(from, limit));
  }

  const IntervalAt& eval_;
  const SearchSpec& spec_;
  const double sgn_, vlo_, vhi_, log_target_, width_;
  std::vector<ModelPoint> coarse_, fine_;
  bool has_good_ = false, has_bad_ = false;
  double good_x_ = 0, good_v_ = 0, good_eps_ = 0, bad_x_ = 0, bad_v_ = 0;
  int steps_in_bracket_ = 0;
  int one_sided_evaluations_ = 0;  // fine evaluations so far without a two-sided bracket
};

}  // namespace

Result<std::optional<SearchPoint>> ModelSearch(const IntervalAt& eval, const SearchSpec& spec) {
  return Searcher(eval, spec).Run();
}

}  // namespace dpkit::accounting::calibrate_internal
