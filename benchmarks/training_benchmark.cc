// DP training speed: one DP-SGD step against one non-private SGD step of the MNIST CNN
// (Bu et al. 2020) at batch 256, measured in the same run (the gate tracks their ratio).
//   BM_NonPrivateStep  ordinary torch::nn layers, mean loss, torch::optim::SGD
//   BM_DpSgdStep       per-example layers, per-example clipping (flat, C = 1.5), secure
//                      Gaussian noise (sigma = 1.3), division by the expected batch size
// Arguments: batch size, LibTorch threads (set up like the trainers: ConfigureCpuThreads,
// optim/torch/cpu_threads.h). The gate compares the CPU time of the calling thread of both
// pairs: at 1 thread the whole step; at 2 threads (the setting) the calling thread
// runs every serial part and its share of every parallel one, so its CPU time follows the
// critical path, while on a busy machine the other thread's delayed wake-ups inflate
// wall-clock time (2-thread wall ratios ranged 0.9-2.9 under load here). On a machine
// shared with other work, run with OMP_WAIT_POLICY=PASSIVE: spinning OpenMP threads that
// compete for cores slow LibTorch down several-fold (measured: 42 -> 277 ms per
// non-private step). For wall-clock figures on such a machine, `chrt -f 10` (root) keeps
// other processes off the two cores while it runs.
//   BM_NonPrivateStepPhases / BM_DpSgdStepPhases  per-phase breakdown (see below).
//   BM_NonPrivateEpoch / BM_DpSgdEpoch  one whole epoch each (the measure): 60000
//   MNIST-sized synthetic examples, 235 Poisson batches of expected size 256 drawn by
//   optim::StepRecordSampler with the same seeded test generator for both modes (batch
//   selection only; the DP noise comes from the secure generator), gathered from the data
//   tensor per step. Argument: threads. Not in the gate (several seconds each).
// The counter peak_rss_mb is the process's peak resident memory: run one benchmark per
// process (--benchmark_filter) to compare peak memory of the two modes.
//
// BM_NonPrivateStepMemory / BM_DpSgdStepMemory: the same two steps, 5 iterations, with the
// peak_tensor_mb counter below.
// Ghost-clipping memory on a Linear/Embedding-heavy model (the gate tracks the ratio):
//   BM_NonPrivateEmbeddingStep / BM_DpSgdEmbeddingStep  Embedding(100000, 64) over 32
//   tokens -> Linear(64, 128) at every position -> tanh -> mean over positions ->
//   Linear(128, 2); batch 256; 6.4M of the 6.42M parameters sit in the embedding table.
//   Non-private: torch::nn layers, mean loss, SGD, gradients set to none before each step
//   (the leanest LibTorch baseline: the backward's dense table gradient becomes .grad).
//   DP: DpEmbedding/DpLinear with ghost norms (no per-example gradient is ever built: it
//   would be 256 x 6.4M floats), flat clipping, secure noise, SGD.
// Counter peak_tensor_mb: the peak bytes of live LibTorch CPU tensors during the benchmark
// (model, data, optimizer and all steps), reported by c10's allocator to a
// c10::MemoryReportingInfoBase installed as thread-local debug info — the hook behind the
// PyTorch profiler's profile_memory. Unlike peak RSS it is per benchmark, so both modes can
// be compared in one process, and it excludes the LibTorch libraries themselves.
#include <sys/resource.h>
#include <time.h>

#include <memory>
#include <string>
#include <vector>

#include <algorithm>

#include <benchmark/benchmark.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/torch.h>

#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/models/mnist_models.h"
#include "dpkit/optim/poisson_sampler.h"
#include "dpkit/optim/torch/cpu_threads.h"
#include "dpkit/optim/torch/dp_optimizer.h"

namespace {

namespace F = torch::nn::functional;

// LibTorch threads as the trainers set them up (optim/torch/cpu_threads.h: OpenBLAS's own
// threads off, malloc keeping freed memory), so both modes run in the trainers' setting.
void SetThreads(const benchmark::State& state) {
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(1)));
}

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

// Page faults of the process so far (minor: memory the allocator got from the OS anew).
double MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_minflt);
}

