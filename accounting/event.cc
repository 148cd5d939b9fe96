#include "dpkit/accounting/event.h"

#include <cassert>
#include <cmath>
#include <set>
#include <utility>

#include "dpkit/accounting/internal/format.h"
#include "dpkit/accounting/internal/json_parse.h"

namespace dpkit::accounting {

using internal::DumpForMessage;
using internal::FormatDouble;
using nlohmann::json;

// One validated node. Only the fields of its kind are set; the rest stay 0.
struct Event::Node {
  EventKind kind = EventKind::kGaussian;
  double noise_multiplier = 0;
  double scale = 0;
  double sigma = 0;
  int64_t sensitivity = 0;
  double epsilon = 0;
  double delta = 0;
  double sampling_rate = 0;
  int64_t population = 0;
  int64_t sample_size = 0;
  int64_t count = 0;
  std::vector<Event> children;
};

// A JSON text can hold any event FromJson accepts (json_parse.h): two levels per node.
static_assert(internal::kMaxJsonDepth >= 2 * kMaxEventDepth + 1);

namespace {

Error RangeError(const char* name, const char* range, double value) {
  return Error{std::string(name) + " must be " + range + ", got " + FormatDouble(value)};
}
Error RangeError(const char* name, const char* range, int64_t value) {
  return Error{std::string(name) + " must be " + range + ", got " + std::to_string(value)};
}

// Turns -0 into +0 so that stored parameters compare and serialise uniquely.
double Canonical(double value) { return value == 0 ? 0.0 : value; }

}  // namespace

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kGaussian:
      return "gaussian";
    case EventKind::kLaplace:
      return "laplace";
    case EventKind::kDiscreteGaussian:
      return "discrete_gaussian";
    case EventKind::kPureDp:
      return "pure_dp";
    case EventKind::kBoundedRange:
      return "bounded_range";
    case EventKind::kApproxDp:
      return "approx_dp";
    case EventKind::kPoissonSampled:
      return "poisson_sampled";
    case EventKind::kSampledWithoutReplacement:
      return "sampled_without_replacement";
    case EventKind::kSelfComposed:
      return "self_composed";
    case EventKind::kComposed:
      return "composed";
  }
  return "unknown";
}

Result<Event> Event::Gaussian(double noise_multiplier) {
  if (!std::isfinite(noise_multiplier) || noise_multiplier <= 0) {
    return RangeError("noise_multiplier", "finite and > 0", noise_multiplier);
  }
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kGaussian;
  node->noise_multiplier = noise_multiplier;
  return Event(std::move(node));
}

Result<Event> Event::Laplace(double scale) {
  if (!std::isfinite(scale) || scale <= 0) {
    return RangeError("scale", "finite and > 0", scale);
  }
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kLaplace;
  node->scale = scale;
  return Event(std::move(node));
}

Result<Event> Event::DiscreteGaussian(double sigma, int64_t sensitivity) {
  if (!std::isfinite(sigma) || sigma <= 0) {
    return RangeError("sigma", "finite and > 0", sigma);
  }
  if (sensitivity < 1 || sensitivity > kMaxDiscreteSensitivity) {
    return RangeError("sensitivity", "an integer in [1, 2^40]", sensitivity);
  }
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kDiscreteGaussian;
  node->sigma = sigma;
  node->sensitivity = sensitivity;
  return Event(std::move(node));
}

Result<Event> Event::PureDp(double epsilon) {
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return RangeError("epsilon", "finite and >= 0", epsilon);
  }
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kPureDp;
  node->epsilon = Canonical(epsilon);
  return Event(std::move(node));
}

Result<Event> Event::BoundedRange(double epsilon) {
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return RangeError("epsilon", "finite and >= 0", epsilon);
  }
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kBoundedRange;
  node->epsilon = Canonical(epsilon);
  return Event(std::move(node));
}

Result<Event> Event::ApproxDp(double epsilon, double delta) {
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return RangeError("epsilon", "finite and >= 0", epsilon);
  }
  if (!(delta >= 0 && delta <= 1)) {
    return RangeError("delta", "in [0, 1]", delta);
  }
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kApproxDp;
  node->epsilon = Canonical(epsilon);
  node->delta = Canonical(delta);
  return Event(std::move(node));
}

Result<Event> Event::PoissonSampled(double sampling_rate, Event inner) {
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return RangeError("sampling_rate", "in (0, 1]", sampling_rate);
  }
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kPoissonSampled;
  node->sampling_rate = sampling_rate;
  node->children.push_back(std::move(inner));
  return Event(std::move(node));
}

