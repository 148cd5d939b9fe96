// Shared declarations of the `_dpkit` extension module (pybind11), the C++ half of the
// Python package `dpkit` (python/dpkit/ is the other half: docstrings, dp_accounting-style
// classes and conveniences over these functions).
//
// Conventions kept by every binding:
//  * Errors: a failed accounting::Result or absl::Status becomes a Python ValueError whose
//    message is the library's one-line message, unchanged (Unwrap below). No input reaches
//    an assert or an abort: every precondition the C++ functions state is either validated
//    by them or checked here first.
//  * The GIL is released (py::call_guard<py::gil_scoped_release>) around every
//    accounting computation. Their arguments are immutable values (an Event is a shared
//    pointer to a const node) or copies, so no Python object is touched without the GIL.
//  * Noise comes from the calling thread's secure generator unless a generator from
//    `dpkit.testing` is passed explicitly.
#ifndef DPKIT_PYTHON_SRC_BINDINGS_H_
#define DPKIT_PYTHON_SRC_BINDINGS_H_

#include <string>
#include <utility>

#include <pybind11/pybind11.h>

#include "absl/status/statusor.h"
#include "dpkit/accounting/result.h"

namespace dpkit::python {

namespace py = pybind11;

// The value of `result`, or a ValueError carrying its message.
template <typename T>
T Unwrap(accounting::Result<T> result) {
  if (!result.ok()) throw py::value_error(result.error());
  return std::move(result).value();
}

inline void Unwrap(const accounting::Result<void>& result) {
  if (!result.ok()) throw py::value_error(result.error());
}

template <typename T>
T Unwrap(absl::StatusOr<T> status_or) {
  if (!status_or.ok()) throw py::value_error(std::string(status_or.status().message()));
  return *std::move(status_or);
}

// Adds the Event class and its factories (events.cc).
void BindEvents(py::module_& m);
// Adds PLD, RDP, conversions, GDP, calibration and ledger functions (accounting.cc).
void BindAccounting(py::module_& m);
// Adds the accounting report (report.cc).
void BindReport(py::module_& m);
// Adds the calibration functions (calibration.cc).
void BindCalibration(py::module_& m);
// Adds the generators, samplers and selection mechanisms (mechanisms.cc).
void BindMechanisms(py::module_& m);

}  // namespace dpkit::python

#endif  // DPKIT_PYTHON_SRC_BINDINGS_H_
