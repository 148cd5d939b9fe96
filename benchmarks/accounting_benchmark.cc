// Google Benchmarks of the RDP accountant (see benchmarks/README.md).
//
// BM_RdpEpsilon/T: ε(δ = 1e-5) of DP-SGD (q = 256/60000, σ = 1.1, T steps) with the
// default order grid and the improved conversion: the RDP curve of one step at every
// order, times T, minimised. The cost does not grow with T (self-composition scales the
// curve), which the T = 1e4 / 1e6 pair shows.
// gate/...: the same work with a fixed iteration count, for the callgrind gate
// (benchmarks/gate/accounting.json).
// gate/rdp_optimal_min_error: what `dpkit epsilon --accountant=rdp` and the calculator's
// first result compute at that setting (T = 14063): ε by the optimal conversion (Asoodeh
// et al. 2021) and the certified RDP tradeoff curve for the minimum type I + II error.
#include <cstdint>
#include <vector>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/fdp.h"
#include "dpkit/accounting/rdp.h"
#include "benchmark/benchmark.h"

namespace dpkit::accounting {
namespace {

constexpr double kSamplingRate = 256.0 / 60000.0;
constexpr double kNoiseMultiplier = 1.1;

double DpSgdEpsilon(int64_t steps, const std::vector<double>& orders) {
  const Event event = DpSgdEvent(kSamplingRate, kNoiseMultiplier, steps).value();
  const std::vector<double> rdp = ComputeRdp(event, orders).value();
  return RdpToEpsilon(orders, rdp, 1e-5, RdpConversion::kImproved).value().epsilon;
}

void BM_RdpEpsilon(benchmark::State& state) {
  const std::vector<double> orders = DefaultRdpOrders();
  for (auto _ : state) benchmark::DoNotOptimize(DpSgdEpsilon(state.range(0), orders));
  state.counters["orders"] = static_cast<double>(orders.size());
}
BENCHMARK(BM_RdpEpsilon)->Arg(10000)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_RdpEpsilonTfPrivacyOrders(benchmark::State& state) {
  const std::vector<double> orders = TfPrivacyOrders();
  for (auto _ : state) benchmark::DoNotOptimize(DpSgdEpsilon(state.range(0), orders));
}
BENCHMARK(BM_RdpEpsilonTfPrivacyOrders)->Arg(10000)->Arg(1000000)->Unit(benchmark::kMillisecond);

// One order of the Poisson-subsampled Gaussian; the argument is 100·α.
void BM_RdpSubsampledGaussianOrder(benchmark::State& state) {
  const double order = static_cast<double>(state.range(0)) / 100;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        RdpPoissonSubsampledGaussian(kSamplingRate, kNoiseMultiplier, order).value());
  }
}
BENCHMARK(BM_RdpSubsampledGaussianOrder)
    ->Arg(101)       // fractional, near 1: the longest series
    ->Arg(150)       // fractional
    ->Arg(550)       // fractional
    ->Arg(3200)      // integer: 32 terms
    ->Arg(2000000);  // integer: 20000 terms

// Fixed work for the instruction-count gate.
void BM_GateRdpEpsilon(benchmark::State& state) {
  const std::vector<double> orders = DefaultRdpOrders();
  for (auto _ : state) benchmark::DoNotOptimize(DpSgdEpsilon(state.range(0), orders));
}
BENCHMARK(BM_GateRdpEpsilon)->Name("gate/rdp_epsilon")->Arg(10000)->Arg(1000000)->Iterations(3);

void BM_GateRdpOptimalMinError(benchmark::State& state) {
  const std::vector<double> orders = DefaultRdpOrders();
  const Event event = DpSgdEvent(kSamplingRate, kNoiseMultiplier, 14063).value();
  for (auto _ : state) {
    const std::vector<double> rdp = ComputeRdp(event, orders).value();
    benchmark::DoNotOptimize(RdpToEpsilonOptimal(orders, rdp, 1e-5).value().epsilon);
    benchmark::DoNotOptimize(MinimumErrorSum(RdpTradeoffCurve(orders, rdp).value()));
  }
}
BENCHMARK(BM_GateRdpOptimalMinError)->Name("gate/rdp_optimal_min_error")->Iterations(1);

}  // namespace
}  // namespace dpkit::accounting
