// PLD accountant speed: epsilon of DP-SGD at T = 1e4 (Bu et al. Table 1 row sigma 1.1,
// 60 epochs), 1e5 and 1e6 steps, and noise calibration; the same MNIST setting with
// fixed-size batches (replace-one adjacency) and its calibration.
//
// gate/...: fixed work for the CI gate (callgrind instruction count), kept small so that
// callgrind finishes in a few seconds: T = 1e3, and T = 1e4, 1e5, 1e6 (gate/pld_epsilon_steps),
// and the T = 1e6 benchmark row at the default tolerance (gate/pld_epsilon_million).
#include <cstdint>

#include "dpkit/accounting/calibrate.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "benchmark/benchmark.h"

namespace dpkit::accounting {
namespace {

// Arg: steps. q and sigma as in the issue: T = 14063 is the Table 1 row (q = 256/60000,
// sigma = 1.1); 1e5 and 1e6 use q = 0.001, sigma = 1.5.
void BM_PldEpsilon(benchmark::State& state) {
  const int64_t steps = state.range(0);
  const bool table_row = steps == 14063;
  const Event event = *DpSgdEvent(table_row ? 256.0 / 60000 : 0.001,
                                  table_row ? 1.1 : 1.5, steps);
  for (auto _ : state) {
    auto bounds = PldEpsilon(event, 1e-5);
    benchmark::DoNotOptimize(bounds);
  }
}
BENCHMARK(BM_PldEpsilon)->Arg(14063)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_CalibratePld(benchmark::State& state) {
  for (auto _ : state) {
    auto c = CalibrateNoiseMultiplier(2.0, 1e-5, 256.0 / 60000, 14063, Accountant::kPld);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_CalibratePld)->Unit(benchmark::kMillisecond);

void GatePldEpsilon(benchmark::State& state) {
  const Event event = *DpSgdEvent(0.01, 1.0, state.range(0));
  PldOptions options;
  options.epsilon_tolerance = 1e-3;
  for (auto _ : state) {
    auto bounds = PldEpsilon(event, 1e-5, options);
    benchmark::DoNotOptimize(bounds);
  }
}
BENCHMARK(GatePldEpsilon)->Name("gate/pld_epsilon")->Arg(1000)->Iterations(1);

// The BM_PldEpsilon settings (default tolerance 1e-4 at T = 1e4; 1e-3 at 1e5 and 1e-2 at
// 1e6 so that callgrind finishes in a few seconds) as fixed work for the gate.
void GatePldEpsilonSteps(benchmark::State& state) {
  const int64_t steps = state.range(0);
  const bool table_row = steps == 10000;
  const Event event = *DpSgdEvent(table_row ? 256.0 / 60000 : 0.001,
                                  table_row ? 1.1 : 1.5, steps);
  PldOptions options;
  options.epsilon_tolerance = table_row ? 1e-4 : steps < 1000000 ? 1e-3 : 1e-2;
  for (auto _ : state) {
    auto bounds = PldEpsilon(event, 1e-5, options);
    benchmark::DoNotOptimize(bounds);
  }
}
BENCHMARK(GatePldEpsilonSteps)
    ->Name("gate/pld_epsilon_steps")
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Iterations(1);

// The T = 1e6 row of BM_PldEpsilon itself (q = 0.001, sigma = 1.5, delta = 1e-5, default
// tolerance 1e-4): since the two-stage composition it runs in a few seconds under callgrind.
void GatePldEpsilonMillionSteps(benchmark::State& state) {
  const Event event = *DpSgdEvent(0.001, 1.5, 1000000);
  for (auto _ : state) {
    auto bounds = PldEpsilon(event, 1e-5);
    benchmark::DoNotOptimize(bounds);
  }
}
BENCHMARK(GatePldEpsilonMillionSteps)->Name("gate/pld_epsilon_million")->Iterations(1);

void GateCalibrate(benchmark::State& state) {
  for (auto _ : state) {
    auto c = CalibrateNoiseMultiplier(4.0, 1e-5, 0.1, 10, Accountant::kPld);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(GateCalibrate)->Name("gate/calibrate_pld")->Iterations(1);

// Fixed-size batches (sampling without replacement, replace-one adjacency): MNIST's B = 256
// of 60000 with the trainer's sigma = 1.1 (the event's Gaussian(sigma / 2)) for
// ceil(epochs n / B) steps, Arg(0): epochs. Arg(1) = 1: PldEpsilon as the report runs it (the
// C_p(f) upper bound and the explicit pair's lower bound, two PLD computations); 0: the
// upper bound alone (PldOptions::mechanism_lower_bound = false, as calibrations run it).
void BM_PldWithoutReplacement(benchmark::State& state) {
  const int64_t steps = (state.range(0) * 60000 + 255) / 256;
  const Event event = *Event::SelfComposed(
      *Event::SampledWithoutReplacement(60000, 256, *Event::Gaussian(0.55)), steps);
  PldOptions options;
  options.mechanism_lower_bound = state.range(1) == 1;
  for (auto _ : state) {
    auto bounds = PldEpsilon(event, 1e-5, options);
    benchmark::DoNotOptimize(bounds);
  }
}
BENCHMARK(BM_PldWithoutReplacement)
    ->Args({15, 1})
    ->Args({60, 1})
    ->Args({60, 0})
    ->Unit(benchmark::kMillisecond);

// The fixed-size calibration (//accounting:calibrate, CalibrateWithoutReplacementNoiseMultiplier
// by PLD, which starts from the RDP answer): z for epsilon 2 at 15 epochs.
void BM_CalibrateWithoutReplacementPld(benchmark::State& state) {
  for (auto _ : state) {
    auto c = CalibrateWithoutReplacementNoiseMultiplier(2.0, 1e-5, 60000, 256, 3516,
                                                        Accountant::kPld);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_CalibrateWithoutReplacementPld)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dpkit::accounting

BENCHMARK_MAIN();
