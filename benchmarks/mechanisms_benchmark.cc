// Speed of secure noise against the standard library's generator, and of private
// selection over 10^6 candidates. The std::mt19937_64 baselines live only here:
// they are never used for privacy noise.
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "dpkit/mechanisms/discrete.h"
#include "dpkit/mechanisms/gaussian.h"
#include "dpkit/mechanisms/laplace.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/mechanisms/selection.h"
#include "dpkit/mechanisms/sparse_vector.h"

namespace dpkit::mechanisms {
namespace {

constexpr size_t kBatch = 1 << 16;  // samples per iteration

std::unique_ptr<SecureRandomGenerator> Secure() {
  auto rng = SecureRandomGenerator::Create();
  if (!rng.ok()) std::abort();
  return *std::move(rng);
}

void BM_SecureUint64(benchmark::State& state) {
  auto rng = Secure();
  std::vector<uint64_t> out(kBatch);
  for (auto _ : state) {
    rng->Fill(out.data(), out.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_SecureUint64);

void BM_SecureGaussian(benchmark::State& state) {
  auto rng = Secure();
  std::vector<double> out(kBatch);
  for (auto _ : state) {
    FillGaussian(*rng, 1.0, out.data(), out.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_SecureGaussian);

void BM_SecureGaussianFloat(benchmark::State& state) {
  auto rng = Secure();
  std::vector<float> out(kBatch);
  for (auto _ : state) {
    FillGaussian(*rng, 1.0, out.data(), out.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_SecureGaussianFloat);

void BM_StdNormalMt19937(benchmark::State& state) {
  std::mt19937_64 engine(12345);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> out(kBatch);
  for (auto _ : state) {
    for (double& v : out) v = normal(engine);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_StdNormalMt19937);

void BM_SecureLaplace(benchmark::State& state) {
  auto rng = Secure();
  std::vector<double> out(kBatch);
  for (auto _ : state) {
    FillLaplace(*rng, 1.0, out.data(), out.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_SecureLaplace);

// Laplace from the standard library: Exp(1) with a random sign.
void BM_StdLaplaceMt19937(benchmark::State& state) {
  std::mt19937_64 engine(12345);
  std::exponential_distribution<double> exponential(1.0);
  std::vector<double> out(kBatch);
  for (auto _ : state) {
    for (double& v : out) v = (engine() & 1) ? -exponential(engine) : exponential(engine);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_StdLaplaceMt19937);

void BM_DiscreteGaussian(benchmark::State& state) {
  auto rng = Secure();
  auto sampler = DiscreteGaussianSampler::Create(static_cast<double>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(sampler->Sample(*rng));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DiscreteGaussian)->Arg(1)->Arg(100)->Arg(10000);

std::vector<double> Scores(size_t n) {
  SeededRandomGeneratorForTesting rng(1);
  std::vector<double> scores(n);
  for (double& s : scores) s = 10.0 * rng.UniformDouble();
  return scores;
}

void BM_ExponentialMechanism(benchmark::State& state) {
  const std::vector<double> scores = Scores(state.range(0));
  auto rng = Secure();
  auto selection = PrivateSelection::Create(1.0, 1.0, SelectionSampler::kExponentialGumbel);
  for (auto _ : state) benchmark::DoNotOptimize(*selection->Select(absl::MakeConstSpan(scores), *rng));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ExponentialMechanism)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_PermuteAndFlip(benchmark::State& state) {
  const std::vector<double> scores = Scores(state.range(0));
  auto rng = Secure();
  auto selection = PrivateSelection::Create(1.0, 1.0, SelectionSampler::kPermuteAndFlip);
  for (auto _ : state) benchmark::DoNotOptimize(*selection->Select(absl::MakeConstSpan(scores), *rng));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_PermuteAndFlip)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_TopKOneShot(benchmark::State& state) {
  const std::vector<double> scores = Scores(1000000);
  auto rng = Secure();
  auto topk = TopKSelection::Create(1.0, state.range(0), 1.0, TopKMethod::kOneShotGumbel);
  for (auto _ : state) benchmark::DoNotOptimize(topk->Select(absl::MakeConstSpan(scores), *rng));
  state.SetItemsProcessed(state.iterations() * 1000000);
}
BENCHMARK(BM_TopKOneShot)->Arg(10)->Arg(1000)->Unit(benchmark::kMillisecond);

void BM_SparseVector(benchmark::State& state) {
  const std::vector<double> scores = Scores(1000000);
  auto rng = Secure();
  // Threshold above every score: the whole stream is examined.
  auto svt = SparseVector::Create(1.0, 1000.0, 10, 1.0, false);
  for (auto _ : state) benchmark::DoNotOptimize(svt->Run(absl::MakeConstSpan(scores), *rng));
  state.SetItemsProcessed(state.iterations() * 1000000);
}
BENCHMARK(BM_SparseVector)->Unit(benchmark::kMillisecond);

// Fixed work for the callgrind instruction-count gate (seeded generator, so the
// count is reproducible): the exponential mechanism over 10^5 candidates, 3 times.
void BM_GateExponentialMechanism(benchmark::State& state) {
  const std::vector<double> scores = Scores(100000);
  SeededRandomGeneratorForTesting rng(7);
  auto selection = PrivateSelection::Create(1.0, 1.0, SelectionSampler::kExponentialGumbel);
  for (auto _ : state) benchmark::DoNotOptimize(*selection->Select(absl::MakeConstSpan(scores), rng));
}
BENCHMARK(BM_GateExponentialMechanism)->Name("gate/exponential_mechanism/100000")->Iterations(3);

// Fixed work: 10^5 secure-path Gaussian samples from the seeded generator.
void BM_GateFillGaussian(benchmark::State& state) {
  SeededRandomGeneratorForTesting rng(8);
  std::vector<double> out(100000);
  for (auto _ : state) {
    FillGaussian(rng, 1.0, out.data(), out.size());
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_GateFillGaussian)->Name("gate/fill_gaussian/100000")->Iterations(3);

}  // namespace
}  // namespace dpkit::mechanisms

BENCHMARK_MAIN();