// Peak live tensor bytes while installed (see the file comment). Allocations made while it
// is installed must be freed while it is installed, or c10 stops tracking them.
class PeakTensorMemory : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, int64_t total_allocated,
                         int64_t /*total_reserved*/, c10::Device /*device*/) override {
    if (!started_) {
      baseline_ = total_allocated - alloc_size;  // live bytes before the first event
      started_ = true;
    }
    peak_ = std::max(peak_, total_allocated);
  }
  bool memoryProfilingEnabled() const override { return true; }
  double PeakMb() const { return started_ ? (peak_ - baseline_) / (1024.0 * 1024.0) : 0.0; }

 private:
  bool started_ = false;
  int64_t baseline_ = 0, peak_ = 0;
};

void NonPrivateCnnSteps(benchmark::State& state) {
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
}

// DP-SGD (learning rate 0.25, secure noise, flat clipping) over `model` at expected batch
// 256; null, with the benchmark marked as skipped, if it cannot be created.
std::unique_ptr<dpkit::optim::DpOptimizer> MakeDpSgd(benchmark::State& state,
                                                     torch::nn::Module& model,
                                                     double noise_multiplier, double clip_norm,
                                                     double sampling_rate) {
  auto noise = dpkit::mechanisms::SecureRandomGenerator::Create();
  if (!noise.ok()) {
    state.SkipWithError("no secure generator");
    return nullptr;
  }
  dpkit::optim::DpOptimizerOptions options;
  options.noise_multiplier = noise_multiplier;
  options.clip_norm = clip_norm;
  options.sampling_rate = sampling_rate;
  options.expected_batch_size = 256;
  auto sgd = dpkit::optim::MakeTorchOptimizer("sgd", model.parameters(), 0.25);
  auto dp = dpkit::optim::DpOptimizer::Create(model, *std::move(sgd), options, *std::move(noise));
  if (!dp.ok()) {
    state.SkipWithError("DpOptimizer::Create failed");
    return nullptr;
  }
  return *std::move(dp);
}

// DP-SGD over the MNIST CNN with Bu et al.'s Table 1 row 1 settings (sigma 1.3, C 1.5,
// q = 256/60000), as every MNIST benchmark here uses it.
std::unique_ptr<dpkit::optim::DpOptimizer> MakeMnistDpSgd(benchmark::State& state,
                                                          dpkit::models::MnistCnn& model) {
  return MakeDpSgd(state, *model, 1.3, 1.5, 256.0 / 60000);
}

void DpSgdCnnSteps(benchmark::State& state) {
  SetThreads(state);
  torch::manual_seed(0);
  const int64_t batch = state.range(0);
  dpkit::models::MnistCnn model;
  std::unique_ptr<dpkit::optim::DpOptimizer> dp = MakeMnistDpSgd(state, model);
  if (dp == nullptr) return;
  torch::Tensor x = torch::rand({batch, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {batch}, torch::kLong);
  for (auto _ : state) {
    torch::Tensor loss = F::cross_entropy(model->forward(x), y,
                                          F::CrossEntropyFuncOptions().reduction(torch::kSum));
    loss.backward();
    if (!dp->AccumulatePhysicalBatch().ok() || !dp->Step().ok()) {
      state.SkipWithError("DP step failed");
      return;
    }
    benchmark::DoNotOptimize(loss.data_ptr());
  }
}

// One epoch (see the file comment): synthetic MNIST-sized examples and the Poisson batches'
// index lists, the same for both modes; `ok` is false (and the benchmark marked as failed)
// if the batches cannot be drawn.
constexpr int64_t kEpochExamples = 60000;
struct EpochData {
  torch::Tensor x, y;
  std::vector<std::vector<int64_t>> batches;
  bool ok = false;
};
EpochData MakeEpochData(benchmark::State& state) {
  EpochData data;
  data.x = torch::rand({kEpochExamples, 1, 28, 28});
  data.y = torch::randint(0, 10, {kEpochExamples}, torch::kLong);
  auto sampler = dpkit::optim::StepRecordSampler::Create(kEpochExamples, 256, 1, false);
  if (!sampler.ok()) {
    state.SkipWithError("no Poisson sampler");
    return data;
  }
  dpkit::mechanisms::SeededRandomGeneratorForTesting rng(7);
  for (int64_t step = 0; step < sampler->steps_per_epoch(); ++step) {
    auto batch = sampler->Next(step, rng);
    if (!batch.ok()) {
      state.SkipWithError("no Poisson batch");
      return data;
    }
    data.batches.push_back(batch->examples);
  }
  state.counters["steps"] = static_cast<double>(data.batches.size());
  data.ok = true;
  return data;
}

void BM_NonPrivateEpoch(benchmark::State& state) {
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(0)));
  torch::manual_seed(0);
  dpkit::models::PlainMnistCnn model;
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.25));
  const EpochData data = MakeEpochData(state);
  if (!data.ok) return;
  for (auto _ : state) {
    for (const std::vector<int64_t>& batch : data.batches) {
      if (batch.empty()) continue;
      const torch::Tensor index = torch::tensor(batch, torch::kLong);
      sgd.zero_grad();
      torch::Tensor loss = F::cross_entropy(model->forward(data.x.index_select(0, index)),
                                            data.y.index_select(0, index));
      loss.backward();
      sgd.step();
      benchmark::DoNotOptimize(loss.data_ptr());
    }
  }
}