Result<Event> Event::SampledWithoutReplacement(int64_t population, int64_t sample_size,
                                               Event inner) {
  if (population < 1) return RangeError("population", ">= 1", population);
  if (sample_size < 1 || sample_size > population) {
    return Error{"sample_size must be in [1, population=" + std::to_string(population) +
                 "], got " + std::to_string(sample_size)};
  }
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kSampledWithoutReplacement;
  node->population = population;
  node->sample_size = sample_size;
  node->children.push_back(std::move(inner));
  return Event(std::move(node));
}

Result<Event> Event::SelfComposed(Event inner, int64_t count) {
  if (count < 1) return RangeError("count", ">= 1", count);
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kSelfComposed;
  node->count = count;
  node->children.push_back(std::move(inner));
  return Event(std::move(node));
}

Result<Event> Event::Composed(std::vector<Event> events) {
  if (events.empty()) return Error{"events of a composed event must be non-empty"};
  auto node = std::make_shared<Node>();
  node->kind = EventKind::kComposed;
  node->children = std::move(events);
  return Event(std::move(node));
}

EventKind Event::kind() const { return node_->kind; }
double Event::noise_multiplier() const { return node_->noise_multiplier; }
double Event::scale() const { return node_->scale; }
double Event::sigma() const { return node_->sigma; }
int64_t Event::sensitivity() const { return node_->sensitivity; }
double Event::epsilon() const { return node_->epsilon; }
double Event::delta() const { return node_->delta; }
double Event::sampling_rate() const { return node_->sampling_rate; }
int64_t Event::population() const { return node_->population; }
int64_t Event::sample_size() const { return node_->sample_size; }
int64_t Event::count() const { return node_->count; }

const Event& Event::inner() const {
  const bool has_inner = node_->kind == EventKind::kPoissonSampled ||
                         node_->kind == EventKind::kSampledWithoutReplacement ||
                         node_->kind == EventKind::kSelfComposed;
  assert(has_inner);
  return has_inner ? node_->children.front() : *this;
}

const std::vector<Event>& Event::children() const { return node_->children; }

bool operator==(const Event& a, const Event& b) {
  if (a.node_ == b.node_) return true;
  const Event::Node& x = *a.node_;
  const Event::Node& y = *b.node_;
  return x.kind == y.kind && x.noise_multiplier == y.noise_multiplier && x.scale == y.scale &&
         x.sigma == y.sigma && x.sensitivity == y.sensitivity &&
         x.epsilon == y.epsilon && x.delta == y.delta && x.sampling_rate == y.sampling_rate &&
         x.population == y.population && x.sample_size == y.sample_size &&
         x.count == y.count && x.children == y.children;
}

json Event::ToJson() const {
  json out = json::object();
  out["type"] = EventKindName(kind());
  switch (kind()) {
    case EventKind::kGaussian:
      out["noise_multiplier"] = noise_multiplier();
      break;
    case EventKind::kLaplace:
      out["scale"] = scale();
      break;
    case EventKind::kDiscreteGaussian:
      out["sigma"] = sigma();
      out["sensitivity"] = sensitivity();
      break;
    case EventKind::kPureDp:
    case EventKind::kBoundedRange:
      out["epsilon"] = epsilon();
      break;
    case EventKind::kApproxDp:
      out["epsilon"] = epsilon();
      out["delta"] = delta();
      break;
    case EventKind::kPoissonSampled:
      out["sampling_rate"] = sampling_rate();
      out["event"] = inner().ToJson();
      break;
    case EventKind::kSampledWithoutReplacement:
      out["population"] = population();
      out["sample_size"] = sample_size();
      out["event"] = inner().ToJson();
      break;
    case EventKind::kSelfComposed:
      out["count"] = count();
      out["event"] = inner().ToJson();
      break;
    case EventKind::kComposed: {
      json events = json::array();
      for (const Event& child : children()) events.push_back(child.ToJson());
      out["events"] = std::move(events);
      break;
    }
  }
  return out;
}

std::string Event::ToJsonString() const { return ToJson().dump(); }

