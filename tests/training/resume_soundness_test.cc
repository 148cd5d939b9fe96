// Issue 21, soundness item 1: the ledger can never cover fewer steps than the saved model
// took. Each run of `dpkit train mnist` here happens in a forked child, killed with SIGKILL
// at a chosen point of the engine's protocol (models/engine/checkpoint.h): between a step's
// ledger append and its update, after the update, after the state files' .tmp copies, after
// their renames (before checkpoint.json's) and after checkpoint.json's. After every run the
// ledger must account every update the saved model holds (model.pt's own step and
// checkpoint.json's next_step are both <= the ledger's steps), and after the final resume
// the ledger holds every applied step once plus the steps a crash lost after they were
// accounted (over-counting is safe; under-counting never happens).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/models/engine/checkpoint.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/training/training_testing.h"

namespace dpkit {
namespace {

using models::FaultPoint;
using models::TrainOptions;
using training_testing::CompleteJsonLines;
using training_testing::KillAt;
using training_testing::MakeMnistData;
using training_testing::ReadJsonLines;
using training_testing::RunInChild;
using training_testing::TempDir;

constexpr int64_t kStepsPerEpoch = 16;  // ceil(256 / 16)
constexpr int64_t kTotalSteps = 32;     // 2 epochs

TrainOptions MnistRun(const std::string& name, const std::string& data) {
  TrainOptions o;
  o.model = "mnist";
  o.data_dir = data;
  o.output_dir = TempDir() + "/" + name;
  o.batch_size = 16;
  o.epochs = 2;
  o.threads = 1;
  o.format = "json";
  o.test_subset = 20;
  return o;
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

// The step model.pt holds (written by the engine beside the parameters).
int64_t ModelStep(const std::string& dir) {
  torch::serialize::InputArchive archive;
  archive.load_from(dir + "/model.pt");
  torch::Tensor step;
  EXPECT_TRUE(archive.try_read("dpkit_next_step", step));
  return step.item<int64_t>();
}

// Asserts the invariant after any run (completed or killed); returns the ledger's steps.
int64_t ExpectLedgerCoversTheSavedModel(const std::string& dir, const std::string& when) {
  const int64_t ledger_steps = CompleteJsonLines(dir + "/ledger.jsonl");
  if (Exists(dir + "/checkpoint.json")) {
    std::ifstream in(dir + "/checkpoint.json");
    const nlohmann::json checkpoint = nlohmann::json::parse(in);
    EXPECT_LE(checkpoint.at("next_step").get<int64_t>(), ledger_steps) << when;
  }
  if (Exists(dir + "/model.pt")) {
    EXPECT_LE(ModelStep(dir), ledger_steps) << when;
  }
  return ledger_steps;
}

// The exact sequence of issue 21 (scaled down): a run with --max_steps, then a fresh run in
// the same directory killed mid-way, then --resume. Today's code resumed the first run's
// 24-step model beside the second run's 10-step ledger and under-counted.
TEST(ResumeSoundnessTest, AFreshRunNeverLeavesAnEarlierCheckpointBesideANewLedger) {
  const std::string data = MakeMnistData("issue21_data", 256, 20);
  TrainOptions first = MnistRun("issue21", data);
  first.max_steps = 24;
  ASSERT_EQ(RunInChild(first), 0);
  ASSERT_EQ(CompleteJsonLines(first.output_dir + "/ledger.jsonl"), 24);

  // A fresh run in the same directory without --overwrite is refused, leaving it intact.
  TrainOptions fresh = MnistRun("issue21", data);
  EXPECT_EQ(RunInChild(fresh), 2);
  EXPECT_EQ(CompleteJsonLines(first.output_dir + "/ledger.jsonl"), 24);
  ExpectLedgerCoversTheSavedModel(first.output_dir, "refused fresh run");

  // With --overwrite the old checkpoint goes before the new ledger starts: killed after 10
  // steps, nothing of the first run is left to resume.
  fresh.overwrite = true;
  EXPECT_EQ(RunInChild(fresh, KillAt(FaultPoint::kLedgerAppended, 9)), -SIGKILL);
  EXPECT_FALSE(Exists(first.output_dir + "/checkpoint.json"));
  EXPECT_FALSE(Exists(first.output_dir + "/model.pt"));
  EXPECT_EQ(CompleteJsonLines(first.output_dir + "/ledger.jsonl"), 10);
  TrainOptions resume = MnistRun("issue21", data);
  resume.resume = true;
  EXPECT_EQ(RunInChild(resume), 2);  // no checkpoint: refused, nothing trained
  EXPECT_EQ(ExpectLedgerCoversTheSavedModel(first.output_dir, "refused resume"), 10);

  // Killed after the first checkpoint instead: the resume continues the same ledger.
  EXPECT_EQ(RunInChild(fresh, KillAt(FaultPoint::kLedgerAppended, 20)), -SIGKILL);
  ExpectLedgerCoversTheSavedModel(first.output_dir, "killed at step 20");
  ASSERT_EQ(RunInChild(resume), 0);
  // Steps 0-15 (checkpointed), 16-20 accounted but lost, 16-31 again.
  EXPECT_EQ(ExpectLedgerCoversTheSavedModel(first.output_dir, "resumed"), kTotalSteps + 5);
  EXPECT_EQ(ReadJsonLines(first.output_dir + "/metrics.jsonl").back().at("step"), kTotalSteps);
}

// Every fault point, at steps drawn from a seeded generator, then resumes (themselves
// killed at a second drawn point) until a resume completes.
TEST(ResumeSoundnessTest, KillAtAnyPointThenResumeNeverUnderCounts) {
  const std::string data = MakeMnistData("kill_data", 256, 20);
  std::mt19937_64 engine(2026);
  std::uniform_int_distribution<int64_t> any_step(0, kTotalSteps - 1);
  std::uniform_int_distribution<int> any_point(0, 4);
  auto draw_step = [&](FaultPoint point) {
    // The checkpoint points are reached at next_step = 16 and 32.
    const bool checkpoint_point =
        point != FaultPoint::kLedgerAppended && point != FaultPoint::kUpdateApplied;
    return checkpoint_point ? kStepsPerEpoch * (1 + any_step(engine) % 2) : any_step(engine);
  };
  for (int p = 0; p < 5; ++p) {
    const FaultPoint first_point = static_cast<FaultPoint>(p);
    const std::string name = "kill_" + std::to_string(p);
    TrainOptions fresh = MnistRun(name, data);
    const int64_t first_step = draw_step(first_point);
    const std::string when = "killed at point " + std::to_string(p) + ", step " +
                             std::to_string(first_step);
    EXPECT_EQ(RunInChild(fresh, KillAt(first_point, first_step)), -SIGKILL) << when;
    ExpectLedgerCoversTheSavedModel(fresh.output_dir, when);
    TrainOptions resume = fresh;
    resume.resume = true;
    int result = -1;
    for (int attempt = 0; attempt < 4 && result != 0; ++attempt) {
      const FaultPoint point = static_cast<FaultPoint>(any_point(engine));
      const int64_t step = draw_step(point);
      // The last attempt runs to the end; earlier ones may be killed (or finish before
      // their point is reached, or be refused when nothing was checkpointed yet).
      result = attempt < 3 ? RunInChild(resume, KillAt(point, step)) : RunInChild(resume);
      ExpectLedgerCoversTheSavedModel(fresh.output_dir, when + ", resume " + std::to_string(attempt));
      if (result == 2) break;  // no checkpoint yet: refused, as nothing can be resumed
    }
    if (result == 2) {
      EXPECT_FALSE(Exists(fresh.output_dir + "/checkpoint.json")) << when;
      continue;
    }
    ASSERT_EQ(result, 0) << when;
    EXPECT_GE(CompleteJsonLines(fresh.output_dir + "/ledger.jsonl"), kTotalSteps) << when;
    EXPECT_EQ(ReadJsonLines(fresh.output_dir + "/metrics.jsonl").back().at("step"), kTotalSteps)
        << when;
  }
}

// A crash between the state files' renames and checkpoint.json's leaves a model newer than
// checkpoint.json: the resume continues from the model's own step (the ledger accounted it
// before the update), and no step is accounted twice.
TEST(ResumeSoundnessTest, CrashBeforeTheCheckpointRenameResumesAtTheModelsStep) {
  const std::string data = MakeMnistData("rename_data", 256, 20);
  TrainOptions fresh = MnistRun("rename", data);
  EXPECT_EQ(RunInChild(fresh, KillAt(FaultPoint::kStateRenamed, 2 * kStepsPerEpoch)), -SIGKILL);
  EXPECT_EQ(ModelStep(fresh.output_dir), 2 * kStepsPerEpoch);
  TrainOptions resume = fresh;
  resume.resume = true;
  resume.epochs = 3;
  ASSERT_EQ(RunInChild(resume), 0);
  EXPECT_EQ(ExpectLedgerCoversTheSavedModel(fresh.output_dir, "resumed"), 3 * kStepsPerEpoch);
}

// The ledger must not lag the checkpoint: a ledger cut back (e.g. an older copy restored
// beside a newer checkpoint) is refused.
TEST(ResumeSoundnessTest, ResumeRefusesALedgerShorterThanTheCheckpoint) {
  const std::string data = MakeMnistData("short_data", 256, 20);
  TrainOptions fresh = MnistRun("short", data);
  fresh.max_steps = 16;
  ASSERT_EQ(RunInChild(fresh), 0);
  std::vector<std::string> lines;
  {
    std::ifstream in(fresh.output_dir + "/ledger.jsonl");
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  {
    std::ofstream out(fresh.output_dir + "/ledger.jsonl", std::ios::trunc);
    for (size_t i = 0; i + 3 < lines.size(); ++i) out << lines[i] << "\n";
  }
  TrainOptions resume = fresh;
  resume.resume = true;
  resume.max_steps.reset();
  EXPECT_EQ(RunInChild(resume), 2);
  EXPECT_EQ(CompleteJsonLines(fresh.output_dir + "/ledger.jsonl"), 13);
}

}  // namespace
}  // namespace dpkit
