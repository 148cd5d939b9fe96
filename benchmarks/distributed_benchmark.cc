// Data-parallel DP training speed (issue 17): MNIST CNN (Bu et al. 2020) DP-SGD steps of
// batch 256 (σ 1.3, C 1.5, q 256/60000, secure noise), in the same run:
//   BM_OneProcessTwoThreads    one process, 2 LibTorch threads, the whole batch per step;
//   BM_TwoProcessesOneThread   2 processes (ranks of //models/engine:distributed over Gloo on
//                              127.0.0.1), 1 thread each, 128 examples per rank per step,
//                              the gradients all-reduced and the commit broadcast per step.
// Both do the same work per step (256 per-example gradients, one noise draw, one update).
// The ranks are this binary re-executed (/proc/self/exe --rank_worker=R ...): forking a
// process whose OpenMP pool is running is not safe. Rank 0 times every step (the
// collectives keep the ranks in step) and sends the times through a pipe; the benchmark
// reports them as manual time. Counters of BM_TwoProcessesOneThread:
//   all_reduce_bytes_per_step  bytes each rank all-reduces per step (the gradients' float32);
//   efficiency                 time per step of BM_OneProcessTwoThreads / this one's (1.0:
//                              as fast as threads; needs BM_OneProcessTwoThreads in the
//                              same run, i.e. no --benchmark_filter leaving it out).
// Run on an idle machine for figures (tools/dev/readme_figures.py reads them from
// --benchmark_format=json): bazel run -c opt //benchmarks:distributed_benchmark.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "dpkit/base/free_port.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/models/engine/distributed.h"
#include "dpkit/models/mnist_models.h"
#include "dpkit/optim/torch/cpu_threads.h"
#include "dpkit/optim/torch/dp_optimizer.h"

namespace {

namespace F = torch::nn::functional;

constexpr int64_t kBatch = 256;
constexpr int kSteps = 20;        // timed steps per benchmark
constexpr int kWarmupSteps = 3;   // untimed steps first (allocator, thread pools, Gloo)
double g_one_process_seconds = 0;  // BM_OneProcessTwoThreads' mean time per step

// DP-SGD with Bu et al.'s Table 1 row 1 settings over `model`; noise drawn iff `noise`.
std::unique_ptr<dpkit::optim::DpOptimizer> MakeDpSgd(dpkit::models::MnistCnn& model,
                                                     bool noise) {
  auto generator = dpkit::mechanisms::SecureRandomGenerator::Create();
  if (!generator.ok()) return nullptr;
  dpkit::optim::DpOptimizerOptions options;
  options.noise_multiplier = 1.3;
  options.clip_norm = 1.5;
  options.sampling_rate = 256.0 / 60000;
  options.expected_batch_size = kBatch;
  options.draw_noise = noise;
  auto sgd = dpkit::optim::MakeTorchOptimizer("sgd", model->parameters(), 0.25);
  auto dp = dpkit::optim::DpOptimizer::Create(*model, *std::move(sgd), options,
                                              *std::move(generator));
  return dp.ok() ? *std::move(dp) : nullptr;
}

// Forward, backward and per-example clipping of `examples` synthetic examples.
bool Accumulate(dpkit::models::MnistCnn& model, dpkit::optim::DpOptimizer& dp,
                const torch::Tensor& x, const torch::Tensor& y) {
  F::cross_entropy(model->forward(x), y, F::CrossEntropyFuncOptions().reduction(torch::kSum))
      .backward();
  return dp.AccumulatePhysicalBatch().ok();
}

void BM_OneProcessTwoThreads(benchmark::State& state) {
  dpkit::optim::ConfigureCpuThreads(2);
  torch::manual_seed(0);
  dpkit::models::MnistCnn model;
  auto dp = MakeDpSgd(model, /*noise=*/true);
  if (dp == nullptr) return state.SkipWithError("no DP optimizer");
  const torch::Tensor x = torch::rand({kBatch, 1, 28, 28});
  const torch::Tensor y = torch::randint(0, 10, {kBatch}, torch::kLong);
  for (int i = 0; i < kWarmupSteps; ++i) {
    if (!Accumulate(model, *dp, x, y) || !dp->Step().ok()) return state.SkipWithError("step");
  }
  double total = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (!Accumulate(model, *dp, x, y) || !dp->Step().ok()) return state.SkipWithError("step");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    total += seconds;
  }
  g_one_process_seconds = total / static_cast<double>(state.iterations());
}

