// Issue 17, end to end: `dpkit train mnist --nproc=2` starts 2 ranks on 127.0.0.1 (the
// launcher of tools/train_launcher.cc), writes one ledger and prints the epsilon of the
// one-process run; a rank killed from outside stops the run with one line naming it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/cli/dpkit_runner.h"
#include "dpkit/tests/training/training_testing.h"

namespace {

using nlohmann::json;
using dpkit::training_testing::MakeMnistData;
using dpkit::testing::CliRun;
using dpkit::testing::Dpkit;
using dpkit::testing::DpkitPath;
using dpkit::testing::Lines;
using dpkit::testing::ReadFile;
using dpkit::training_testing::TempDir;

TEST(DistributedCliTest, TwoProcessesWriteOneLedgerAndPrintTheSameEpsilon) {
  const std::string data = MakeMnistData("cli_data", 256, 20);
  const std::string common = "train mnist --data_dir=" + data +
                             " --batch_size=16 --epochs=1 --test_subset=20 --format=json";
  CliRun one = Dpkit(common + " --threads=1 --output_dir=" + TempDir() + "/cli_one");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  CliRun two = Dpkit(common + " --nproc=2 --output_dir=" + TempDir() + "/cli_two");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  ASSERT_EQ(Lines(two.out).size(), 1u) << two.out;  // only rank 0 reports
  EXPECT_EQ(json::parse(Lines(two.out)[0])["epsilon"], json::parse(Lines(one.out)[0])["epsilon"]);
  EXPECT_EQ(ReadFile(TempDir() + "/cli_two/ledger.jsonl"),
            ReadFile(TempDir() + "/cli_one/ledger.jsonl"));
  EXPECT_EQ(Lines(ReadFile(TempDir() + "/cli_two/ledger.jsonl")).size(), 16u);
}

TEST(DistributedCliTest, RefusesBadProcessCountsAndSingleProcessOnlyOptions) {
  CliRun zero = Dpkit("train mnist --nproc=0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--nproc must be an integer in [1, 1024]"), std::string::npos) << zero.err;
  const std::string data = MakeMnistData("cli_bad_data", 64, 10);
  CliRun micro =
      Dpkit("train mnist --nproc=2 --batch_size=16 --microbatch_size=4 --data_dir=" + data);
  EXPECT_NE(micro.exit_code, 0);
  EXPECT_NE(micro.err.find("need --sampler=poisson and --microbatch_size=1"), std::string::npos)
      << micro.err;
  // Every rank refuses the same input: the refusal is printed once, not once per rank.
  EXPECT_EQ(Lines(micro.err).size(), 1u) << micro.err;
  CliRun flag = Dpkit("train mnist --nproc=3 --learning_rate=fast --data_dir=" + data);
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("--learning_rate"), std::string::npos) << flag.err;
  EXPECT_EQ(Lines(flag.err).size(), 1u) << flag.err;
  CliRun rank = Dpkit("train mnist --rank=2 --world_size=2 --data_dir=" + data);
  EXPECT_EQ(rank.exit_code, 2);
  EXPECT_NE(rank.err.find("0 <= rank < world_size"), std::string::npos) << rank.err;
}

// The pid of the child of `parent` whose environment holds RANK=`rank`, or 0.
pid_t ChildWithRank(pid_t parent, int rank) {
  const std::string children = ReadFile("/proc/" + std::to_string(parent) + "/task/" +
                                        std::to_string(parent) + "/children");
  std::stringstream in(children);
  for (pid_t pid; in >> pid;) {
    std::stringstream environ(ReadFile("/proc/" + std::to_string(pid) + "/environ"));
    for (std::string entry; std::getline(environ, entry, '\0');) {
      if (entry == "RANK=" + std::to_string(rank)) return pid;
    }
  }
  return 0;
}

TEST(DistributedCliTest, KilledRankStopsTheRunWithOneLineNamingIt) {
  const std::string data = MakeMnistData("cli_kill_data", 256, 20);
  const std::string dir = TempDir() + "/cli_kill", err = TempDir() + "/cli_kill.err";
  std::fflush(nullptr);
  const pid_t launcher = fork();
  if (launcher == 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr ||
        std::freopen(err.c_str(), "w", stderr) == nullptr) {
      _exit(3);
    }
    const std::string binary = DpkitPath(), data_flag = "--data_dir=" + data,
                      out_flag = "--output_dir=" + dir;
    execl(binary.c_str(), binary.c_str(), "train", "mnist", "--nproc=2", data_flag.c_str(),
          out_flag.c_str(), "--batch_size=16", "--epochs=40", "--test_subset=20",
          "--collective_timeout=5", static_cast<char*>(nullptr));
    _exit(4);
  }
  // Wait until the run has taken a few steps, then kill rank 1 from outside.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  while (Lines(ReadFile(dir + "/ledger.jsonl")).size() < 3 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t rank1 = ChildWithRank(launcher, 1);
  ASSERT_GT(rank1, 0);
  const auto killed = std::chrono::steady_clock::now();
  kill(rank1, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  const std::string message = ReadFile(err);
  EXPECT_NE(message.find("dpkit train: rank 1 was killed by signal 9"), std::string::npos)
      << message;
  EXPECT_NE(message.find("rank 1 did not answer (dead or hung)"), std::string::npos) << message;
  EXPECT_LT(seconds, 10) << message;  // the report grace (2 s) and the launcher's (5 s)
}

}  // namespace
