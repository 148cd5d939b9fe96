// DP-SGD steps of two text classifiers written with plain torch::nn modules and made private
// by dpkit::optim::ConvertToPerExample (MakePrivate's conversion), against the non-private
// step of the same model (issue 18: Conv1d and MultiheadAttention replaced by DpConv1d and
// DpTorchMultiheadAttention, sharing the parameters):
//   model 0, Conv1d CNN: Embedding(2000, 64) -> Conv1d(64, 128, 5, padding 2) -> ReLU ->
//     Conv1d(128, 128, 3, padding 1, groups 4) -> ReLU -> max over time -> Linear(128, 2);
//   model 1, attention: Embedding(2000, 64) -> MultiheadAttention(64, 4 heads) (self) ->
//     mean over time -> Linear(64, 2).
// DP-SGD: sigma 1, C 1, secure noise, flat clipping, SGD 0.1 on the summed loss; the plain
// model: mean loss, SGD 0.1. BM_SequenceDpVsNonPrivate takes one step of each per
// iteration, alternating which goes first, timed separately: counters plain_ms, dp_ms and
// their ratio (same run), and the ratio of the process's CPU time (cpu_ratio).
// Arguments: {model, batch, T, LibTorch threads}.
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

constexpr int64_t kVocabulary = 2000;

// The two classifiers; their layers are reached through the module tree (Sequential
// members), so the conversion redirects them.
struct Classifier : nn::Module {
  nn::Sequential embed{nullptr}, body{nullptr}, head{nullptr};
  bool attention;
  explicit Classifier(bool attention_model) : attention(attention_model) {
    embed = register_module("embed", nn::Sequential(nn::Embedding(kVocabulary, 64)));
    if (attention) {
      body = register_module("body", nn::Sequential(nn::MultiheadAttention(64, 4)));
      head = register_module("head", nn::Sequential(nn::Linear(64, 2)));
    } else {
      body = register_module(
          "body", nn::Sequential(nn::Conv1d(nn::Conv1dOptions(64, 128, 5).padding(2)), nn::ReLU(),
                                 nn::Conv1d(nn::Conv1dOptions(128, 128, 3).padding(1).groups(4)),
                                 nn::ReLU()));
      head = register_module("head", nn::Sequential(nn::Linear(128, 2)));
    }
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    torch::Tensor h = embed->forward(tokens);  // (B, T, 64)
    if (attention) {
      torch::Tensor x = h.transpose(0, 1);  // (T, B, 64)
      auto out = body->forward<std::tuple<torch::Tensor, torch::Tensor>>(x, x, x);
      return head->forward(std::get<0>(out).mean(0));
    }
    return head->forward(std::get<0>(body->forward(h.transpose(1, 2)).max(2)));
  }
};

struct Setup {
  std::shared_ptr<Classifier> model;
  std::unique_ptr<dpkit::optim::DpOptimizer> dp;       // private: DP-SGD
  std::unique_ptr<torch::optim::Optimizer> optimizer;  // non-private: SGD
};

Setup NonPrivate(bool attention) {
  Setup s{std::make_shared<Classifier>(attention), nullptr, nullptr};
  s.optimizer = std::make_unique<torch::optim::SGD>(s.model->parameters(), 0.1);
  return s;
}

Setup Private(bool attention, int64_t batch) {
  Setup s{std::make_shared<Classifier>(attention), nullptr, nullptr};
  if (!dpkit::optim::ConvertToPerExample(*s.model).ok()) return s;
  dpkit::optim::DpOptimizerOptions options;
  options.noise_multiplier = 1.0;
  options.clip_norm = 1.0;
  options.sampling_rate = 0.01;
  options.expected_batch_size = static_cast<double>(batch);
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

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void BM_SequenceDpVsNonPrivate(benchmark::State& state) {
  const bool attention = state.range(0) == 1;
  const int64_t batch = state.range(1), steps = state.range(2);
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(3)));
  torch::manual_seed(0);
  Setup plain = NonPrivate(attention), dp = Private(attention, batch);
  if (dp.dp == nullptr) return state.SkipWithError("setup failed");
  torch::Tensor x = torch::randint(0, kVocabulary, {batch, steps}, torch::kLong);
  torch::Tensor y = torch::randint(0, 2, {batch}, torch::kLong);
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

BENCHMARK(BM_SequenceDpVsNonPrivate)
    ->ArgNames({"model", "batch", "T", "threads"})
    ->Args({0, 64, 128, 1})
    ->Args({1, 64, 128, 1})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3);

BENCHMARK_MAIN();
