// A DP-SGD step of a transformer encoder classifier against the non-private step of the
// same model (issue 18's goal on the CPU: <= 1.3x). Encoder: token embedding (vocabulary
// 1000) + learned positions, 2 post-norm blocks of d 128 with 4 heads (DpMultiheadAttention)
// and a feed-forward of 512 (ReLU), mean over positions, Linear head to 2 classes; sequences
// of 128 tokens, batch 64. Both steps use the same parameter tensors: the DP step runs the
// per-example layers (optim/torch/per_example_layers.h; each Linear chooses ghost norms or
// materialised gradients by cost, Li et al. 2021 Sec. 4), flat clipping (C 1), secure noise
// (sigma 1), SGD; the non-private step runs plain LibTorch ops (F::linear, F::embedding,
// torch::layer_norm) on those tensors, mean loss, SGD.
// BM_TransformerDpVsNonPrivate alternates one step of each per iteration and reports
// nonprivate_ms, dp_ms, ratio (wall clock) and cpu_ratio (process CPU time), and the peak
// live CPU tensor bytes of each step (benchmarks/tensor_memory.h, a counting allocator
// installed before the model is built): nonprivate_peak_mb and dp_peak_mb (everything
// live: parameters, data, activations, gradients, per-example buffers), memory_ratio
// (their ratio: Opacus' measure, issue 18's goal <= 1.3), and step_memory_ratio (the ratio
// of the peaks above what was live when each step began).
// Arguments: {batch, LibTorch threads}.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "dpkit/benchmarks/tensor_memory.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/optim/torch/cpu_threads.h"
#include "dpkit/optim/torch/dp_optimizer.h"
#include "dpkit/optim/torch/per_example_layers.h"

