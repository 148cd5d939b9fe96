// MakePrivate against the hand-written per-example model (issue 18's goal: the same speed,
// ratio within 5 %). Both are the MNIST CNN of Bu et al. 2020, Sec. 4.1
// (models/mnist_models.h): `dpkit::models::MnistCnn`, written with DpConv2d / DpLinear, and
// the same architecture as a plain torch::nn::Sequential made private by
// dpkit::optim::ConvertToPerExample. One DP-SGD step each (batch 256, Bu et al.'s Table 1
// row 1: sigma 1.3, C 1.5, q = 256 / 60000, secure noise, flat clipping, SGD 0.25):
//   BM_HandWrittenDpStep / BM_MakePrivateDpStep   one model per benchmark;
//   BM_MakePrivateVsHandWritten  both models, one step of each per iteration, alternating
//     which goes first, timed separately: counters hand_ms, make_private_ms and their ratio
//     (same-run, so the machine's load changes both alike), and the same for the process's
//     CPU time (cpu_ratio: robust when other jobs share the cores).
// Arguments: {batch, LibTorch threads}.
#include <time.h>

#include <chrono>
#include <memory>
#include <utility>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "dpkit/mechanisms/random.h"
#include "dpkit/models/mnist_models.h"
#include "dpkit/optim/torch/cpu_threads.h"
#include "dpkit/optim/torch/dp_optimizer.h"
#include "dpkit/optim/torch/make_private.h"

namespace {

namespace F = torch::nn::functional;
namespace nn = torch::nn;

// The MNIST CNN from plain torch::nn layers (models/mnist_models.cc's PlainMnistCnn as a
// Sequential, whose forward calls its layers through the module tree).
nn::Sequential PlainSequentialMnistCnn() {
  auto pool = [] { return nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(1)); };
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 8).stride(2).padding(3)), nn::ReLU(),
                        pool(), nn::Conv2d(nn::Conv2dOptions(16, 32, 4).stride(2)), nn::ReLU(),
                        pool(), nn::Flatten(), nn::Linear(32 * 4 * 4, 32), nn::ReLU(),
                        nn::Linear(32, 10));
}

std::unique_ptr<dpkit::optim::DpOptimizer> MakeDpSgd(torch::nn::Module& model) {
  dpkit::optim::DpOptimizerOptions options;
  options.noise_multiplier = 1.3;
  options.clip_norm = 1.5;
  options.sampling_rate = 256.0 / 60000;
  options.expected_batch_size = 256;
  auto dp = dpkit::optim::DpOptimizer::Create(
      model, *dpkit::optim::MakeTorchOptimizer("sgd", model.parameters(), 0.25), options,
      *dpkit::mechanisms::SecureRandomGenerator::Create());
  return dp.ok() ? *std::move(dp) : nullptr;
}

// A model with its DP-SGD optimizer and one batch of MNIST-sized inputs.
struct Setup {
  std::shared_ptr<nn::Module> model;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::unique_ptr<dpkit::optim::DpOptimizer> dp;
};

Setup HandWritten() {
  dpkit::models::MnistCnn model;
  Setup s{model.ptr(), [model](const torch::Tensor& x) mutable { return model->forward(x); },
          nullptr};
  s.dp = MakeDpSgd(*s.model);
  return s;
}

Setup MadePrivate() {
  nn::Sequential model = PlainSequentialMnistCnn();
  if (!dpkit::optim::ConvertToPerExample(*model).ok()) return {};
  Setup s{model.ptr(), [model](const torch::Tensor& x) mutable { return model->forward(x); },
          nullptr};
  s.dp = MakeDpSgd(*s.model);
  return s;
}

bool DpStep(Setup& s, const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor loss =
      F::cross_entropy(s.forward(x), y, F::CrossEntropyFuncOptions().reduction(torch::kSum));
  loss.backward();
  return s.dp->AccumulatePhysicalBatch().ok() && s.dp->Step().ok();
}

void RunSteps(benchmark::State& state, Setup s) {
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(1)));
  if (s.dp == nullptr) return state.SkipWithError("setup failed");
  torch::Tensor x = torch::rand({state.range(0), 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {state.range(0)}, torch::kLong);
  for (auto _ : state) {
    if (!DpStep(s, x, y)) return state.SkipWithError("DP step failed");
  }
}

void BM_HandWrittenDpStep(benchmark::State& state) {
  torch::manual_seed(0);
  RunSteps(state, HandWritten());
}

void BM_MakePrivateDpStep(benchmark::State& state) {
  torch::manual_seed(0);
  RunSteps(state, MadePrivate());
}

void BM_MakePrivateVsHandWritten(benchmark::State& state) {
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(1)));
  torch::manual_seed(0);
  Setup hand = HandWritten(), made = MadePrivate();
  if (hand.dp == nullptr || made.dp == nullptr) return state.SkipWithError("setup failed");
  torch::Tensor x = torch::rand({state.range(0), 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {state.range(0)}, torch::kLong);
  using Clock = std::chrono::steady_clock;
  auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  double hand_s = 0, made_s = 0, hand_cpu = 0, made_cpu = 0;
  int64_t i = 0;
  for (auto _ : state) {
    for (int k = 0; k < 2; ++k) {
      bool hand_turn = (i + k) % 2 == 0;  // alternate which model goes first
      Clock::time_point start = Clock::now();
      double cpu_start = cpu_seconds();
      if (!DpStep(hand_turn ? hand : made, x, y)) return state.SkipWithError("DP step failed");
      (hand_turn ? hand_cpu : made_cpu) += cpu_seconds() - cpu_start;
      (hand_turn ? hand_s : made_s) += std::chrono::duration<double>(Clock::now() - start).count();
    }
    ++i;
  }
  state.counters["hand_ms"] = 1e3 * hand_s / static_cast<double>(i);
  state.counters["make_private_ms"] = 1e3 * made_s / static_cast<double>(i);
  state.counters["ratio"] = made_s / hand_s;
  state.counters["cpu_ratio"] = made_cpu / hand_cpu;
}

}  // namespace

BENCHMARK(BM_HandWrittenDpStep)->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MakePrivateDpStep)->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MakePrivateVsHandWritten)
    ->Args({256, 1})
    ->Args({256, 2})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(5);

BENCHMARK_MAIN();
