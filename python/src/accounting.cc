// Accounting bindings: certified PLD bounds (accounting/pld.h), RDP curves and their
// conversions (rdp.h, conversions.h), GDP / CLT (gdp.h) and ledger files (ledger.h).
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/fdp.h"
#include "dpkit/accounting/gdp.h"
#include "dpkit/accounting/gdp_composition.h"
#include "dpkit/accounting/ledger.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/rdp.h"
#include "dpkit/python/src/bindings.h"

namespace dpkit::python {
namespace {

using accounting::Event;
using Release = py::call_guard<py::gil_scoped_release>;

accounting::PldOptions PldOptionsOf(double epsilon_tolerance, double discretization_interval) {
  accounting::PldOptions options;
  options.epsilon_tolerance = epsilon_tolerance;
  options.discretization_interval = discretization_interval;
  return options;
}

// "optimal" (conversions.h, Asoodeh et al. 2021), "improved" (Balle et al. 2020,
// Thm. 21) or "classic" (Mironov 2017, Prop. 3), as `dpkit epsilon --rdp_conversion`.
enum class Conversion { kOptimal, kImproved, kClassic };

Conversion ConversionOf(const std::string& name) {
  if (name == "optimal") return Conversion::kOptimal;
  if (name == "improved") return Conversion::kImproved;
  if (name == "classic") return Conversion::kClassic;
  throw py::value_error("conversion must be one of optimal, improved, classic; got '" + name +
                        "'");
}

accounting::RdpConversion SingleOrder(Conversion conversion) {
  return conversion == Conversion::kImproved ? accounting::RdpConversion::kImproved
                                             : accounting::RdpConversion::kClassic;
}

std::tuple<double, double> RdpToEpsilonBinding(const std::vector<double>& orders,
                                               const std::vector<double>& rdp, double delta,
                                               const std::string& conversion_name) {
  const Conversion conversion = ConversionOf(conversion_name);
  py::gil_scoped_release release;
  const accounting::RdpEpsilon eps =
      conversion == Conversion::kOptimal
          ? Unwrap(accounting::RdpToEpsilonOptimal(orders, rdp, delta))
          : Unwrap(accounting::RdpToEpsilon(orders, rdp, delta, SingleOrder(conversion)));
  return {eps.epsilon, eps.order};
}

std::tuple<double, double> RdpToDeltaBinding(const std::vector<double>& orders,
                                             const std::vector<double>& rdp, double epsilon,
                                             const std::string& conversion_name) {
  const Conversion conversion = ConversionOf(conversion_name);
  py::gil_scoped_release release;
  const accounting::RdpDelta delta =
      conversion == Conversion::kOptimal
          ? Unwrap(accounting::RdpToDeltaOptimal(orders, rdp, epsilon))
          : Unwrap(accounting::RdpToDelta(orders, rdp, epsilon, SingleOrder(conversion)));
  return {delta.delta, delta.order};
}

// mu of an event tree under GDP composition (accounting/gdp_composition.h: mu's add in
// quadrature, Dong, Roth, Su 2019, Cor. 3.3; subsampled steps by the CLT of Bu et al.
// 2020, eq. (3.1), which makes the result approximate), as the report composes it.
std::tuple<double, bool> GdpMuOfEvent(const Event& event) {
  const accounting::GdpComposition mu = Unwrap(accounting::GdpMuOfEvent(event));
  return {mu.mu, mu.approximate};
}

std::tuple<Event, size_t> ReadLedgerBinding(const std::string& path) {
  py::gil_scoped_release release;
  const std::vector<accounting::LedgerEntry> entries = Unwrap(accounting::ReadLedger(path));
  accounting::Result<Event> event = accounting::LedgerToEvent(entries);
  if (!event.ok()) throw py::value_error(path + ": " + event.error());
  return {std::move(event).value(), entries.size()};
}

void BindPld(py::module_& m) {
  m.def(
      "pld_epsilon",
      [](const Event& event, double delta, double tolerance, double interval) {
        const accounting::EpsilonBounds b =
            Unwrap(accounting::PldEpsilon(event, delta, PldOptionsOf(tolerance, interval)));
        return std::make_tuple(b.epsilon_upper, b.epsilon_lower, b.discretization_interval);
      },
      py::arg("event"), py::arg("delta"), py::arg("epsilon_tolerance"),
      py::arg("discretization_interval"), Release(),
      "(epsilon_upper, epsilon_lower, discretization_interval) of accounting::PldEpsilon.");
  m.def(
      "pld_delta",
      [](const Event& event, double epsilon, double tolerance, double interval) {
        const accounting::DeltaBounds b =
            Unwrap(accounting::PldDelta(event, epsilon, PldOptionsOf(tolerance, interval)));
        return std::make_tuple(b.delta_upper, b.delta_lower, b.discretization_interval);
      },
      py::arg("event"), py::arg("epsilon"), py::arg("epsilon_tolerance"),
      py::arg("discretization_interval"), Release(),
      "(delta_upper, delta_lower, discretization_interval) of accounting::PldDelta.");
}

void BindRdp(py::module_& m) {
  m.def("default_rdp_orders", &accounting::DefaultRdpOrders);
  m.def("tf_privacy_orders", &accounting::TfPrivacyOrders);
  m.def(
      "compute_rdp",
      [](const Event& event, const std::vector<double>& orders) {
        return Unwrap(accounting::ComputeRdp(event, orders));
      },
      py::arg("event"), py::arg("orders"), Release());
  m.def("rdp_to_epsilon", &RdpToEpsilonBinding, py::arg("orders"), py::arg("rdp"),
        py::arg("delta"), py::arg("conversion"), "(epsilon, order).");
  m.def(
      "rdp_min_error_lower",
      [](const std::vector<double>& orders, const std::vector<double>& rdp) {
        // Bu et al. 2020, Sec. 5: min over tests of type I + type II error, here
        // min_alpha alpha + T(alpha) of the certified RDP lower envelope (Asoodeh et al.
        // 2021), as `dpkit epsilon --accountant=rdp` reports it.
        return accounting::MinimumErrorSum(Unwrap(accounting::RdpTradeoffCurve(orders, rdp)));
      },
      py::arg("orders"), py::arg("rdp"), Release());
  m.def("rdp_to_delta", &RdpToDeltaBinding, py::arg("orders"), py::arg("rdp"),
        py::arg("epsilon"), py::arg("conversion"), "(delta, order).");
}

void BindGdp(py::module_& m) {
  m.def(
      "gdp_delta", [](double mu, double eps) { return Unwrap(accounting::GdpDelta(mu, eps)); },
      py::arg("mu"), py::arg("epsilon"));
  m.def(
      "gdp_epsilon",
      [](double mu, double delta) { return Unwrap(accounting::GdpEpsilon(mu, delta)); },
      py::arg("mu"), py::arg("delta"));
  m.def(
      "gdp_mu", [](double eps, double delta) { return Unwrap(accounting::GdpMu(eps, delta)); },
      py::arg("epsilon"), py::arg("delta"));
  m.def(
      "clt_mu",
      [](double q, double z, int64_t steps) { return Unwrap(accounting::CltMu(q, z, steps)); },
      py::arg("sampling_rate"), py::arg("noise_multiplier"), py::arg("steps"));
  m.def(
      "clt_noise_multiplier",
      [](double eps, double delta, double q, int64_t steps) {
        return Unwrap(accounting::CltNoiseMultiplier(eps, delta, q, steps));
      },
      py::arg("epsilon"), py::arg("delta"), py::arg("sampling_rate"), py::arg("steps"));
  m.def("gdp_mu_of_event", &GdpMuOfEvent, py::arg("event"),
        "(mu, approximate) of an event tree under GDP composition.");
}

}  // namespace

void BindAccounting(py::module_& m) {
  BindPld(m);
  BindRdp(m);
  BindGdp(m);
  m.def("read_ledger", &ReadLedgerBinding, py::arg("path"),
        "(event, number of entries) of a ledger file, as `dpkit ledger` reads it.");
}

}  // namespace dpkit::python
