// Events: what happened to the data, as a tree that any accountant can process.
//
// An Event is an immutable value (a shared pointer to a validated node), so copying
// one is cheap and a tree is never half-built: the only way to make one is through the
// validating factories below, which return Result<Event>. Noise parameters are in units
// of the query's sensitivity (sensitivity 1): a Gaussian with noise_multiplier z adds
// N(0, z^2), a Laplace with scale b adds Lap(b).
//
// Leaves: Gaussian, Laplace, DiscreteGaussian, PureDp, BoundedRange, ApproxDp. Inner nodes: PoissonSampled (each
// record enters independently with probability q), SampledWithoutReplacement (a
// uniformly random subset of m of the n records), SelfComposed (the inner event run
// `count` times), Composed (the children run one after another, adaptively).
//
// JSON form (ToJson / FromJson), one object per node, with a "type" string:
//   {"type":"gaussian","noise_multiplier":1.1}
//   {"type":"laplace","scale":2}
//   {"type":"discrete_gaussian","sigma":1500,"sensitivity":1025}
//   {"type":"pure_dp","epsilon":0.5}
//   {"type":"bounded_range","epsilon":0.5}
//   {"type":"approx_dp","epsilon":1,"delta":1e-6}
//   {"type":"poisson_sampled","sampling_rate":0.01,"event":{...}}
//   {"type":"sampled_without_replacement","population":60000,"sample_size":256,"event":{...}}
//   {"type":"self_composed","count":1000,"event":{...}}
//   {"type":"composed","events":[{...},{...}]}
// Doubles are written in their shortest round-trip form, so FromJson(ToJson(e)) == e
// bit for bit. FromJson rejects unknown types, unknown or missing fields, wrong JSON
// types, values outside the factories' ranges and trees deeper than kMaxEventDepth, with
// one-line messages that echo at most 80 characters of a value. Readers of files also
// apply CheckFileRanges (below).
#ifndef DPKIT_ACCOUNTING_EVENT_H_
#define DPKIT_ACCOUNTING_EVENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dpkit/accounting/result.h"
#include "nlohmann/json.hpp"

namespace dpkit::accounting {

enum class EventKind {
  kGaussian,
  kLaplace,
  kDiscreteGaussian,
  kPureDp,
  kBoundedRange,
  kApproxDp,
  kPoissonSampled,
  kSampledWithoutReplacement,
  kSelfComposed,
  kComposed
};

// The JSON "type" string of a kind ("gaussian", "poisson_sampled", ...).
const char* EventKindName(EventKind kind);

// Largest integer sensitivity of a discrete Gaussian event (2^40, as the samplers'
// largest sigma): the accountants form sensitivity^2 and sigma^2 t / sensitivity in
// long double, which stays exact enough far beyond it.
inline constexpr int64_t kMaxDiscreteSensitivity = int64_t{1} << 40;

// Nesting limit of FromJson (protects the recursive accountants from hostile input).
inline constexpr int kMaxEventDepth = 256;

class Event {
 public:
  // Gaussian noise N(0, noise_multiplier^2) on a sensitivity-1 query; finite, > 0.
  static Result<Event> Gaussian(double noise_multiplier);
  // Laplace noise Lap(scale) on a sensitivity-1 (L1) query; finite, > 0.
  static Result<Event> Laplace(double scale);
  // Discrete Gaussian noise N_Z(0, sigma^2) (P(x) proportional to exp(-x^2/(2 sigma^2))
  // on the integers; Canonne, Kamath, Steinke 2020) added to an integer-valued query
  // with integer L2 sensitivity `sensitivity`. Unlike the other leaves its parameters
  // are in the query's own (integer) units: the loss lattice depends on both.
  // sigma finite, > 0; sensitivity in [1, kMaxDiscreteSensitivity].
  static Result<Event> DiscreteGaussian(double sigma, int64_t sensitivity);
  // Any epsilon-DP mechanism; epsilon finite, >= 0.
  static Result<Event> PureDp(double epsilon);
  // Any epsilon-bounded-range mechanism (Durfee & Rogers 2019; Dong, Durfee, Rogers
  // 2020): for neighbours, the privacy loss log(P(y)/Q(y)) ranges over an
  // interval of length at most epsilon, e.g. the exponential mechanism with
  // P(i) ∝ exp(epsilon u_i / (2 Delta)). Implies epsilon-DP. epsilon finite, >= 0.
  static Result<Event> BoundedRange(double epsilon);
  // Any (epsilon, delta)-DP mechanism; epsilon finite >= 0, delta in [0, 1].
  static Result<Event> ApproxDp(double epsilon, double delta);
  // `inner` run on a Poisson sample of rate sampling_rate in (0, 1].
  static Result<Event> PoissonSampled(double sampling_rate, Event inner);
  // `inner` run on a uniformly random subset of sample_size of population records;
  // 0 < sample_size <= population.
  static Result<Event> SampledWithoutReplacement(int64_t population, int64_t sample_size,
                                                 Event inner);
  // `inner` run count >= 1 times.
  static Result<Event> SelfComposed(Event inner, int64_t count);
  // The events run in sequence; non-empty.
  static Result<Event> Composed(std::vector<Event> events);

