// Issue 17: `dpkit train mnist` on 2 processes on 127.0.0.1 (Gloo), each rank a forked
// child running the trainer in-process (so the engine's fault hook can kill or hang one
// rank at a chosen step): one ledger with one line per step and the single-process q and
// sigma; a killed or hung rank stops the other within its timeout with one line naming
// it, the ledger accounts every applied step, and --resume finishes the run.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/base/free_port.h"
#include "dpkit/models/engine/checkpoint.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/training/training_testing.h"

namespace dpkit {
namespace {

using models::FaultPoint;
using models::TrainOptions;
using training_testing::MakeMnistData;
using training_testing::ReadJsonLines;
using training_testing::TempDir;

constexpr int64_t kStepsPerEpoch = 16;  // 256 examples, batch 16
constexpr int64_t kTotalSteps = 32;     // 2 epochs

TrainOptions MnistRun(const std::string& name, const std::string& data, int world_size) {
  TrainOptions o;
  o.model = "mnist";
  o.data_dir = data;
  o.output_dir = TempDir() + "/" + name;
  o.batch_size = 16;
  o.epochs = 2;
  o.threads = 1;
  o.format = "json";
  o.test_subset = 20;
  o.distributed.world_size = world_size;
  o.distributed.timeout_seconds = 4;
  o.distributed.checksum_every = 5;
  return o;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Seconds on the monotonic clock, which every process of the machine shares.
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Called by the faulty rank just before it dies or hangs.
void MarkFault(const std::string& path) {
  std::ofstream(path) << std::to_string(Now());
}

double FaultTime(const TrainOptions& o) {
  return std::atof(ReadFile(o.output_dir + ".fault").c_str());
}

struct RankResult {
  int code = -1000;    // exit code, or -signal
  double exit = 0;     // Now() when the test saw it exit
  std::string error;   // what it printed on stderr
};

// Rank r of `o` (world size 2) in a forked child with `hook` as its engine fault hook;
// rank 0's result first. When `kill_rank1_after_rank0`, rank 1 is killed once rank 0 exits
// (a hung rank).
std::vector<RankResult> RunTwoRanks(TrainOptions o,
                                    const std::function<void(int, FaultPoint, int64_t)>& hook,
                                    bool kill_rank1_after_rank0 = false) {
  o.distributed.master_port = base::FreeLoopbackPort();
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string err = o.output_dir + ".err" + std::to_string(rank);
      if (std::freopen("/dev/null", "w", stdout) == nullptr ||
          std::freopen(err.c_str(), "w", stderr) == nullptr) {
        _exit(3);
      }
      models::ScopedTrainingFault fault(
          [&hook, rank](FaultPoint p, int64_t s) { if (hook) hook(rank, p, s); });
      TrainOptions mine = o;
      mine.distributed.rank = rank;
      const absl::Status status = models::FindTrainer("mnist")->run(mine);
      if (!status.ok()) std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
      std::fflush(nullptr);
      _exit(status.ok() ? 0 : 2);
    }
    pids.push_back(pid);
  }
  std::vector<RankResult> results(2);
  for (int rank = 0; rank < 2; ++rank) {
    int status = 0;
    if (waitpid(pids[rank], &status, 0) != pids[rank]) continue;
    results[rank].code = WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
    results[rank].exit = Now();
    results[rank].error = ReadFile(o.output_dir + ".err" + std::to_string(rank));
    if (rank == 0 && kill_rank1_after_rank0) kill(pids[1], SIGKILL);
  }
  return results;
}

std::vector<nlohmann::json> Ledger(const TrainOptions& o) {
  return ReadJsonLines(o.output_dir + "/ledger.jsonl");
}

int64_t NextStep(const TrainOptions& o) {
  return nlohmann::json::parse(ReadFile(o.output_dir + "/checkpoint.json"))["next_step"]
      .get<int64_t>();
}

// One line per step, in order, with the q and sigma C of the one-process run (so the same
// epsilon); only rank 0 writes files.
TEST(DistributedTrainingTest, TwoRanksWriteOneLedgerOfTheSingleProcessRun) {
  const std::string data = MakeMnistData("dist_data", 256, 20);
  TrainOptions single = MnistRun("dist_single", data, 1);
  ASSERT_EQ(training_testing::RunInChild(single), 0);
  TrainOptions two = MnistRun("dist_two", data, 2);
  const std::vector<RankResult> ranks = RunTwoRanks(two, nullptr);
  ASSERT_EQ(ranks[0].code, 0) << ranks[0].error;
  ASSERT_EQ(ranks[1].code, 0) << ranks[1].error;
  const std::vector<nlohmann::json> one = Ledger(single), ledger = Ledger(two);
  ASSERT_EQ(ledger.size(), static_cast<size_t>(kTotalSteps));
  EXPECT_EQ(ledger, one);  // step numbers, q = 16 / 256, {C, sigma C}: the same epsilon
  for (int64_t t = 0; t < kTotalSteps; ++t) {
    EXPECT_EQ(ledger[t]["step"], t);
    EXPECT_EQ(ledger[t]["sampling_rate"], 16.0 / 256);
  }
  EXPECT_EQ(ReadJsonLines(two.output_dir + "/metrics.jsonl").size(), 2u);
  EXPECT_EQ(NextStep(two), kTotalSteps);
}

// Rank 1 is killed after applying step 20 (the epoch-1 checkpoint is at step 16): rank 0
// stops at step 21 with one line naming rank 1; the ledger holds exactly the 21 applied
// steps (step 21's all-reduce failed: rank 0 accounts a step only after it, distributed.h
// step 5). --resume of both ranks finishes the run from the checkpoint; every step stays
// accounted.
TEST(DistributedTrainingTest, KilledRankStopsTheOtherAndTheRunResumes) {
  const std::string data = MakeMnistData("dist_kill_data", 256, 20);
  TrainOptions o = MnistRun("dist_kill", data, 2);
  const std::string fault = o.output_dir + ".fault";
  const std::vector<RankResult> killed = RunTwoRanks(o, [fault](int rank, FaultPoint p, int64_t s) {
    if (rank == 1 && p == FaultPoint::kUpdateApplied && s == 20) {
      MarkFault(fault);
      raise(SIGKILL);
    }
  });
  EXPECT_EQ(killed[1].code, -SIGKILL);
  EXPECT_EQ(killed[0].code, 2) << killed[0].error;
  EXPECT_NE(killed[0].error.find("stopped at step 21: rank 1 did not answer"), std::string::npos)
      << killed[0].error;
  EXPECT_EQ(killed[0].error.find('\n'), killed[0].error.size() - 1) << killed[0].error;
  // A reset connection is seen at once; then the report grace (2 s).
  EXPECT_LT(killed[0].exit - FaultTime(o), 6);
  const size_t accounted = Ledger(o).size();
  EXPECT_EQ(accounted, 21u);  // exactly the applied steps (0..20)
  EXPECT_EQ(NextStep(o), kStepsPerEpoch);

  o.resume = true;
  const std::vector<RankResult> resumed = RunTwoRanks(o, nullptr);
  ASSERT_EQ(resumed[0].code, 0) << resumed[0].error;
  ASSERT_EQ(resumed[1].code, 0) << resumed[1].error;
  const std::vector<nlohmann::json> ledger = Ledger(o);
  // Steps 16..31 again after the checkpoint's 16, plus the entries the crash left after it.
  EXPECT_EQ(ledger.size(), accounted + (kTotalSteps - kStepsPerEpoch));
  EXPECT_EQ(ledger.back()["step"], kTotalSteps - 1);
  EXPECT_EQ(NextStep(o), kTotalSteps);
}

// Rank 1 hangs after step 5: rank 0 gives up within the collective timeout (4 s) plus the
// report grace (2 s), naming rank 1; the ledger holds exactly steps 0..5.
TEST(DistributedTrainingTest, HungRankIsNamedWithinTheTimeout) {
  const std::string data = MakeMnistData("dist_hang_data", 256, 20);
  TrainOptions o = MnistRun("dist_hang", data, 2);
  const std::string fault = o.output_dir + ".fault";
  const std::vector<RankResult> ranks = RunTwoRanks(
      o,
      [fault](int rank, FaultPoint p, int64_t s) {
        if (rank == 1 && p == FaultPoint::kUpdateApplied && s == 5) {
          MarkFault(fault);
          std::this_thread::sleep_for(std::chrono::seconds(60));
        }
      },
      /*kill_rank1_after_rank0=*/true);
  EXPECT_EQ(ranks[0].code, 2) << ranks[0].error;
  EXPECT_NE(ranks[0].error.find("stopped at step 6: rank 1 did not answer (dead or hung)"),
            std::string::npos)
      << ranks[0].error;
  EXPECT_NE(ranks[0].error.find("--collective_timeout=4"), std::string::npos) << ranks[0].error;
  EXPECT_EQ(ranks[1].code, -SIGKILL);
  // The timeout (4 s) and the report grace (2 s), plus one step of slack.
  const double waited = ranks[0].exit - FaultTime(o);
  EXPECT_GT(waited, 3.5);
  EXPECT_LT(waited, 9);
  EXPECT_EQ(Ledger(o).size(), 6u);
}

}  // namespace
}  // namespace dpkit
