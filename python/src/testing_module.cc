// The test-only `_dpkit_testing` extension (//python:_dpkit_testing.so, testonly): the
// seeded generator of mechanisms/random_testing.h as a subclass of `_dpkit`'s abstract
// RandomGenerator, so that dpkit.testing can pass it to the samplers as `rng=`. It lives
// apart from `_dpkit` so that the production module carries no seeded generator.
// `_dpkit` must be imported first (it registers the base class); dpkit/testing.py does.
#include <cstdint>

#include <pybind11/pybind11.h>

#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"

namespace py = pybind11;

PYBIND11_MODULE(_dpkit_testing, m) {
  m.doc() = "Seeded generators for dpkit's tests ONLY (predictable: never privacy noise).";
  using dpkit::mechanisms::RandomGenerator;
  using dpkit::mechanisms::SeededRandomGeneratorForTesting;
  py::class_<SeededRandomGeneratorForTesting, RandomGenerator>(
      m, "SeededGeneratorForTesting",
      "xoshiro256** seeded through SplitMix64: reproducible, NEVER for privacy noise.")
      .def(py::init<uint64_t>(), py::arg("seed"));
}