  EventKind kind() const;
  // Parameter accessors; each returns 0 for a kind that has no such parameter.
  double noise_multiplier() const;  // kGaussian
  double scale() const;             // kLaplace
  double sigma() const;             // kDiscreteGaussian
  int64_t sensitivity() const;      // kDiscreteGaussian
  double epsilon() const;           // kPureDp, kBoundedRange, kApproxDp
  double delta() const;             // kApproxDp (0 for kPureDp, kBoundedRange)
  double sampling_rate() const;     // kPoissonSampled
  int64_t population() const;       // kSampledWithoutReplacement
  int64_t sample_size() const;      // kSampledWithoutReplacement
  int64_t count() const;            // kSelfComposed
  // The sampled or repeated event of kPoissonSampled, kSampledWithoutReplacement and
  // kSelfComposed. Precondition: one of those kinds (asserts; *this otherwise).
  const Event& inner() const;
  // The events of kComposed; the single inner event for the three kinds above; empty
  // for leaves.
  const std::vector<Event>& children() const;

  nlohmann::json ToJson() const;
  static Result<Event> FromJson(const nlohmann::json& json);
  // Compact JSON text; doubles round-trip exactly.
  std::string ToJsonString() const;
  static Result<Event> FromJsonString(std::string_view text);

  // Structural equality; doubles compare by value (so +0 == -0 cannot arise: all
  // stored parameters are validated and 0 is stored as +0).
  friend bool operator==(const Event& a, const Event& b);
  friend bool operator!=(const Event& a, const Event& b) { return !(a == b); }

 private:
  struct Node;
  explicit Event(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  static Result<Event> FromJsonAtDepth(const nlohmann::json& json, int depth);

  std::shared_ptr<const Node> node_;
};

// Ranges of events read from files (ledgers, event files). The factories and FromJson
// accept every value that defines a mechanism (calibration searches, and PLD's internal
// round trip through JSON, need extreme ones); an event read from a file must also pass
// CheckFileRanges, outside whose ranges an accountant overflows, fails to converge or runs
// for minutes (issue 21: a discrete Gaussian of sigma 0.001 at sensitivity 2^40 kept PLD
// busy for over 5 minutes, a Poisson-sampled Gaussian of noise multiplier 1e-308 over a
// minute; a self-composition count of 2^62 or a pure-DP epsilon of 1e308 made RDP fail).
// Within them one component's epsilon stays below about 10^4, where PLD's loss grid ends
// (accounting/README.md, "Ranges of events read from files").
//   gaussian noise_multiplier; discrete_gaussian sigma / sensitivity   >= 0.01
inline constexpr double kMinFileNoiseMultiplier = 0.01;
//   laplace scale                                                       >= 1e-4
inline constexpr double kMinFileLaplaceScale = 1e-4;
//   pure_dp, bounded_range, approx_dp epsilon                           <= 1e4
inline constexpr double kMaxFileEpsilon = 1e4;
//   product of the self_composed counts on any path from the root      <= 1e9
inline constexpr int64_t kMaxFileRepetitions = 1000000000;

// OK when every parameter of `event` lies in the ranges above; else a one-line error
// naming the kind, the field and the range: "gaussian noise_multiplier must be >= 0.01 in
// a ledger or event file, got 1e-308".
Result<void> CheckFileRanges(const Event& event);

// DP-SGD with Poisson sampling: SelfComposed(PoissonSampled(q, Gaussian(sigma)), steps).
Result<Event> DpSgdEvent(double sampling_rate, double noise_multiplier, int64_t steps);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_EVENT_H_
