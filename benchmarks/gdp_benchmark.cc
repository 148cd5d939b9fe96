// Benchmarks of //accounting:gdp: epsilon(delta; mu) (the inverse of Bu et al. 2020,
// eq. 3.2, by TOMS 748 in log space) and the closed form delta(eps; mu).
//
// BM_GdpEpsilon/<mu*1000>: one inversion at delta = 1e-5, swept over mu.
// gate/gdp_epsilon: fixed work for the CI gate (callgrind instruction count): the 30
//   inversions of a mu x delta grid, 10 iterations.
#include <cmath>
#include <vector>

#include "dpkit/accounting/gdp.h"
#include "benchmark/benchmark.h"

namespace {

using dpkit::accounting::GdpDelta;
using dpkit::accounting::GdpEpsilon;

void BM_GdpEpsilon(benchmark::State& state) {
  const double mu = state.range(0) / 1000.0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(GdpEpsilon(mu, 1e-5));
  }
}
BENCHMARK(BM_GdpEpsilon)->Arg(1)->Arg(100)->Arg(1000)->Arg(5000)->Arg(50000);

void BM_GdpDelta(benchmark::State& state) {
  const double mu = state.range(0) / 1000.0;
  const double epsilon = mu * (mu / 2 + 4);  // deep in the tail: delta ~ 3e-5
  for (auto _ : state) {
    benchmark::DoNotOptimize(GdpDelta(mu, epsilon));
  }
}
BENCHMARK(BM_GdpDelta)->Arg(1)->Arg(1000)->Arg(50000);

void GateGdpEpsilon(benchmark::State& state) {
  const std::vector<double> mus = {1e-4, 0.01, 0.5, 1, 2, 5, 10, 20, 35, 50};
  const std::vector<double> deltas = {1e-15, 1e-5, 1e-2};
  for (auto _ : state) {
    for (double mu : mus) {
      for (double delta : deltas) benchmark::DoNotOptimize(GdpEpsilon(mu, delta));
    }
  }
}
BENCHMARK(GateGdpEpsilon)->Name("gate/gdp_epsilon")->Iterations(10);

}  // namespace

BENCHMARK_MAIN();