namespace {

// Checks that `object` has exactly the keys `type` and `fields`.
Result<void> CheckFields(const json& object, const std::string& type,
                         const std::set<std::string>& fields) {
  for (const auto& field : fields) {
    if (!object.contains(field)) {
      return Error{"event of type \"" + type + "\" is missing field \"" + field + "\""};
    }
  }
  for (const auto& item : object.items()) {
    if (item.key() != "type" && fields.count(item.key()) == 0) {
      return Error{"event of type \"" + type + "\" has unknown field " +
                   internal::QuoteForMessage(item.key())};
    }
  }
  return OkResult();
}

Result<double> GetDouble(const json& object, const char* field) {
  const json& value = object.at(field);
  if (!value.is_number()) {
    return Error{std::string("event field \"") + field + "\" must be a number, got " +
                 DumpForMessage(value)};
  }
  return value.get<double>();
}

Result<int64_t> GetInt(const json& object, const char* field) {
  const json& value = object.at(field);
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) {
      return Error{std::string("event field \"") + field + "\" must be at most " +
                   std::to_string(INT64_MAX) + ", got " + DumpForMessage(value)};
    }
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return Error{std::string("event field \"") + field + "\" must be an integer, got " +
               DumpForMessage(value)};
}

}  // namespace

Result<Event> Event::FromJson(const json& json_event) { return FromJsonAtDepth(json_event, 1); }

Result<Event> Event::FromJsonAtDepth(const json& in, int depth) {
  if (depth > kMaxEventDepth) {
    return Error{"event nesting must be at most " + std::to_string(kMaxEventDepth) +
                 " levels deep"};
  }
  if (!in.is_object()) return Error{"event must be a JSON object, got " + DumpForMessage(in)};
  if (!in.contains("type")) return Error{"event is missing field \"type\""};
  if (!in.at("type").is_string()) {
    return Error{"event field \"type\" must be a string, got " + DumpForMessage(in.at("type"))};
  }
  const std::string type = in.at("type").get<std::string>();
  if (type == "gaussian") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"noise_multiplier"}));
    Result<double> z = GetDouble(in, "noise_multiplier");
    if (!z.ok()) return Error{z.error()};
    return Gaussian(*z);
  }
  if (type == "laplace") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"scale"}));
    Result<double> b = GetDouble(in, "scale");
    if (!b.ok()) return Error{b.error()};
    return Laplace(*b);
  }
  if (type == "discrete_gaussian") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"sigma", "sensitivity"}));
    Result<double> sigma = GetDouble(in, "sigma");
    if (!sigma.ok()) return Error{sigma.error()};
    Result<int64_t> sensitivity = GetInt(in, "sensitivity");
    if (!sensitivity.ok()) return Error{sensitivity.error()};
    return DiscreteGaussian(*sigma, *sensitivity);
  }
  if (type == "pure_dp") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"epsilon"}));
    Result<double> eps = GetDouble(in, "epsilon");
    if (!eps.ok()) return Error{eps.error()};
    return PureDp(*eps);
  }
  if (type == "bounded_range") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"epsilon"}));
    Result<double> eps = GetDouble(in, "epsilon");
    if (!eps.ok()) return Error{eps.error()};
    return BoundedRange(*eps);
  }
  if (type == "approx_dp") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"epsilon", "delta"}));
    Result<double> eps = GetDouble(in, "epsilon");
    if (!eps.ok()) return Error{eps.error()};
    Result<double> delta = GetDouble(in, "delta");
    if (!delta.ok()) return Error{delta.error()};
    return ApproxDp(*eps, *delta);
  }
  if (type == "poisson_sampled") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"sampling_rate", "event"}));
    Result<double> q = GetDouble(in, "sampling_rate");
    if (!q.ok()) return Error{q.error()};
    Result<Event> inner = FromJsonAtDepth(in.at("event"), depth + 1);
    if (!inner.ok()) return inner;
    return PoissonSampled(*q, std::move(inner).value());
  }
  if (type == "sampled_without_replacement") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"population", "sample_size", "event"}));
    Result<int64_t> n = GetInt(in, "population");
    if (!n.ok()) return Error{n.error()};
    Result<int64_t> m = GetInt(in, "sample_size");
    if (!m.ok()) return Error{m.error()};
    Result<Event> inner = FromJsonAtDepth(in.at("event"), depth + 1);
    if (!inner.ok()) return inner;
    return SampledWithoutReplacement(*n, *m, std::move(inner).value());
  }
  if (type == "self_composed") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"count", "event"}));
    Result<int64_t> count = GetInt(in, "count");
    if (!count.ok()) return Error{count.error()};
    Result<Event> inner = FromJsonAtDepth(in.at("event"), depth + 1);
    if (!inner.ok()) return inner;
    return SelfComposed(std::move(inner).value(), *count);
  }
  if (type == "composed") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, type, {"events"}));
    const json& events = in.at("events");
    if (!events.is_array()) {
      return Error{"event field \"events\" must be an array, got " + DumpForMessage(events)};
    }
    std::vector<Event> children;
    children.reserve(events.size());
    for (const json& child : events) {
      Result<Event> parsed = FromJsonAtDepth(child, depth + 1);
      if (!parsed.ok()) return parsed;
      children.push_back(std::move(parsed).value());
    }
    return Composed(std::move(children));
  }
  return Error{"unknown event type " + internal::QuoteForMessage(type) +
               " (expected gaussian, laplace, discrete_gaussian, pure_dp, bounded_range, approx_dp, "
               "poisson_sampled, sampled_without_replacement, self_composed or composed)"};
}

