// Mechanism bindings: noise samplers that fill NumPy arrays in place (mechanisms/
// gaussian.h, laplace.h, discrete.h) and private selection over a score array
// (mechanisms/selection.h).
//
// Randomness: with rng=None every function draws from the calling thread's
// SecureRandomGenerator (ChaCha20 keyed from getrandom(2), mechanisms/random.h) and runs
// without the GIL (the generator belongs to the thread, so no lock is needed). This module
// binds only the abstract RandomGenerator, which Python cannot instantiate; the one
// generator that can be passed is the seeded one of the separate, test-only extension
// `_dpkit_testing` (//python:_dpkit_testing.so, exposed as dpkit.testing), so this module
// carries no seeded generator. Functions given one keep the GIL, since a generator must
// not be used by two threads at once.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "dpkit/mechanisms/discrete.h"
#include "dpkit/mechanisms/gaussian.h"
#include "dpkit/mechanisms/laplace.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/selection.h"
#include "dpkit/python/src/bindings.h"

namespace dpkit::python {
namespace {

using mechanisms::RandomGenerator;

// Runs fn(generator): the thread's secure generator without the GIL when `rng` is None,
// else the given generator (from dpkit.testing) with the GIL held.
template <typename Fn>
auto WithGenerator(const py::object& rng, Fn fn) {
  if (rng.is_none()) {
    py::gil_scoped_release release;
    RandomGenerator* secure = Unwrap(mechanisms::ThreadLocalSecureRandomGenerator());
    return fn(*secure);
  }
  return fn(rng.cast<RandomGenerator&>());
}

void CheckFinitePositive(const char* name, double value) {
  if (!(std::isfinite(value) && value > 0)) {
    throw py::value_error(absl::StrCat(name, " must be finite and > 0, got ", value));
  }
}

// The writable C-contiguous array `out` of element type T, as a pointer and a size.
template <typename T>
std::pair<T*, size_t> Writable(py::array& out, const char* dtype_name) {
  if (!out.dtype().is(py::dtype::of<T>()) || !(out.flags() & py::array::c_style) ||
      !out.writeable()) {
    throw py::value_error(absl::StrCat("out must be a writable C-contiguous ", dtype_name,
                                       " array"));
  }
  return {static_cast<T*>(out.mutable_data()), static_cast<size_t>(out.size())};
}

void FillGaussianBinding(py::array out, double stddev, const py::object& rng) {
  CheckFinitePositive("stddev", stddev);
  if (out.dtype().is(py::dtype::of<float>())) {
    const std::pair<float*, size_t> buffer = Writable<float>(out, "float32 or float64");
    WithGenerator(rng, [&](RandomGenerator& g) {
      mechanisms::FillGaussian(g, stddev, buffer.first, buffer.second);
      return 0;
    });
    return;
  }
  const std::pair<double*, size_t> buffer = Writable<double>(out, "float32 or float64");
  WithGenerator(rng, [&](RandomGenerator& g) {
    mechanisms::FillGaussian(g, stddev, buffer.first, buffer.second);
    return 0;
  });
}

void FillLaplaceBinding(py::array out, double scale, const py::object& rng) {
  CheckFinitePositive("scale", scale);
  const std::pair<double*, size_t> buffer = Writable<double>(out, "float64");
  WithGenerator(rng, [&](RandomGenerator& g) {
    mechanisms::FillLaplace(g, scale, buffer.first, buffer.second);
    return 0;
  });
}

template <typename Sampler>
void FillDiscrete(const Sampler& sampler, py::array& out, const py::object& rng) {
  const std::pair<int64_t*, size_t> buffer = Writable<int64_t>(out, "int64");
  WithGenerator(rng, [&](RandomGenerator& g) {
    for (size_t i = 0; i < buffer.second; ++i) buffer.first[i] = sampler.Sample(g);
    return 0;
  });
}

mechanisms::SelectionSampler SamplerOf(const std::string& name) {
  if (name == "exponential") return mechanisms::SelectionSampler::kExponentialGumbel;
  if (name == "permute_and_flip") return mechanisms::SelectionSampler::kPermuteAndFlip;
  if (name == "report_noisy_max") return mechanisms::SelectionSampler::kReportNoisyMaxLaplace;
  throw py::value_error(
      "method must be one of exponential, permute_and_flip, report_noisy_max; got '" + name +
      "'");
}

using Scores = py::array_t<double, py::array::c_style | py::array::forcecast>;

absl::Span<const double> SpanOf(const Scores& scores) {
  if (scores.ndim() != 1) {
    throw py::value_error(absl::StrCat("scores must be a 1-D array, got ", scores.ndim(),
                                       " dimensions"));
  }
  return absl::Span<const double>(scores.data(), static_cast<size_t>(scores.size()));
}

size_t SelectBinding(const Scores& scores, double epsilon, double sensitivity,
                     const std::string& method, bool monotonic, const py::object& rng) {
  const mechanisms::PrivateSelection selection = Unwrap(mechanisms::PrivateSelection::Create(
      epsilon, sensitivity, SamplerOf(method), monotonic));
  const absl::Span<const double> span = SpanOf(scores);
  return WithGenerator(rng,
                       [&](RandomGenerator& g) { return Unwrap(selection.Select(span, g)); });
}

std::vector<double> ProbabilitiesBinding(const Scores& scores, double epsilon,
                                         double sensitivity, bool monotonic) {
  const mechanisms::PrivateSelection selection = Unwrap(mechanisms::PrivateSelection::Create(
      epsilon, sensitivity, mechanisms::SelectionSampler::kExponentialGumbel, monotonic));
  return Unwrap(selection.ExponentialProbabilities(SpanOf(scores)));
}

// The abstract base of the generators a sampler accepts (no constructor: the only
// subclass is dpkit.testing's, defined by the test-only extension _dpkit_testing).
void BindGenerator(py::module_& m) {
  py::class_<RandomGenerator>(
      m, "RandomGenerator",
      "A source of 64-bit words; only dpkit.testing.SeededGenerator derives from it.")
      .def("next_uint64", &RandomGenerator::NextUint64)
      .def("uniform", &RandomGenerator::UniformDouble);
}

}  // namespace

void BindMechanisms(py::module_& m) {
  BindGenerator(m);
  const auto rng = py::arg("rng") = py::none();
  m.def("fill_gaussian", &FillGaussianBinding, py::arg("out"), py::arg("stddev"), rng);
  m.def("fill_laplace", &FillLaplaceBinding, py::arg("out"), py::arg("scale"), rng);
  m.def(
      "fill_discrete_gaussian",
      [](py::array out, double sigma, const py::object& g) {
        FillDiscrete(Unwrap(mechanisms::DiscreteGaussianSampler::Create(sigma)), out, g);
      },
      py::arg("out"), py::arg("sigma"), rng);
  m.def(
      "fill_discrete_laplace",
      [](py::array out, double scale, const py::object& g) {
        FillDiscrete(Unwrap(mechanisms::DiscreteLaplaceSampler::Create(scale)), out, g);
      },
      py::arg("out"), py::arg("scale"), rng);
  m.def("select", &SelectBinding, py::arg("scores"), py::arg("epsilon"),
        py::arg("sensitivity"), py::arg("method"), py::arg("monotonic"), rng,
        "Index chosen by the exponential mechanism, permute-and-flip or report-noisy-max.");
  m.def("exponential_probabilities", &ProbabilitiesBinding, py::arg("scores"),
        py::arg("epsilon"), py::arg("sensitivity"), py::arg("monotonic"));
}

}  // namespace dpkit::python
