// DP training speed: one DP-SGD step against one non-private SGD step of the MNIST CNN
// (Bu et al. 2020) at batch 256, measured in the same run (the gate tracks their ratio).
//   BM_NonPrivateStep  ordinary torch::nn layers, mean loss, torch::optim::SGD
//   BM_DpSgdStep       per-example layers, per-example clipping (flat, C = 1.5), secure
//                      Gaussian noise (sigma = 1.3), division by the expected batch size
// Arguments: batch size, LibTorch threads. The gate compares the 1-thread pair (robust on
// a busy CI machine); the 2-thread pair is the setting. On a machine shared with
// other work, run with OMP_WAIT_POLICY=PASSIVE: spinning OpenMP threads that compete for
// cores slow LibTorch down several-fold (measured: 42 -> 277 ms per non-private step).
// The counter peak_rss_mb is the process's peak resident memory: run one benchmark per
// process (--benchmark_filter) to compare peak memory of the two modes.
#include <sys/resource.h>

#include <memory>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "mechanisms/random.h"
#include "models/mnist_models.h"
#include "optim/torch/dp_optimizer.h"

namespace {

namespace F = torch::nn::functional;

void SetThreads(const benchmark::State& state) {
  torch::set_num_threads(static_cast<int>(state.range(1)));
}

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

void BM_NonPrivateStep(benchmark::State& state) {
  SetThreads(state);
  torch::manual_seed(0);
  const int64_t batch = state.range(0);
  dpkit::models::PlainMnistCnn model;
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.25));
  torch::Tensor x = torch::rand({batch, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {batch}, torch::kLong);
  for (auto _ : state) {
    sgd.zero_grad();
    torch::Tensor loss = F::cross_entropy(model->forward(x), y);
    loss.backward();
    sgd.step();
    benchmark::DoNotOptimize(loss.data_ptr());
  }
  state.counters["peak_rss_mb"] = PeakRssMb();
}

void BM_DpSgdStep(benchmark::State& state) {
  SetThreads(state);
  torch::manual_seed(0);
  const int64_t batch = state.range(0);
  dpkit::models::MnistCnn model;
  auto noise = dpkit::mechanisms::SecureRandomGenerator::Create();
  if (!noise.ok()) {
    state.SkipWithError("no secure generator");
    return;
  }
  dpkit::optim::DpOptimizerOptions options;
  options.noise_multiplier = 1.3;
  options.clip_norm = 1.5;
  options.sampling_rate = 256.0 / 60000;
  options.expected_batch_size = 256;
  auto sgd = dpkit::optim::MakeTorchOptimizer("sgd", model->parameters(), 0.25);
  auto dp = dpkit::optim::DpOptimizer::Create(*model, *std::move(sgd), options, *std::move(noise));
  if (!dp.ok()) {
    state.SkipWithError("DpOptimizer::Create failed");
    return;
  }
  torch::Tensor x = torch::rand({batch, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {batch}, torch::kLong);
  for (auto _ : state) {
    torch::Tensor loss = F::cross_entropy(model->forward(x), y,
                                          F::CrossEntropyFuncOptions().reduction(torch::kSum));
    loss.backward();
    if (!(*dp)->AccumulatePhysicalBatch().ok() || !(*dp)->Step().ok()) {
      state.SkipWithError("DP step failed");
      return;
    }
    benchmark::DoNotOptimize(loss.data_ptr());
  }
  state.counters["peak_rss_mb"] = PeakRssMb();
}

BENCHMARK(BM_NonPrivateStep)->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK(BM_DpSgdStep)->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
