// accounting::Event as the opaque `_dpkit.Event`: validating factories (the library's
// messages as ValueError), read-only accessors and the JSON form of accounting/event.h.
// The dp_accounting-style classes of python/dpkit/events.py are built on these.
#include <cstdint>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "dpkit/accounting/event.h"
#include "dpkit/python/src/bindings.h"

namespace dpkit::python {

using accounting::Event;

void BindEvents(py::module_& m) {
  py::class_<Event>(m, "Event",
                    "An immutable, validated event tree of accounting/event.h.")
      .def_static("gaussian", [](double z) { return Unwrap(Event::Gaussian(z)); },
                  py::arg("noise_multiplier"))
      .def_static("laplace", [](double b) { return Unwrap(Event::Laplace(b)); },
                  py::arg("scale"))
      .def_static(
          "discrete_gaussian",
          [](double sigma, int64_t sensitivity) {
            return Unwrap(Event::DiscreteGaussian(sigma, sensitivity));
          },
          py::arg("sigma"), py::arg("sensitivity"))
      .def_static("pure_dp", [](double eps) { return Unwrap(Event::PureDp(eps)); },
                  py::arg("epsilon"))
      .def_static("bounded_range",
                  [](double eps) { return Unwrap(Event::BoundedRange(eps)); },
                  py::arg("epsilon"))
      .def_static(
          "approx_dp",
          [](double eps, double delta) { return Unwrap(Event::ApproxDp(eps, delta)); },
          py::arg("epsilon"), py::arg("delta"))
      .def_static(
          "poisson_sampled",
          [](double q, const Event& inner) { return Unwrap(Event::PoissonSampled(q, inner)); },
          py::arg("sampling_rate"), py::arg("event"))
      .def_static(
          "sampled_without_replacement",
          [](int64_t population, int64_t sample_size, const Event& inner) {
            return Unwrap(Event::SampledWithoutReplacement(population, sample_size, inner));
          },
          py::arg("population"), py::arg("sample_size"), py::arg("event"))
      .def_static(
          "self_composed",
          [](const Event& inner, int64_t count) {
            return Unwrap(Event::SelfComposed(inner, count));
          },
          py::arg("event"), py::arg("count"))
      .def_static(
          "composed",
          [](std::vector<Event> events) { return Unwrap(Event::Composed(std::move(events))); },
          py::arg("events"))
      .def_static(
          "from_json", [](const std::string& text) { return Unwrap(Event::FromJsonString(text)); },
          py::arg("text"), "Parses the JSON form of accounting/event.h (validated).")
      .def("to_json", &Event::ToJsonString,
           "Compact JSON text; doubles in their shortest round-trip form.")
      .def_property_readonly("kind",
                             [](const Event& e) { return std::string(EventKindName(e.kind())); })
      .def_property_readonly("noise_multiplier", &Event::noise_multiplier)
      .def_property_readonly("scale", &Event::scale)
      .def_property_readonly("sigma", &Event::sigma)
      .def_property_readonly("sensitivity", &Event::sensitivity)
      .def_property_readonly("epsilon", &Event::epsilon)
      .def_property_readonly("delta", &Event::delta)
      .def_property_readonly("sampling_rate", &Event::sampling_rate)
      .def_property_readonly("population", &Event::population)
      .def_property_readonly("sample_size", &Event::sample_size)
      .def_property_readonly("count", &Event::count)
      .def_property_readonly("children", &Event::children,
                             "The inner events (composed), the one inner event (sampled, "
                             "self-composed), or [] for a leaf.")
      .def("__eq__", [](const Event& a, const Event& b) { return a == b; }, py::is_operator())
      .def("__ne__", [](const Event& a, const Event& b) { return a != b; }, py::is_operator())
      .def("__repr__", [](const Event& e) { return "_dpkit.Event(" + e.ToJsonString() + ")"; });

  m.def(
      "dp_sgd_event",
      [](double q, double z, int64_t steps) {
        return Unwrap(accounting::DpSgdEvent(q, z, steps));
      },
      py::arg("sampling_rate"), py::arg("noise_multiplier"), py::arg("steps"),
      "SelfComposed(PoissonSampled(q, Gaussian(z)), steps), as `dpkit epsilon` and "
      "`dpkit ledger` build it.");
}

}  // namespace dpkit::python
