// Events written in dp_accounting's spelling (Google's Python library, dp_accounting/dp_event.py),
// converted to dpkit's events (accounting/event.h). No Abseil: the command line, the
// calculator (WebAssembly) and Python bindings share it.
//
// JSON encoding of a dp_accounting event. dp_accounting's DpEvent classes are attrs
// classes with a to_named_tuple() method whose tuples carry "module_name" and
// "class_name" beside the fields; json.dumps(event.to_named_tuple()._asdict()) gives the
// flat form. Both of these spellings are accepted, and they may be mixed in one tree (an
// inner event may also be in dpkit's spelling, {"type": ...}):
//   wrapped: {"GaussianDpEvent": {"noise_multiplier": 1.1}}  (one key: the class name)
//   flat:    {"class_name": "GaussianDpEvent", "noise_multiplier": 1.1}
//            ("module_name", if present, must start with "dp_accounting")
// Classes and their fields (dp_accounting's names) -> dpkit's event:
//   GaussianDpEvent{noise_multiplier}                   -> gaussian{noise_multiplier}
//   LaplaceDpEvent{noise_multiplier}                    -> laplace{scale = noise_multiplier}
//       (dp_accounting's Laplace noise_multiplier is the scale b over the L1 sensitivity)
//   EpsilonDeltaDpEvent{epsilon, delta}                 -> approx_dp{epsilon, delta}
//       (delta = 0: pure_dp{epsilon}, the same guarantee, which RDP also accounts)
//   PoissonSampledDpEvent{sampling_probability, event}  -> poisson_sampled{sampling_rate, event}
//   SampledWithoutReplacementDpEvent{source_dataset_size, sample_size, event}
//                                      -> sampled_without_replacement{population, sample_size, event}
//   SelfComposedDpEvent{event, count}                   -> self_composed{event, count}
//   ComposedDpEvent{events}                             -> composed{events}
// Any other class (NoOpDpEvent, NonPrivateDpEvent, UnsupportedDpEvent, ...) is an error
// naming it; so are unknown or missing fields. Values are validated by dpkit's factories
// (their messages use dpkit's field names, e.g. "sampling_rate must be in (0, 1]").
#ifndef DPKIT_ACCOUNTING_EVENT_JSON_DP_ACCOUNTING_H_
#define DPKIT_ACCOUNTING_EVENT_JSON_DP_ACCOUNTING_H_

#include <string_view>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/result.h"
#include "nlohmann/json.hpp"

namespace dpkit::accounting {

// True if `json` is a dp_accounting-spelled event object (wrapped or flat form), false
// for anything else (dpkit's events have a "type" field).
bool IsDpAccountingEventJson(const nlohmann::json& json);

// dpkit's event JSON (event.h) of a dp_accounting-spelled event tree; nesting is limited
// to kMaxEventDepth.
Result<nlohmann::json> DpAccountingToEventJson(const nlohmann::json& json);

// An event in either spelling: dp_accounting's (IsDpAccountingEventJson) or dpkit's.
Result<Event> EventFromAnyJson(const nlohmann::json& json);
// The same from JSON text ("event is not valid JSON: ..." on a syntax error).
Result<Event> EventFromAnyJsonString(std::string_view text);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_EVENT_JSON_DP_ACCOUNTING_H_