// One rank of BM_TwoProcessesOneThread (run in a re-executed child): kWarmupSteps +
// `steps` steps; rank 0 writes each timed step's seconds, then the all-reduced bytes per
// step, as doubles to `out`. Returns the exit code.
int RankWorker(int rank, int port, int steps, int out) {
  dpkit::optim::ConfigureCpuThreads(1);
  dpkit::models::DistributedSettings settings;
  settings.rank = rank;
  settings.world_size = 2;
  settings.master_port = port;
  settings.timeout_seconds = 120;
  auto group = dpkit::models::DistributedGroup::Connect(settings, torch::Device(torch::kCPU));
  if (!group.ok()) return 3;
  torch::manual_seed(0);
  dpkit::models::MnistCnn model;
  auto dp = MakeDpSgd(model, /*noise=*/rank == 0);
  if (dp == nullptr) return 4;
  auto step = dpkit::models::DistributedDpStep::Create(**group, *model, *dp, nullptr, 50);
  if (!step.ok() || !(*step)->SynchronizeParameters(0).ok()) return 5;
  torch::manual_seed(1 + rank);
  const torch::Tensor x = torch::rand({kBatch / 2, 1, 28, 28});
  const torch::Tensor y = torch::randint(0, 10, {kBatch / 2}, torch::kLong);
  for (int t = 0; t < kWarmupSteps + steps; ++t) {
    const auto start = std::chrono::steady_clock::now();
    if (!Accumulate(model, *dp, x, y) || !(*step)->Step(t).ok()) return 6;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rank == 0 && t >= kWarmupSteps &&
        write(out, &seconds, sizeof(seconds)) != sizeof(seconds)) {
      return 7;
    }
  }
  const double bytes = static_cast<double>((*group)->last_all_reduce_bytes());
  if (rank == 0 && write(out, &bytes, sizeof(bytes)) != sizeof(bytes)) return 7;
  return 0;
}

bool ReadDouble(int fd, double* value) {
  size_t got = 0;
  char* bytes = reinterpret_cast<char*>(value);
  while (got < sizeof(*value)) {
    const ssize_t n = read(fd, bytes + got, sizeof(*value) - got);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

void BM_TwoProcessesOneThread(benchmark::State& state) {
  const int port = dpkit::base::FreeLoopbackPort();
  int pipe_fds[2];
  if (port <= 0 || pipe(pipe_fds) != 0) return state.SkipWithError("no port or pipe");
  const int steps = static_cast<int>(state.max_iterations);
  std::vector<pid_t> ranks;
  std::fflush(nullptr);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string rank_flag = "--rank_worker=" + std::to_string(rank),
                      port_flag = "--port=" + std::to_string(port),
                      steps_flag = "--steps=" + std::to_string(steps),
                      out_flag = "--out_fd=" + std::to_string(pipe_fds[1]);
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", "distributed_benchmark", rank_flag.c_str(), port_flag.c_str(),
            steps_flag.c_str(), out_flag.c_str(), static_cast<char*>(nullptr));
      _exit(8);
    }
    if (pid > 0) ranks.push_back(pid);
  }
  close(pipe_fds[1]);
  bool ok = ranks.size() == 2;
  double total = 0;
  for (auto _ : state) {
    double seconds = 0;
    ok = ok && ReadDouble(pipe_fds[0], &seconds);
    state.SetIterationTime(ok ? seconds : 0);
    total += seconds;
  }
  double bytes = 0;
  ok = ok && ReadDouble(pipe_fds[0], &bytes);
  close(pipe_fds[0]);
  for (pid_t pid : ranks) {
    int status = 0;
    if (!ok) kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) return state.SkipWithError("a rank failed");
  const double per_step = total / static_cast<double>(state.iterations());
  state.counters["all_reduce_bytes_per_step"] = bytes;
  if (g_one_process_seconds > 0) state.counters["efficiency"] = g_one_process_seconds / per_step;
}

BENCHMARK(BM_OneProcessTwoThreads)
    ->UseManualTime()
    ->Iterations(kSteps)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TwoProcessesOneThread)
    ->UseManualTime()
    ->Iterations(kSteps)
    ->Unit(benchmark::kMillisecond);

// The value of `--name=VALUE` among argv, or -1.
int IntFlag(int argc, char** argv, const char* name) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoi(argv[i] + prefix.size());
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  const int rank = IntFlag(argc, argv, "rank_worker");
  if (rank >= 0) {
    return RankWorker(rank, IntFlag(argc, argv, "port"), IntFlag(argc, argv, "steps"),
                      IntFlag(argc, argv, "out_fd"));
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