void BM_DpSgdEpoch(benchmark::State& state) {
  dpkit::optim::ConfigureCpuThreads(static_cast<int>(state.range(0)));
  torch::manual_seed(0);
  dpkit::models::MnistCnn model;
  std::unique_ptr<dpkit::optim::DpOptimizer> dp = MakeMnistDpSgd(state, model);
  if (dp == nullptr) return;
  const EpochData data = MakeEpochData(state);
  if (!data.ok) return;
  for (auto _ : state) {
    for (const std::vector<int64_t>& batch : data.batches) {
      // An empty Poisson batch is still a step: noise only.
      if (!batch.empty()) {
        const torch::Tensor index = torch::tensor(batch, torch::kLong);
        torch::Tensor loss = F::cross_entropy(
            model->forward(data.x.index_select(0, index)), data.y.index_select(0, index),
            F::CrossEntropyFuncOptions().reduction(torch::kSum));
        loss.backward();
        if (!dp->AccumulatePhysicalBatch().ok()) {
          state.SkipWithError("DP accumulate failed");
          return;
        }
      }
      if (!dp->Step().ok()) {
        state.SkipWithError("DP step failed");
        return;
      }
    }
  }
}

// Phase breakdown of the two steps (diagnostics for thread scaling). Per phase, three
// counters in ms per step: wall-clock (`_ms`), CPU time of the calling thread (`_main_ms`:
// on a busy machine the best proxy for the critical path, since the calling thread takes
// part in every parallel region and runs every serial part) and CPU time of the whole
// process (`_all_ms`: the total work, including BLAS or OpenMP threads that spin).
// DP: forward, backward (with per-example captures), per-layer squared norms, per-layer
// clip-factor-weighted sums (into scratch tensors, factors 1), then the optimizer's own
// AccumulatePhysicalBatch (norms + clipping + sums again, as in training) and Step (secure
// noise, averaging, SGD). Non-private: forward, backward, SGD step.
class PhaseTimer {
 public:
  struct Totals {
    double wall = 0, main = 0, all = 0;
  };
  void Start() { last_ = Now(); }
  // Adds the time since Start() or the previous Lap() to `totals`.
  void Lap(Totals* totals) {
    Sample now = Now();
    totals->wall += now.wall - last_.wall;
    totals->main += now.main - last_.main;
    totals->all += now.all - last_.all;
    last_ = now;
  }
  static void Report(benchmark::State& state, const std::string& name, const Totals& t) {
    const double n = static_cast<double>(state.iterations());
    state.counters[name + "_ms"] = t.wall / n;
    state.counters[name + "_main_ms"] = t.main / n;
    state.counters[name + "_all_ms"] = t.all / n;
  }

 private:
  struct Sample {
    double wall, main, all;
  };
  static double ClockMs(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  }
  static Sample Now() {
    return {ClockMs(CLOCK_MONOTONIC), ClockMs(CLOCK_THREAD_CPUTIME_ID),
            ClockMs(CLOCK_PROCESS_CPUTIME_ID)};
  }
  Sample last_{};
};