Result<Event> Event::FromJsonString(std::string_view text) {
  Result<json> parsed = internal::ParseJson(text);
  if (!parsed.ok()) return Error{"event is not valid JSON: " + parsed.error()};
  return FromJson(*parsed);
}

namespace {

// "<kind> <field> must be ...": one parameter outside the ranges of CheckFileRanges.
Error FileRangeError(const Event& event, const char* field, const std::string& range,
                     const std::string& value) {
  return Error{std::string(EventKindName(event.kind())) + " " + field + " must be " + range +
               " in a ledger or event file, got " + value};
}

Result<void> CheckFileRangesBelow(const Event& event, int64_t repetitions) {
  switch (event.kind()) {
    case EventKind::kGaussian:
      if (!(event.noise_multiplier() >= kMinFileNoiseMultiplier)) {
        return FileRangeError(event, "noise_multiplier",
                              ">= " + FormatDouble(kMinFileNoiseMultiplier),
                              FormatDouble(event.noise_multiplier()));
      }
      return OkResult();
    case EventKind::kLaplace:
      if (!(event.scale() >= kMinFileLaplaceScale)) {
        return FileRangeError(event, "scale", ">= " + FormatDouble(kMinFileLaplaceScale),
                              FormatDouble(event.scale()));
      }
      return OkResult();
    case EventKind::kDiscreteGaussian:
      // sigma / sensitivity plays the part of the Gaussian's noise multiplier.
      if (!(event.sigma() / static_cast<double>(event.sensitivity()) >=
            kMinFileNoiseMultiplier)) {
        return FileRangeError(event, "sigma / sensitivity",
                              ">= " + FormatDouble(kMinFileNoiseMultiplier),
                              FormatDouble(event.sigma()) + " / " +
                                  std::to_string(event.sensitivity()));
      }
      return OkResult();
    case EventKind::kPureDp:
    case EventKind::kBoundedRange:
    case EventKind::kApproxDp:
      if (!(event.epsilon() <= kMaxFileEpsilon)) {
        return FileRangeError(event, "epsilon", "in [0, " + FormatDouble(kMaxFileEpsilon) + "]",
                              FormatDouble(event.epsilon()));
      }
      return OkResult();
    case EventKind::kSelfComposed:
      if (event.count() > kMaxFileRepetitions / repetitions) {
        return FileRangeError(
            event, "count",
            "in [1, " + std::to_string(kMaxFileRepetitions / repetitions) +
                "] (nested self_composed counts multiply to at most " +
                std::to_string(kMaxFileRepetitions) + ")",
            std::to_string(event.count()));
      }
      return CheckFileRangesBelow(event.inner(), repetitions * event.count());
    case EventKind::kPoissonSampled:
    case EventKind::kSampledWithoutReplacement:
    case EventKind::kComposed:
      for (const Event& child : event.children()) {
        DPKIT_RETURN_IF_ERROR(CheckFileRangesBelow(child, repetitions));
      }
      return OkResult();
  }
  return OkResult();
}

}  // namespace

Result<void> CheckFileRanges(const Event& event) { return CheckFileRangesBelow(event, 1); }

Result<Event> DpSgdEvent(double sampling_rate, double noise_multiplier, int64_t steps) {
  Result<Event> gaussian = Event::Gaussian(noise_multiplier);
  if (!gaussian.ok()) return gaussian;
  Result<Event> sampled = Event::PoissonSampled(sampling_rate, std::move(gaussian).value());
  if (!sampled.ok()) return sampled;
  if (steps < 1) return RangeError("steps", ">= 1", steps);
  return Event::SelfComposed(std::move(sampled).value(), steps);
}

}  // namespace dpkit::accounting
