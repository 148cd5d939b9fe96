// Calibration bindings (accounting/calibrate.h): the smallest noise multiplier, the
// largest number of steps or the largest sampling rate of DP-SGD that meets a privacy
// budget, re-accounted by the chosen accountant.
#include <cstdint>
#include <string>
#include <tuple>

#include <pybind11/pybind11.h>

#include "dpkit/accounting/calibrate.h"
#include "dpkit/python/src/bindings.h"

namespace dpkit::python {
namespace {

using accounting::Accountant;
using accounting::CalibrationOptions;

// The accountant and its options, named as `dpkit calibrate` names them.
struct Setting {
  Accountant accountant;
  CalibrationOptions options;
};

Setting SettingOf(const std::string& accountant, const std::string& conversion,
                  double epsilon_tolerance) {
  Setting s{Accountant::kPld, {}};
  if (accountant == "rdp") {
    s.accountant = Accountant::kRdp;
  } else if (accountant == "gdp") {
    s.accountant = Accountant::kGdp;
  } else if (accountant != "pld") {
    throw py::value_error("accountant must be one of pld, rdp, gdp; got '" + accountant + "'");
  }
  using Conversion = CalibrationOptions::RdpConversion;
  if (conversion == "optimal") {
    s.options.rdp_conversion = Conversion::kOptimal;
  } else if (conversion == "improved") {
    s.options.rdp_conversion = Conversion::kImproved;
  } else if (conversion == "classic") {
    s.options.rdp_conversion = Conversion::kClassic;
  } else {
    throw py::value_error("rdp_conversion must be one of optimal, improved, classic; got '" +
                          conversion + "'");
  }
  s.options.pld.epsilon_tolerance = epsilon_tolerance;
  return s;
}

std::tuple<double, double> NoiseMultiplier(double target_epsilon, double delta, double q,
                                           int64_t steps, const std::string& accountant,
                                           const std::string& conversion, double tolerance) {
  const Setting s = SettingOf(accountant, conversion, tolerance);
  py::gil_scoped_release release;
  const accounting::Calibration c = Unwrap(accounting::CalibrateNoiseMultiplier(
      target_epsilon, delta, q, steps, s.accountant, s.options));
  return {c.noise_multiplier, c.epsilon};
}

std::tuple<int64_t, double> Steps(double target_epsilon, double delta, double q, double z,
                                  int64_t max_steps, const std::string& accountant,
                                  const std::string& conversion, double tolerance) {
  const Setting s = SettingOf(accountant, conversion, tolerance);
  py::gil_scoped_release release;
  const accounting::StepsCalibration c = Unwrap(accounting::LargestSteps(
      target_epsilon, delta, q, z, max_steps, s.accountant, s.options));
  return {c.steps, c.epsilon};
}

// Exactly one of steps (>= 1) and epochs (> 0) is given; the other is 0.
std::tuple<double, int64_t, double> SamplingRate(double target_epsilon, double delta, double z,
                                                 int64_t steps, double epochs,
                                                 const std::string& accountant,
                                                 const std::string& conversion,
                                                 double tolerance) {
  const Setting s = SettingOf(accountant, conversion, tolerance);
  py::gil_scoped_release release;
  const accounting::SamplingRateCalibration c =
      epochs != 0 ? Unwrap(accounting::LargestSamplingRateForEpochs(
                        target_epsilon, delta, z, epochs, s.accountant, s.options))
                  : Unwrap(accounting::LargestSamplingRate(target_epsilon, delta, z, steps,
                                                           s.accountant, s.options));
  return {c.sampling_rate, c.steps, c.epsilon};
}

}  // namespace

void BindCalibration(py::module_& m) {
  m.def("calibrate_noise_multiplier", &NoiseMultiplier, py::arg("target_epsilon"),
        py::arg("delta"), py::arg("sampling_rate"), py::arg("steps"), py::arg("accountant"),
        py::arg("rdp_conversion"), py::arg("epsilon_tolerance"), "(noise_multiplier, epsilon).");
  m.def("calibrate_steps", &Steps, py::arg("target_epsilon"), py::arg("delta"),
        py::arg("sampling_rate"), py::arg("noise_multiplier"), py::arg("max_steps"),
        py::arg("accountant"), py::arg("rdp_conversion"), py::arg("epsilon_tolerance"),
        "(steps, epsilon).");
  m.def("calibrate_sampling_rate", &SamplingRate, py::arg("target_epsilon"), py::arg("delta"),
        py::arg("noise_multiplier"), py::arg("steps"), py::arg("epochs"), py::arg("accountant"),
        py::arg("rdp_conversion"), py::arg("epsilon_tolerance"),
        "(sampling_rate, steps, epsilon).");
  m.def(
      "clt_equivalent_noise_multiplier",
      [](double q, double z, int64_t steps, double delta, double tolerance) {
        accounting::PldOptions options;
        options.epsilon_tolerance = tolerance;
        const accounting::CltEquivalentNoise r = Unwrap(
            accounting::CltEquivalentNoiseMultiplier(q, z, steps, delta, options));
        return std::make_tuple(r.epsilon_upper, r.epsilon_lower, r.mu, r.noise_multiplier,
                               r.noise_multiplier_upper);
      },
      py::arg("sampling_rate"), py::arg("noise_multiplier"), py::arg("steps"),
      py::arg("delta"), py::arg("epsilon_tolerance"),
      py::call_guard<py::gil_scoped_release>(),
      "(epsilon_upper, epsilon_lower, mu, noise_multiplier, noise_multiplier_upper).");
}

}  // namespace dpkit::python
