#include "dpkit/accounting/event_json_dp_accounting.h"

#include <string>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/json_parse.h"

namespace dpkit::accounting {
namespace {

using nlohmann::json;

// One dp_accounting class: its name, dpkit's type, and the field renames (dp_accounting
// name -> dpkit name), in dp_accounting's order.
struct FieldRename {
  const char* from;
  const char* to;
};
struct ClassSpelling {
  const char* class_name;
  const char* dpkit_type;
  std::vector<FieldRename> fields;
};

const std::vector<ClassSpelling>& Spellings() {
  static const std::vector<ClassSpelling>* const kSpellings = new std::vector<ClassSpelling>{
      {"GaussianDpEvent", "gaussian", {{"noise_multiplier", "noise_multiplier"}}},
      {"LaplaceDpEvent", "laplace", {{"noise_multiplier", "scale"}}},
      {"EpsilonDeltaDpEvent", "approx_dp", {{"epsilon", "epsilon"}, {"delta", "delta"}}},
      {"PoissonSampledDpEvent",
       "poisson_sampled",
       {{"sampling_probability", "sampling_rate"}, {"event", "event"}}},
      {"SampledWithoutReplacementDpEvent",
       "sampled_without_replacement",
       {{"source_dataset_size", "population"}, {"sample_size", "sample_size"}, {"event", "event"}}},
      {"SelfComposedDpEvent", "self_composed", {{"event", "event"}, {"count", "count"}}},
      {"ComposedDpEvent", "composed", {{"events", "events"}}},
  };
  return *kSpellings;
}

const ClassSpelling* FindSpelling(const std::string& class_name) {
  for (const ClassSpelling& spelling : Spellings()) {
    if (class_name == spelling.class_name) return &spelling;
  }
  return nullptr;
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The class name and the object holding the fields of a wrapped or flat event.
struct Unwrapped {
  std::string class_name;
  json fields;  // without class_name / module_name
};

Result<Unwrapped> Unwrap(const json& in) {
  if (!in.is_object()) {
    return Error{"dp_accounting event must be a JSON object, got " + internal::DumpForMessage(in)};
  }
  const auto class_field = in.find("class_name");
  if (class_field != in.end()) {
    if (!class_field->is_string()) {
      return Error{"dp_accounting field \"class_name\" must be a string, got " +
                   internal::DumpForMessage(*class_field)};
    }
    const auto module_field = in.find("module_name");
    if (module_field != in.end() &&
        (!module_field->is_string() ||
         module_field->get<std::string>().rfind("dp_accounting", 0) != 0)) {
      return Error{"dp_accounting field \"module_name\" must name a dp_accounting module, got " +
                   internal::DumpForMessage(*module_field)};
    }
    Unwrapped out{class_field->get<std::string>(), json::object()};
    for (auto it = in.begin(); it != in.end(); ++it) {
      if (it.key() != "class_name" && it.key() != "module_name") out.fields[it.key()] = it.value();
    }
    return out;
  }
  if (in.size() == 1 && EndsWith(in.begin().key(), "DpEvent")) {
    if (!in.begin().value().is_object()) {
      return Error{"dp_accounting " + in.begin().key() + " must hold a JSON object of its fields, got " +
                   internal::DumpForMessage(in.begin().value())};
    }
    return Unwrapped{in.begin().key(), in.begin().value()};
  }
  return Error{"not a dp_accounting event (expected {\"<Name>DpEvent\": {...}} or "
               "{\"class_name\": \"<Name>DpEvent\", ...}): " + internal::DumpForMessage(in)};
}

Result<json> Convert(const json& in, int depth) {
  if (depth > kMaxEventDepth) {
    return Error{"event nesting must be at most " + std::to_string(kMaxEventDepth) + " levels deep"};
  }
  // dpkit's spelling inside a dp_accounting tree is kept as it is (Event::FromJson checks it).
  if (depth > 1 && in.is_object() && in.contains("type")) return in;
  Result<Unwrapped> unwrapped = Unwrap(in);
  if (!unwrapped.ok()) return Error{unwrapped.error()};
  const std::string& name = unwrapped->class_name;
  const ClassSpelling* spelling = FindSpelling(name);
  if (spelling == nullptr) {
    return Error{"dp_accounting event " + name +
                 " is not supported (supported: GaussianDpEvent, LaplaceDpEvent, EpsilonDeltaDpEvent, "
                 "PoissonSampledDpEvent, SampledWithoutReplacementDpEvent, SelfComposedDpEvent, "
                 "ComposedDpEvent)"};
  }
  const json& fields = unwrapped->fields;
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    bool known = false;
    for (const FieldRename& field : spelling->fields) known = known || it.key() == field.from;
    if (!known) return Error{name + " has unknown field \"" + it.key() + "\""};
  }
  // (epsilon, 0)-DP is epsilon-DP: pure_dp, which the RDP accountant also bounds.
  const auto delta = fields.find("delta");
  const bool pure = name == "EpsilonDeltaDpEvent" && delta != fields.end() && delta->is_number() &&
                    delta->get<double>() == 0;
  json out = {{"type", pure ? "pure_dp" : spelling->dpkit_type}};
  for (const FieldRename& field : spelling->fields) {
    const auto value = fields.find(field.from);
    if (value == fields.end()) return Error{name + " is missing field \"" + field.from + "\""};
    const std::string from = field.from;
    if (from == "event") {
      Result<json> inner = Convert(*value, depth + 1);
      if (!inner.ok()) return inner;
      out[field.to] = std::move(inner).value();
    } else if (from == "events") {
      if (!value->is_array()) {
        return Error{name + " field \"events\" must be an array, got " + internal::DumpForMessage(*value)};
      }
      json children = json::array();
      for (const json& child : *value) {
        Result<json> converted = Convert(child, depth + 1);
        if (!converted.ok()) return converted;
        children.push_back(std::move(converted).value());
      }
      out[field.to] = std::move(children);
    } else if (!(pure && from == "delta")) {
      out[field.to] = *value;
    }
  }
  return out;
}

}  // namespace

bool IsDpAccountingEventJson(const json& in) {
  if (!in.is_object()) return false;
  if (in.contains("class_name")) return true;
  return in.size() == 1 && EndsWith(in.begin().key(), "DpEvent");
}

Result<json> DpAccountingToEventJson(const json& in) { return Convert(in, 1); }

Result<Event> EventFromAnyJson(const json& in) {
  if (!IsDpAccountingEventJson(in)) return Event::FromJson(in);
  Result<json> converted = DpAccountingToEventJson(in);
  if (!converted.ok()) return Error{converted.error()};
  return Event::FromJson(*converted);
}

Result<Event> EventFromAnyJsonString(std::string_view text) {
  Result<json> parsed = internal::ParseJson(text);
  if (!parsed.ok()) return Error{"event is not valid JSON: " + parsed.error()};
  return EventFromAnyJson(*parsed);
}

}  // namespace dpkit::accounting
