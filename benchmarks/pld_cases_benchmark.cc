// PLD accountant speed on the cases of issue 16 (dpkit's figures beside dp_accounting's and
// PRV's in its table), the Bu et al. 2020 Table 1 rows (q = 256/60000, delta = 1e-5), and the
// `dpkit epsilon --accountant=pld` output path (the report with the minimum type I + type II
// error interval, which since issue 16 reads delta(0) off the compositions built for epsilon).
//
// BM_PldCase/i: epsilon alone (PldEpsilon, default tolerance) of case i of kCases.
// BM_PldReport/i: ComputeReport(pld only, with min errors) of case i: the command's
// computation without the process start-up.
// gate/pld_case/i and gate/pld_report/i: the same as fixed work (one iteration) for the CI
// gate's callgrind instruction counts (benchmarks/gate/pld_cases.json), for the cases that
// finish in seconds under callgrind.
#include <cmath>
#include <cstdint>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/report.h"
#include "benchmark/benchmark.h"

namespace dpkit::accounting {
namespace {

struct Case {
  double q, sigma;
  int64_t steps;
  double delta;
};

constexpr double kTableQ = 256.0 / 60000;

// 0-5: issue 16's table; 6-10: Table 1 rows 1-5 (15, 60, 45, 62, 68 epochs; row 2 is case 0
// too, kept under its own index so that the Table 1 rows are complete; row 6 is case 1).
constexpr Case kCases[] = {
    {kTableQ, 1.1, 14063, 1e-5},    // 0: Table 1 row 2
    {kTableQ, 0.5, 23438, 1e-5},    // 1: Table 1 row 6
    {1e-3, 1.5, 1000000, 1e-5},     // 2
    {1e-4, 0.8, 100000, 1e-5},      // 3: the small-q corner
    {1e-3, 2.0, 20000, 1e-6},       // 4
    {0.1, 0.6, 1000, 1e-5},         // 5
    {kTableQ, 1.3, 3516, 1e-5},     // 6: Table 1 row 1
    {kTableQ, 1.1, 14063, 1e-5},    // 7: Table 1 row 2
    {kTableQ, 0.7, 10547, 1e-5},    // 8: Table 1 row 3
    {kTableQ, 0.6, 14532, 1e-5},    // 9: Table 1 row 4 (62 epochs)
    {kTableQ, 0.55, 15938, 1e-5},   // 10: Table 1 row 5 (68 epochs)
};
constexpr int kNumCases = sizeof(kCases) / sizeof(kCases[0]);

Event CaseEvent(int64_t i) {
  const Case& c = kCases[i];
  return *DpSgdEvent(c.q, c.sigma, c.steps);
}

ReportOptions PldReportOptions() {
  ReportOptions options;
  options.rdp = options.gdp = false;
  options.pld = true;
  options.min_errors = true;
  return options;
}

// The certified interval as counters (benchmarks/pld_peer_table.py prints them beside the
// peers' figures): eps_upper, eps_lower and the gap in percent of the upper bound.
void SetBoundCounters(double upper, double lower, benchmark::State* state) {
  state->counters["eps_upper"] = upper;
  state->counters["eps_lower"] = lower;
  state->counters["gap_pct"] = upper > 0 ? 100 * (upper - lower) / upper : 0;
}

void BM_PldCase(benchmark::State& state) {
  const Event event = CaseEvent(state.range(0));
  double upper = 0, lower = 0;
  for (auto _ : state) {
    auto bounds = PldEpsilon(event, kCases[state.range(0)].delta);
    benchmark::DoNotOptimize(bounds);
    if (bounds.ok()) {
      upper = bounds->epsilon_upper;
      lower = bounds->epsilon_lower;
    }
  }
  SetBoundCounters(upper, lower, &state);
}
BENCHMARK(BM_PldCase)->DenseRange(0, kNumCases - 1)->Unit(benchmark::kMillisecond);

void BM_PldReport(benchmark::State& state) {
  const Event event = CaseEvent(state.range(0));
  const ReportOptions options = PldReportOptions();
  for (auto _ : state) {
    auto report = ComputeReport(event, ReportQuantity::kEpsilon, kCases[state.range(0)].delta,
                                options);
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(BM_PldReport)->DenseRange(0, kNumCases - 1)->Unit(benchmark::kMillisecond);

void GatePldCase(benchmark::State& state) {
  const Event event = CaseEvent(state.range(0));
  for (auto _ : state) {
    auto bounds = PldEpsilon(event, kCases[state.range(0)].delta);
    benchmark::DoNotOptimize(bounds);
  }
}
// The cases under ~30 ms natively (seconds under callgrind; the gate runs on 2 cores): case
// 3 takes tens of seconds, cases 1, 2 and 8 0.05-0.8 s.
BENCHMARK(GatePldCase)
    ->Name("gate/pld_case")
    ->Args({0})
    ->Args({4})
    ->Args({5})
    ->Args({6})
    ->Iterations(1);

void GatePldReport(benchmark::State& state) {
  const Event event = CaseEvent(state.range(0));
  const ReportOptions options = PldReportOptions();
  for (auto _ : state) {
    auto report = ComputeReport(event, ReportQuantity::kEpsilon, kCases[state.range(0)].delta,
                                options);
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(GatePldReport)->Name("gate/pld_report")->Args({0})->Iterations(1);

}  // namespace
}  // namespace dpkit::accounting

BENCHMARK_MAIN();
