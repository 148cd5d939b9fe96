// Benchmarks of //accounting:calibrate on the MNIST setting of Bu et al. 2020, Table 1
// (q = 256/60000, delta = 1e-5).
//
// BM_CalibrateNoise/<accountant>: the smallest noise multiplier for epsilon = 2 at 60
//   epochs (T = 14063), within 0.1 %.
// BM_LargestSteps/<accountant>: the largest T for epsilon = 2 at sigma = 1.1.
// BM_LargestSamplingRate/<accountant>: the largest q for epsilon = 2 at sigma = 1.1,
//   T = 14063, within 0.1 %.
// BM_OneEpsilon/<accountant>: one evaluation of DpSgdEpsilon at the Table 1 row
//   (sigma = 1.1, T = 14063), the unit of work every search repeats: the ratio
//   BM_CalibrateNoise / BM_OneEpsilon is the number of evaluations a calibration costs.
// gate/...: fixed work for the CI gate (benchmarks/gate/calibrate.json).
// The PLD searches (accounting/calibrate_search.h) cost about two coarse and two to three
// full PLD evaluations: BM_CalibrateNoise/0 / BM_OneEpsilon/0 is about 2.5 (11-17 before).
// Accountant arguments: 0 = pld, 1 = rdp, 2 = gdp.
#include <cstdint>

#include "dpkit/accounting/calibrate.h"
#include "benchmark/benchmark.h"

namespace dpkit::accounting {
namespace {

constexpr double kSamplingRate = 256.0 / 60000.0;
constexpr double kDelta = 1e-5;
constexpr double kTarget = 2.0;
constexpr double kNoise = 1.1;
constexpr int64_t kSteps = 14063;  // ceil(60 * 60000 / 256)

Accountant AccountantArg(const benchmark::State& state) {
  return state.range(0) == 0 ? Accountant::kPld
                             : (state.range(0) == 1 ? Accountant::kRdp : Accountant::kGdp);
}

void SetLabel(benchmark::State& state) { state.SetLabel(AccountantName(AccountantArg(state))); }

void BM_CalibrateNoise(benchmark::State& state) {
  const Accountant a = AccountantArg(state);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        CalibrateNoiseMultiplier(kTarget, kDelta, kSamplingRate, kSteps, a).value());
  }
  SetLabel(state);
}
BENCHMARK(BM_CalibrateNoise)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

void BM_LargestSteps(benchmark::State& state) {
  const Accountant a = AccountantArg(state);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        LargestSteps(kTarget, kDelta, kSamplingRate, kNoise, 1000000000, a).value());
  }
  SetLabel(state);
}
BENCHMARK(BM_LargestSteps)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

void BM_LargestSamplingRate(benchmark::State& state) {
  const Accountant a = AccountantArg(state);
  for (auto _ : state) {
    benchmark::DoNotOptimize(LargestSamplingRate(kTarget, kDelta, kNoise, kSteps, a).value());
  }
  SetLabel(state);
}
BENCHMARK(BM_LargestSamplingRate)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

void BM_OneEpsilon(benchmark::State& state) {
  const Accountant a = AccountantArg(state);
  for (auto _ : state) {
    benchmark::DoNotOptimize(DpSgdEpsilon(kSamplingRate, kNoise, kSteps, kDelta, a).value());
  }
  SetLabel(state);
}
BENCHMARK(BM_OneEpsilon)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

void BM_CltEquivalentNoise(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        CltEquivalentNoiseMultiplier(kSamplingRate, kNoise, kSteps, kDelta).value());
  }
}
BENCHMARK(BM_CltEquivalentNoise)->Unit(benchmark::kMillisecond);

// Gate: GDP (CLT) calibration of all three unknowns, 10 iterations; instruction count.
void BM_GateCalibrateGdp(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        CalibrateNoiseMultiplier(kTarget, kDelta, kSamplingRate, kSteps, Accountant::kGdp)
            .value());
    benchmark::DoNotOptimize(
        LargestSteps(kTarget, kDelta, kSamplingRate, kNoise, 1000000000, Accountant::kGdp)
            .value());
    benchmark::DoNotOptimize(
        LargestSamplingRate(kTarget, kDelta, kNoise, kSteps, Accountant::kGdp).value());
  }
}
BENCHMARK(BM_GateCalibrateGdp)->Name("gate/calibrate_gdp")->Iterations(10);

// Gate: PLD calibration of all three unknowns at the Table 1 row 2 setting, once;
// instruction count (issue 16: each under 0.15 s natively).
void BM_GateCalibratePld(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        CalibrateNoiseMultiplier(kTarget, kDelta, kSamplingRate, kSteps, Accountant::kPld)
            .value());
    benchmark::DoNotOptimize(
        LargestSteps(kTarget, kDelta, kSamplingRate, kNoise, 1000000000, Accountant::kPld)
            .value());
    benchmark::DoNotOptimize(
        LargestSamplingRate(kTarget, kDelta, kNoise, kSteps, Accountant::kPld).value());
  }
}
BENCHMARK(BM_GateCalibratePld)->Name("gate/calibrate_pld")->Iterations(1);

}  // namespace
}  // namespace dpkit::accounting

BENCHMARK_MAIN();
