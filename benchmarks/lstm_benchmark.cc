// A DP-SGD step of an LSTM text classifier against the non-private step of the same model
// (issue 18, the recurrent rule). The model is written with plain torch::nn modules:
// Embedding(2000, 64) -> LSTM(64, 128, batch_first) -> Linear(128, 2) on the last final
// state, over token sequences of length T. The private copy is made by
// dpkit::optim::ConvertToPerExample (DpEmbedding, DpLSTM, DpLinear sharing the parameters)
// and stepped by DP-SGD (sigma 1, C 1, secure noise, flat clipping, SGD 0.1); the plain one
// by ordinary autograd of the mean loss and the same SGD.
//   BM_LstmNonPrivateStep / BM_LstmDpStep   one model per benchmark;
//   BM_LstmDpVsNonPrivate   both, one step of each per iteration, alternating which goes
//     first, timed separately: counters plain_ms, dp_ms and their ratio (same run), and the
//     ratio of the process's CPU time (cpu_ratio: robust when other jobs share the cores).
// Arguments: {batch, T, LibTorch threads}.
#include <time.h>

#include <chrono>
#include <functional>
#include <memory>
#include <tuple>
#include <utility>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "dpkit/mechanisms/random.h"
#include "dpkit/optim/torch/cpu_threads.h"
#include "dpkit/optim/torch/dp_optimizer.h"
#include "dpkit/optim/torch/make_private.h"

namespace {

namespace F = torch::nn::functional;
namespace nn = torch::nn;
using LstmOutput = std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>>;

constexpr int64_t kVocabulary = 2000;

// The classifier, its layers reached through the module tree (so MakePrivate redirects them).
struct LstmClassifier : nn::Module {
  nn::Sequential encoder{nullptr}, head{nullptr};
  LstmClassifier() {
    encoder = register_module(
        "encoder", nn::Sequential(nn::Embedding(kVocabulary, 64),
                                  nn::LSTM(nn::LSTMOptions(64, 128).batch_first(true))));
    head = register_module("head", nn::Sequential(nn::Linear(128, 2)));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    torch::Tensor h_n = std::get<0>(std::get<1>(encoder->forward<LstmOutput>(tokens)));
    return head->forward(h_n.select(0, h_n.size(0) - 1));
  }
};

// One model and how to take a step of it.
struct Setup {
  std::shared_ptr<LstmClassifier> model;
  std::unique_ptr<dpkit::optim::DpOptimizer> dp;       // private: DP-SGD
  std::unique_ptr<torch::optim::Optimizer> optimizer;  // non-private: SGD
};

Setup NonPrivate() {
  Setup s{std::make_shared<LstmClassifier>(), nullptr, nullptr};
  s.optimizer = std::make_unique<torch::optim::SGD>(s.model->parameters(), 0.1);
  return s;
}

Setup Private() {
  Setup s{std::make_shared<LstmClassifier>(), nullptr, nullptr};
  if (!dpkit::optim::ConvertToPerExample(*s.model).ok()) return s;
  dpkit::optim::DpOptimizerOptions options;
  options.noise_multiplier = 1.0;
  options.clip_norm = 1.0;
  options.sampling_rate = 0.01;
  options.expected_batch_size = 64;
  auto dp = dpkit::optim::DpOptimizer::Create(
      *s.model, *dpkit::optim::MakeTorchOptimizer("sgd", s.model->parameters(), 0.1), options,
      *dpkit::mechanisms::SecureRandomGenerator::Create());
  if (dp.ok()) s.dp = *std::move(dp);
  return s;
}

bool TakeStep(Setup& s, const torch::Tensor& x, const torch::Tensor& y) {
  if (s.dp == nullptr) {
    s.optimizer->zero_grad();
    F::cross_entropy(s.model->forward(x), y).backward();
    s.optimizer->step();
    return true;
  }
  F::cross_entropy(s.model->forward(x), y, F::CrossEntropyFuncOptions().reduction(torch::kSum))
      .backward();
  return s.dp->AccumulatePhysicalBatch().ok() && s.dp->Step().ok();
}

bool Ready(const Setup& s) { return s.dp != nullptr || s.optimizer != nullptr; }

std::pair<torch::Tensor, torch::Tensor> Batch(const benchmark::State& state) {
  return {torch::randint(0, kVocabulary, {state.range(0), state.range(1)}, torch::kLong),
          torch::randint(0, 2, {state.range(0)}, torch::kLong)};
}

void RunSteps(benchmark::State& state, Setup s) {
  if (!Ready(s)) return state.SkipWithError("setup failed");
  auto [x, y] = Batch(state);
  for (auto _ : state) {
    if (!TakeStep(s, x, y)) return state.SkipWithError("step failed");
  }
}

void BM_LstmNonPrivateStep(benchmark::State& state) {
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(2)));
  torch::manual_seed(0);
  RunSteps(state, NonPrivate());
}

void BM_LstmDpStep(benchmark::State& state) {
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(2)));
  torch::manual_seed(0);
  RunSteps(state, Private());
}

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void BM_LstmDpVsNonPrivate(benchmark::State& state) {
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(2)));
  torch::manual_seed(0);
  Setup plain = NonPrivate(), dp = Private();
  if (!Ready(plain) || dp.dp == nullptr) return state.SkipWithError("setup failed");
  auto [x, y] = Batch(state);
  using Clock = std::chrono::steady_clock;
  double plain_s = 0, dp_s = 0, plain_cpu = 0, dp_cpu = 0;
  int64_t i = 0;
  for (auto _ : state) {
    for (int k = 0; k < 2; ++k) {
      const bool plain_turn = (i + k) % 2 == 0;  // alternate which model goes first
      Clock::time_point start = Clock::now();
      const double cpu_start = CpuSeconds();
      if (!TakeStep(plain_turn ? plain : dp, x, y)) return state.SkipWithError("step failed");
      (plain_turn ? plain_cpu : dp_cpu) += CpuSeconds() - cpu_start;
      (plain_turn ? plain_s : dp_s) += std::chrono::duration<double>(Clock::now() - start).count();
    }
    ++i;
  }
  state.counters["plain_ms"] = 1e3 * plain_s / static_cast<double>(i);
  state.counters["dp_ms"] = 1e3 * dp_s / static_cast<double>(i);
  state.counters["ratio"] = dp_s / plain_s;
  state.counters["cpu_ratio"] = dp_cpu / plain_cpu;
}

}  // namespace

BENCHMARK(BM_LstmNonPrivateStep)->Args({64, 32, 1})->Args({64, 32, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LstmDpStep)->Args({64, 32, 1})->Args({64, 32, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LstmDpVsNonPrivate)
    ->Args({64, 32, 1})
    ->Args({64, 128, 1})
    ->Args({64, 32, 2})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3);

BENCHMARK_MAIN();
