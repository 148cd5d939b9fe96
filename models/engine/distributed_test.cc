// The distributed DP step (distributed.h) on 2 processes on 127.0.0.1 (Gloo): forked
// children form the group; the parent compares their results with one-process runs.
#include "dpkit/models/engine/distributed.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "dpkit/base/free_port.h"
#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"  // SeededRandomGeneratorForTesting
#include "dpkit/optim/torch/dp_optimizer.h"
#include "dpkit/optim/torch/per_example_layers.h"

namespace dpkit::models {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

DistributedSettings Settings(int rank, int port, double timeout_seconds = 30) {
  DistributedSettings s;
  s.rank = rank;
  s.world_size = 2;
  s.master_port = port;
  s.timeout_seconds = timeout_seconds;
  s.checksum_every = 1;
  return s;
}

// Runs body(rank) in two forked children; returns their exit codes (-signal if killed).
// A child writes its one-line error to TempPath(name + ".err<rank>").
std::vector<int> RunTwoRanks(const std::function<int(int rank)>& body) {
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) _exit(body(rank));
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status));
  }
  return codes;
}

void WriteText(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return;
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

std::string ReadText(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return out;
  for (int c; (c = std::fgetc(f)) != EOF;) out.push_back(static_cast<char>(c));
  std::fclose(f);
  return out;
}

struct Net : torch::nn::Module {
  optim::DpLinear fc1{nullptr}, fc2{nullptr};
  Net(int64_t in, int64_t hidden, int64_t out) {
    fc1 = register_module("fc1", optim::DpLinear(in, hidden));
    fc2 = register_module("fc2", optim::DpLinear(hidden, out));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc2->forward(torch::tanh(fc1->forward(x)));
  }
};

constexpr int64_t kExamples = 10;

// The fixed data of the equivalence test: kExamples inputs of 6 features, 3 classes.
std::pair<torch::Tensor, torch::Tensor> Data() {
  torch::manual_seed(11);
  return {torch::randn({kExamples, 6}), torch::randint(0, 3, {kExamples}, torch::kLong)};
}

optim::DpOptimizerOptions StepOptions(bool draw_noise) {
  optim::DpOptimizerOptions o;
  o.noise_multiplier = 0.7;
  o.clip_norm = 0.5;
  o.sampling_rate = 0.5;
  o.expected_batch_size = 5;
  o.draw_noise = draw_noise;
  return o;
}

// Three steps of DP-SGD over `indices` (all examples in one process, or one rank's shard),
// noise from a generator seeded with 5 on the rank that draws it. Returns the parameters.
absl::StatusOr<std::vector<torch::Tensor>> TrainThreeSteps(const std::vector<int64_t>& indices,
                                                           DistributedGroup* group) {
  auto [x, y] = Data();
  torch::manual_seed(3);
  Net net(6, 4, 3);
  const bool noise = group == nullptr || group->rank() == 0;
  auto dp = optim::DpOptimizer::Create(
      net, *optim::MakeTorchOptimizer("sgd", net.parameters(), 0.3), StepOptions(noise),
      std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(5));
  if (!dp.ok()) return dp.status();
  std::unique_ptr<DistributedDpStep> step;
  if (group != nullptr) {
    auto made = DistributedDpStep::Create(*group, net, **dp, nullptr, 1);
    if (!made.ok()) return made.status();
    step = *std::move(made);
    absl::Status synced = step->SynchronizeParameters(0);
    if (!synced.ok()) return synced;
  }
  const torch::Tensor index = torch::tensor(indices, torch::kLong);
  for (int64_t t = 0; t < 3; ++t) {
    if (!indices.empty()) {
      torch::Tensor logits = net.forward(x.index_select(0, index));
      torch::nn::functional::cross_entropy(
          logits, y.index_select(0, index),
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
          .backward();
      absl::StatusOr<int64_t> done = (*dp)->AccumulatePhysicalBatch();
      if (!done.ok()) return done.status();
    }
    absl::StatusOr<optim::DpStepResult> stepped = step ? step->Step(t) : (*dp)->Step(t);
    if (!stepped.ok()) return stepped.status();
  }
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : net.parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST(DistributedTest, ShardsPartitionTheTrainingSet) {
  for (int64_t n : {0, 1, 7, 10, 1001}) {
    for (int world : {1, 2, 3, 8}) {
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        const Shard s = ShardOf(n, r, world);
        EXPECT_EQ(s.begin, next) << n << " " << world << " " << r;
        EXPECT_LE(s.end - s.begin, n / world + 1);
        EXPECT_GE(s.end - s.begin, n / world);
        next = s.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

// The union of the ranks' samples is a Poisson sample of rate q of the whole set: every
// example is drawn by exactly its own shard's rank, with frequency q over many steps.
TEST(DistributedTest, UnionOfShardSamplesIsPoissonWithRateQ) {
  constexpr int64_t kN = 200, kSteps = 4000;
  constexpr int kWorld = 3;
  constexpr double kQ = 0.1;
  mechanisms::SeededRandomGeneratorForTesting rng(17);
  std::vector<int64_t> count(kN, 0);
  for (int64_t t = 0; t < kSteps; ++t) {
    for (int r = 0; r < kWorld; ++r) {
      absl::StatusOr<std::vector<int64_t>> sample = PoissonSampleShard(rng, kN, kQ, r, kWorld);
      ASSERT_TRUE(sample.ok());
      const Shard shard = ShardOf(kN, r, kWorld);
      for (int64_t i : *sample) {
        ASSERT_GE(i, shard.begin);
        ASSERT_LT(i, shard.end);
        ++count[i];
      }
    }
  }
  // Each count ~ Binomial(kSteps, q): sd = sqrt(kSteps q (1-q)) ~ 19; 5 sd per example
  // (200 examples: a false alarm has probability ~ 1e-4), and the total within 5 sd.
  const double mean = kSteps * kQ, sd = std::sqrt(kSteps * kQ * (1 - kQ));
  double total = 0;
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_NEAR(count[i], mean, 5 * sd) << "example " << i;
    total += count[i];
  }
  EXPECT_NEAR(total, kN * mean, 5 * sd * std::sqrt(kN));
  EXPECT_FALSE(PoissonSampleShard(rng, kN, kQ, 3, kWorld).ok());
}

// Given the same batch and the same noise (seeded generator on rank 0), the 2-process
// update equals the 1-process update to float tolerance, and both ranks hold it.
TEST(DistributedTest, TwoProcessUpdateEqualsOneProcessUpdate) {
  const int port = base::FreeLoopbackPort();
  ASSERT_GT(port, 0);
  const std::vector<int> codes = RunTwoRanks([port](int rank) {
    auto group = DistributedGroup::Connect(Settings(rank, port), torch::Device(torch::kCPU));
    if (!group.ok()) return 3;
    const Shard shard = ShardOf(kExamples, rank, 2);
    std::vector<int64_t> mine;
    for (int64_t i = shard.begin; i < shard.end; ++i) mine.push_back(i);
    auto params = TrainThreeSteps(mine, group->get());
    if (!params.ok()) {
      WriteText(TempPath("equal.err" + std::to_string(rank)),
                std::string(params.status().message()));
      return 4;
    }
    torch::save(*params, TempPath("equal.rank" + std::to_string(rank) + ".pt"));
    return 0;
  });
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << ReadText(TempPath("equal.err0"))
                                             << ReadText(TempPath("equal.err1"));
  std::vector<int64_t> all;
  for (int64_t i = 0; i < kExamples; ++i) all.push_back(i);
  auto single = TrainThreeSteps(all, nullptr);
  ASSERT_TRUE(single.ok());
  std::vector<torch::Tensor> rank0, rank1;
  torch::load(rank0, TempPath("equal.rank0.pt"));
  torch::load(rank1, TempPath("equal.rank1.pt"));
  ASSERT_EQ(rank0.size(), single->size());
  for (size_t i = 0; i < single->size(); ++i) {
    EXPECT_TRUE(torch::equal(rank0[i], rank1[i])) << "parameter " << i;
    EXPECT_TRUE(torch::allclose(rank0[i], (*single)[i], /*rtol=*/1e-5, /*atol=*/1e-6))
        << "parameter " << i << ": max difference "
        << (rank0[i] - (*single)[i]).abs().max().item<double>();
  }
}

// The noise is added once per step: with empty batches the all-reduced update of 2 ranks is
// (z / B) with z ~ N(0, sigma^2 C^2) per coordinate from rank 0's SECURE generator; its
// sample variance over 200,400 coordinates is sigma^2 C^2 / B^2 (noise on both ranks would
// double it, N(0, sigma^2 C^2 / N) on rank 0 alone would halve it).
TEST(DistributedTest, SummedNoiseHasTheFullVarianceOnce) {
  const int port = base::FreeLoopbackPort();
  ASSERT_GT(port, 0);
  constexpr double kSigma = 1.3, kClip = 2.0, kBatch = 4.0;
  const std::vector<int> codes = RunTwoRanks([port](int rank) {
    auto group = DistributedGroup::Connect(Settings(rank, port), torch::Device(torch::kCPU));
    if (!group.ok()) return 3;
    torch::manual_seed(1);
    Net net(400, 500, 1);
    std::vector<torch::Tensor> before;
    for (const torch::Tensor& p : net.parameters()) before.push_back(p.detach().clone());
    optim::DpOptimizerOptions o;
    o.noise_multiplier = kSigma;
    o.clip_norm = kClip;
    o.sampling_rate = 0.01;
    o.expected_batch_size = kBatch;
    o.draw_noise = rank == 0;
    auto noise = mechanisms::SecureRandomGenerator::Create();
    auto dp = optim::DpOptimizer::Create(
        net, *optim::MakeTorchOptimizer("sgd", net.parameters(), 1.0), o, *std::move(noise));
    if (!dp.ok()) return 4;
    auto step = DistributedDpStep::Create(**group, net, **dp, nullptr, 1);
    if (!step.ok() || !(*step)->Step(0).ok()) return 5;
    std::vector<torch::Tensor> moved;
    auto params = net.parameters();
    for (size_t i = 0; i < params.size(); ++i) moved.push_back(params[i].detach() - before[i]);
    torch::save(moved, TempPath("noise.rank" + std::to_string(rank) + ".pt"));
    return 0;
  });
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));
  std::vector<torch::Tensor> rank0, rank1;
  torch::load(rank0, TempPath("noise.rank0.pt"));
  torch::load(rank1, TempPath("noise.rank1.pt"));
  std::vector<torch::Tensor> flat;
  for (size_t i = 0; i < rank0.size(); ++i) {
    EXPECT_TRUE(torch::equal(rank0[i], rank1[i]));
    flat.push_back(rank0[i].reshape({-1}).to(torch::kFloat64) * kBatch);  // SGD, lr 1: -z/B
  }
  const torch::Tensor z = torch::cat(flat);
  const double d = static_cast<double>(z.numel());
  const double variance = z.pow(2).sum().item<double>() / d;  // mean 0 is known
  const double expected = kSigma * kSigma * kClip * kClip;
  // The sample variance of d normals has relative sd sqrt(2 / d) ~ 0.32%; allow 6 sd.
  EXPECT_NEAR(variance / expected, 1.0, 6 * std::sqrt(2 / d)) << "d " << d;
}

// A rank that dies or hangs makes the other rank fail within the collective timeout with
// one line naming it.
TEST(DistributedTest, DeadOrHungRankIsNamedWithinTheTimeout) {
  for (const bool hang : {false, true}) {
    const int port = base::FreeLoopbackPort();
    ASSERT_GT(port, 0);
    const std::string err = TempPath(hang ? "hung.err" : "dead.err");
    const std::vector<int> codes = RunTwoRanks([&](int rank) {
      auto group = DistributedGroup::Connect(Settings(rank, port, /*timeout_seconds=*/2),
                                             torch::Device(torch::kCPU));
      if (!group.ok()) return 3;
      std::vector<torch::Tensor> t{torch::ones({3})};
      if (!(*group)->AllReduceSum(t, 0).ok()) return 4;
      if (rank == 1) {
        if (!hang) raise(SIGKILL);
        std::this_thread::sleep_for(std::chrono::seconds(8));  // hung past the timeout
        return 0;
      }
      const auto start = std::chrono::steady_clock::now();
      absl::Status second = (*group)->AllReduceSum(t, 1);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      WriteText(err, std::string(second.message()));
      WriteText(err + ".seconds", std::to_string(seconds));
      return second.ok() ? 0 : 1;
    });
    const double seconds = std::atof(ReadText(err + ".seconds").c_str());
    EXPECT_EQ(codes[0], 1) << (hang ? "hung" : "dead");
    const std::string message = ReadText(err);
    EXPECT_NE(message.find("rank 1 did not answer"), std::string::npos) << message;
    EXPECT_NE(message.find("step 1"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    // Rank 0's failing all-reduce: at most the timeout (2 s) plus the report grace (2 s).
    EXPECT_LT(seconds, 6) << message;
    EXPECT_GT(seconds, hang ? 1.5 : 0.0) << message;
  }
}

// Issue 17: after a failed collective the ledger holds exactly the steps rank 0 applied
// (distributed.h, step 5: rank 0 accounts a step after its all-reduce succeeded and applies
// every step it accounted). Rank 1 dies before step 2; rank 0's step 2 fails. Before the
// commit protocol rank 0 had appended step 2's line before the all-reduce: 3 lines, 2 updates.
TEST(DistributedTest, LedgerHoldsExactlyTheAppliedStepsAfterAFailedCollective) {
  const int port = base::FreeLoopbackPort();
  ASSERT_GT(port, 0);
  const std::string out = TempPath("exact.txt");
  const std::vector<int> codes = RunTwoRanks([&](int rank) {
    auto group = DistributedGroup::Connect(Settings(rank, port, /*timeout_seconds=*/2),
                                           torch::Device(torch::kCPU));
    if (!group.ok()) return 3;
    auto [x, y] = Data();
    torch::manual_seed(3);
    Net net(6, 4, 3);
    auto dp = optim::DpOptimizer::Create(
        net, *optim::MakeTorchOptimizer("sgd", net.parameters(), 0.3), StepOptions(rank == 0),
        std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(5));
    if (!dp.ok()) return 4;
    int64_t lines = 0;
    auto step = DistributedDpStep::Create(
        **group, net, **dp,
        [&lines](const accounting::SamplingRecord&) {
          ++lines;
          return absl::OkStatus();
        },
        /*checksum_every=*/1000);
    if (!step.ok() || !(*step)->SynchronizeParameters(0).ok()) return 5;
    auto flat = [&net] {
      std::vector<torch::Tensor> parts;
      for (const torch::Tensor& p : net.parameters()) parts.push_back(p.detach().flatten());
      return torch::cat(parts).clone();
    };
    int64_t applied = 0;
    bool failed = false;
    for (int64_t t = 0; t < 4 && !failed; ++t) {
      if (rank == 1 && t == 2) raise(SIGKILL);
      torch::nn::functional::cross_entropy(
          net.forward(x), y,
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
          .backward();
      if (!(*dp)->AccumulatePhysicalBatch().ok()) return 6;
      const torch::Tensor before = flat();
      failed = !(*step)->Step(t).ok();
      if (!torch::equal(before, flat())) ++applied;
    }
    WriteText(out, std::to_string(lines) + " " + std::to_string(applied) + " " +
                       std::to_string(failed ? 1 : 0));
    return 0;
  });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], -SIGKILL);
  // "lines applied failed" of rank 0.
  EXPECT_EQ(ReadText(out), "2 2 1");
}

}  // namespace
}  // namespace dpkit::models
