// The accounting report (accounting/report.h): every accountant's answer for one event,
// as the JSON and the text that `dpkit epsilon / delta / ledger` print.
#include <string>
#include <tuple>

#include <pybind11/pybind11.h>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/report.h"
#include "dpkit/python/src/bindings.h"

namespace dpkit::python {
namespace {

using accounting::ReportQuantity;

// (JSON text, text) of ComputeReport. `quantity` is "epsilon" (at delta = fixed) or
// "delta" (at epsilon = fixed); the Python layer has validated fixed and the options.
std::tuple<std::string, std::string> ReportBinding(const accounting::Event& event,
                                                   const std::string& quantity, double fixed,
                                                   bool rdp, bool pld, bool gdp,
                                                   const std::string& rdp_conversion,
                                                   double epsilon_tolerance, bool min_errors) {
  if (quantity != "epsilon" && quantity != "delta") {
    throw py::value_error("quantity must be epsilon or delta, got '" + quantity + "'");
  }
  accounting::ReportOptions options;
  options.rdp = rdp;
  options.pld = pld;
  options.gdp = gdp;
  options.rdp_conversion = Unwrap(accounting::ParseRdpReportConversion(rdp_conversion));
  options.pld_options.epsilon_tolerance = epsilon_tolerance;
  options.min_errors = min_errors;
  py::gil_scoped_release release;
  const accounting::PrivacyReport report = accounting::ComputeReport(
      event, quantity == "epsilon" ? ReportQuantity::kEpsilon : ReportQuantity::kDelta, fixed,
      options);
  return {accounting::ReportToJson(report).dump(), accounting::ReportToText(report)};
}

}  // namespace

void BindReport(py::module_& m) {
  m.def("report", &ReportBinding, py::arg("event"), py::arg("quantity"), py::arg("fixed"),
        py::arg("rdp"), py::arg("pld"), py::arg("gdp"), py::arg("rdp_conversion"),
        py::arg("epsilon_tolerance"), py::arg("min_errors"),
        "(JSON text, text) of accounting::ComputeReport.");
}

}  // namespace dpkit::python
