// The `_dpkit` extension module: binds //accounting and //mechanisms (no LibTorch).
#include <pybind11/pybind11.h>

#include "dpkit/python/src/bindings.h"

PYBIND11_MODULE(_dpkit, m) {
  m.doc() =
      "C++ core of the dpkit package (certified privacy accounting and secure "
      "mechanisms). Use the `dpkit` package, not this module.";
  dpkit::python::BindEvents(m);
  dpkit::python::BindAccounting(m);
  dpkit::python::BindReport(m);
  dpkit::python::BindCalibration(m);
  dpkit::python::BindMechanisms(m);
}