void BM_NonPrivateStepPhases(benchmark::State& state) {
  SetThreads(state);
  torch::manual_seed(0);
  const int64_t batch = state.range(0);
  dpkit::models::PlainMnistCnn model;
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.25));
  torch::Tensor x = torch::rand({batch, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {batch}, torch::kLong);
  PhaseTimer timer;
  PhaseTimer::Totals forward, backward, step;
  const double faults = MinorFaults();
  for (auto _ : state) {
    timer.Start();
    sgd.zero_grad();
    torch::Tensor loss = F::cross_entropy(model->forward(x), y);
    timer.Lap(&forward);
    loss.backward();
    timer.Lap(&backward);
    sgd.step();
    timer.Lap(&step);
  }
  state.counters["minor_faults"] =
      (MinorFaults() - faults) / static_cast<double>(state.iterations());
  PhaseTimer::Report(state, "forward", forward);
  PhaseTimer::Report(state, "backward", backward);
  PhaseTimer::Report(state, "step", step);
}

void BM_DpSgdStepPhases(benchmark::State& state) {
  SetThreads(state);
  torch::manual_seed(0);
  const int64_t batch = state.range(0);
  dpkit::models::MnistCnn model;
  std::unique_ptr<dpkit::optim::DpOptimizer> dp = MakeMnistDpSgd(state, model);
  if (dp == nullptr) return;
  std::vector<dpkit::optim::NamedPerExampleLayer> layers;
  if (!dpkit::optim::ValidateForPerExampleGradients(*model, &layers).ok()) {
    state.SkipWithError("ValidateForPerExampleGradients failed");
    return;
  }
  torch::Tensor x = torch::rand({batch, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {batch}, torch::kLong);
  PhaseTimer timer;
  PhaseTimer::Totals forward, backward, accumulate, step;
  std::vector<PhaseTimer::Totals> norms(layers.size()), sums(layers.size());
  torch::Tensor ones = torch::ones({batch}, torch::kFloat64);
  const double faults = MinorFaults();
  for (auto _ : state) {
    timer.Start();
    torch::Tensor loss = F::cross_entropy(model->forward(x), y,
                                          F::CrossEntropyFuncOptions().reduction(torch::kSum));
    timer.Lap(&forward);
    loss.backward();
    timer.Lap(&backward);
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < layers.size(); ++i) {
        std::vector<torch::Tensor> scratch;
        for (const torch::Tensor& p : layers[i].layer->DpParameters()) {
          scratch.push_back(torch::zeros(p.sizes(), p.options().requires_grad(false)));
        }
        std::vector<torch::Tensor> squared_norms;
        timer.Start();
        layers[i].layer->AppendSquaredNorms(&squared_norms);
        timer.Lap(&norms[i]);
        layers[i].layer->AddScaledGradientSums(
            std::vector<torch::Tensor>(scratch.size(), ones), &scratch);
        timer.Lap(&sums[i]);
      }
    }
    timer.Start();
    if (!dp->AccumulatePhysicalBatch().ok()) {
      state.SkipWithError("DP step failed");
      return;
    }
    timer.Lap(&accumulate);
    if (!dp->Step().ok()) {
      state.SkipWithError("DP step failed");
      return;
    }
    timer.Lap(&step);
  }
  state.counters["minor_faults"] =
      (MinorFaults() - faults) / static_cast<double>(state.iterations());
  PhaseTimer::Report(state, "forward", forward);
  PhaseTimer::Report(state, "backward", backward);
  PhaseTimer::Report(state, "accumulate", accumulate);
  PhaseTimer::Report(state, "noise_and_step", step);
  for (size_t i = 0; i < layers.size(); ++i) {
    PhaseTimer::Report(state, "norms_" + layers[i].name, norms[i]);
    PhaseTimer::Report(state, "sums_" + layers[i].name, sums[i]);
  }
}

void BM_NonPrivateStep(benchmark::State& state) {
  NonPrivateCnnSteps(state);
  state.counters["peak_rss_mb"] = PeakRssMb();
}

void BM_DpSgdStep(benchmark::State& state) {
  DpSgdCnnSteps(state);
  state.counters["peak_rss_mb"] = PeakRssMb();
}

// The same steps with peak live tensor bytes tracked (a few fixed iterations: the tracking
// hook costs time, so the speed figures come from the benchmarks above).
void BM_NonPrivateStepMemory(benchmark::State& state) {
  auto memory = std::make_shared<PeakTensorMemory>();
  {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, memory);
    NonPrivateCnnSteps(state);
  }
  state.counters["peak_tensor_mb"] = memory->PeakMb();
}