namespace {

namespace F = torch::nn::functional;
using dpkit::optim::DpEmbedding;
using dpkit::optim::DpLayerNorm;
using dpkit::optim::DpLinear;
using dpkit::optim::DpMultiheadAttention;

constexpr int64_t kVocabulary = 1000, kLength = 128, kDim = 128, kHeads = 4, kHidden = 512;

struct Block : torch::nn::Module {
  DpMultiheadAttention attention{nullptr};
  DpLayerNorm norm1{nullptr}, norm2{nullptr};
  DpLinear ff1{nullptr}, ff2{nullptr};
  Block() {
    attention = register_module("attention", DpMultiheadAttention(kDim, kHeads));
    norm1 = register_module("norm1", DpLayerNorm(std::vector<int64_t>{kDim}));
    norm2 = register_module("norm2", DpLayerNorm(std::vector<int64_t>{kDim}));
    ff1 = register_module("ff1", DpLinear(kDim, kHidden));
    ff2 = register_module("ff2", DpLinear(kHidden, kDim));
  }
};

struct Encoder : torch::nn::Module {
  DpEmbedding tokens{nullptr}, positions{nullptr};
  std::vector<std::shared_ptr<Block>> blocks;
  DpLinear head{nullptr};
  Encoder() {
    tokens = register_module("tokens", DpEmbedding(kVocabulary, kDim));
    positions = register_module("positions", DpEmbedding(kLength, kDim));
    for (int i = 0; i < 2; ++i) {
      blocks.push_back(register_module("block" + std::to_string(i), std::make_shared<Block>()));
    }
    head = register_module("head", DpLinear(kDim, 2));
  }
  // Logits through the per-example layers (plain false) or plain ops on the same tensors.
  torch::Tensor Run(const torch::Tensor& x, bool plain) {
    auto linear = [&](DpLinear& l, const torch::Tensor& h) {
      return plain ? F::linear(h, l->weight, l->bias) : l(h);
    };
    auto norm = [&](DpLayerNorm& n, const torch::Tensor& h) {
      return plain ? torch::layer_norm(h, {kDim}, n->weight, n->bias) : n(h);
    };
    torch::Tensor where = torch::arange(kLength, torch::kLong).expand({x.size(0), kLength});
    torch::Tensor h = plain ? F::embedding(x, tokens->weight) +
                                  F::embedding(where, positions->weight)
                            : tokens(x) + positions(where);
    for (auto& b : blocks) {
      torch::Tensor attended;
      if (plain) {
        std::vector<torch::Tensor> qkv = linear(b->attention->in_proj, h).chunk(3, -1);
        attended = linear(b->attention->out_proj, dpkit::optim::MultiHeadAttention(
                                                      qkv[0], qkv[1], qkv[2], kHeads, {}, false));
      } else {
        attended = b->attention(h);
      }
      h = norm(b->norm1, h + attended);
      h = norm(b->norm2, h + linear(b->ff2, torch::relu(linear(b->ff1, h))));
    }
    return linear(head, h.mean(1));
  }
};

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void BM_TransformerDpVsNonPrivate(benchmark::State& state) {
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(1)));
  dpkit::benchmarks::CpuTensorMemory& memory = dpkit::benchmarks::CpuTensorMemory::Install();
  torch::manual_seed(0);
  const int64_t batch = state.range(0);
  Encoder model;
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.1));
  dpkit::optim::DpOptimizerOptions options;
  options.noise_multiplier = 1.0;
  options.clip_norm = 1.0;
  options.sampling_rate = 0.01;
  options.expected_batch_size = static_cast<double>(batch);
  auto dp = dpkit::optim::DpOptimizer::Create(
      model, *dpkit::optim::MakeTorchOptimizer("sgd", model.parameters(), 0.1), options,
      *dpkit::mechanisms::SecureRandomGenerator::Create());
  if (!dp.ok()) return state.SkipWithError("DpOptimizer::Create failed");
  torch::Tensor x = torch::randint(0, kVocabulary, {batch, kLength}, torch::kLong);
  torch::Tensor y = torch::randint(0, 2, {batch}, torch::kLong);
  using Clock = std::chrono::steady_clock;
  double wall[2] = {0, 0}, cpu[2] = {0, 0};  // [0] non-private, [1] DP
  int64_t peak[2] = {0, 0}, step_peak[2] = {0, 0};  // bytes: all live, above the start
  int64_t i = 0;
  for (auto _ : state) {
    for (int k = 0; k < 2; ++k) {
      const int mode = static_cast<int>((i + k) % 2);  // alternate which goes first
      memory.ResetPeak();
      const int64_t live_at_start = memory.live_bytes();
      Clock::time_point start = Clock::now();
      double cpu_start = CpuSeconds();
      if (mode == 0) {
        sgd.zero_grad();
        F::cross_entropy(model.Run(x, true), y).backward();
        sgd.step();
      } else {
        F::cross_entropy(model.Run(x, false), y,
                         F::CrossEntropyFuncOptions().reduction(torch::kSum))
            .backward();
        if (!(*dp)->AccumulatePhysicalBatch().ok() || !(*dp)->Step().ok()) {
          return state.SkipWithError("DP step failed");
        }
      }
      cpu[mode] += CpuSeconds() - cpu_start;
      wall[mode] += std::chrono::duration<double>(Clock::now() - start).count();
      peak[mode] = std::max(peak[mode], memory.peak_bytes());
      step_peak[mode] = std::max(step_peak[mode], memory.peak_bytes() - live_at_start);
    }
    ++i;
  }
  state.counters["nonprivate_ms"] = 1e3 * wall[0] / static_cast<double>(i);
  state.counters["dp_ms"] = 1e3 * wall[1] / static_cast<double>(i);
  state.counters["ratio"] = wall[1] / wall[0];
  state.counters["cpu_ratio"] = cpu[1] / cpu[0];
  state.counters["nonprivate_peak_mb"] = static_cast<double>(peak[0]) / 1e6;
  state.counters["dp_peak_mb"] = static_cast<double>(peak[1]) / 1e6;
  state.counters["memory_ratio"] = static_cast<double>(peak[1]) / static_cast<double>(peak[0]);
  state.counters["step_memory_ratio"] =
      static_cast<double>(step_peak[1]) / static_cast<double>(step_peak[0]);
}

}  // namespace

BENCHMARK(BM_TransformerDpVsNonPrivate)
    ->Args({64, 1})
    ->Args({64, 2})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);

BENCHMARK_MAIN();