void BM_DpSgdStepMemory(benchmark::State& state) {
  auto memory = std::make_shared<PeakTensorMemory>();
  {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, memory);
    DpSgdCnnSteps(state);
  }
  state.counters["peak_tensor_mb"] = memory->PeakMb();
}

constexpr int64_t kVocabulary = 100000, kEmbeddingDim = 64, kTokens = 32, kHidden = 128;

struct PlainEmbeddingNet : torch::nn::Module {
  torch::nn::Embedding embedding{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  PlainEmbeddingNet() {
    embedding = register_module("embedding", torch::nn::Embedding(kVocabulary, kEmbeddingDim));
    fc1 = register_module("fc1", torch::nn::Linear(kEmbeddingDim, kHidden));
    fc2 = register_module("fc2", torch::nn::Linear(kHidden, 2));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    return fc2(torch::tanh(fc1(embedding(tokens))).mean(1));
  }
};

struct DpEmbeddingNet : torch::nn::Module {
  dpkit::optim::DpEmbedding embedding{nullptr};
  dpkit::optim::DpLinear fc1{nullptr}, fc2{nullptr};
  DpEmbeddingNet() {
    embedding = register_module("embedding", dpkit::optim::DpEmbedding(kVocabulary, kEmbeddingDim));
    fc1 = register_module("fc1", dpkit::optim::DpLinear(kEmbeddingDim, kHidden));
    fc2 = register_module("fc2", dpkit::optim::DpLinear(kHidden, 2));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    return fc2(torch::tanh(fc1(embedding(tokens))).mean(1));
  }
};

void BM_NonPrivateEmbeddingStep(benchmark::State& state) {
  SetThreads(state);
  auto memory = std::make_shared<PeakTensorMemory>();
  {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, memory);
    torch::manual_seed(0);
    const int64_t batch = state.range(0);
    auto model = std::make_shared<PlainEmbeddingNet>();
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.25));
    torch::Tensor tokens = torch::randint(0, kVocabulary, {batch, kTokens}, torch::kLong);
    torch::Tensor y = torch::randint(0, 2, {batch}, torch::kLong);
    for (auto _ : state) {
      for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();  // set to none
      torch::Tensor loss = F::cross_entropy(model->forward(tokens), y);
      loss.backward();
      sgd.step();
      benchmark::DoNotOptimize(loss.data_ptr());
    }
  }
  state.counters["peak_tensor_mb"] = memory->PeakMb();
}

void BM_DpSgdEmbeddingStep(benchmark::State& state) {
  SetThreads(state);
  auto memory = std::make_shared<PeakTensorMemory>();
  {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, memory);
    torch::manual_seed(0);
    const int64_t batch = state.range(0);
    auto model = std::make_shared<DpEmbeddingNet>();
    std::unique_ptr<dpkit::optim::DpOptimizer> dp =
        MakeDpSgd(state, *model, 1.0, 1.0, 256.0 / 25000);
    if (dp == nullptr) return;
    torch::Tensor tokens = torch::randint(0, kVocabulary, {batch, kTokens}, torch::kLong);
    torch::Tensor y = torch::randint(0, 2, {batch}, torch::kLong);
    for (auto _ : state) {
      torch::Tensor loss = F::cross_entropy(model->forward(tokens), y,
                                            F::CrossEntropyFuncOptions().reduction(torch::kSum));
      loss.backward();
      if (!dp->AccumulatePhysicalBatch().ok() || !dp->Step().ok()) {
        state.SkipWithError("DP step failed");
        return;
      }
      benchmark::DoNotOptimize(loss.data_ptr());
    }
  }
  state.counters["peak_tensor_mb"] = memory->PeakMb();
}

BENCHMARK(BM_NonPrivateStep)->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK(BM_DpSgdStep)->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK(BM_NonPrivateStepPhases)->Args({256, 1})->Args({256, 2})
    ->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_DpSgdStepPhases)->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
// Memory is per step, not per second: a fixed, small number of steps suffices.
BENCHMARK(BM_NonPrivateStepMemory)->Args({256, 1})->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_DpSgdStepMemory)->Args({256, 1})->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_NonPrivateEmbeddingStep)->Args({256, 1})->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_DpSgdEmbeddingStep)->Args({256, 1})->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace

BENCHMARK(BM_NonPrivateEpoch)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_DpSgdEpoch)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(1);

BENCHMARK_MAIN();
