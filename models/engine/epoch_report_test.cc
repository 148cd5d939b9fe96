#include "dpkit/models/engine/epoch_report.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {
namespace {

TEST(EpochLabelTest, CountsWholeEpochsAndSteps) {
  // MNIST row 1: 235 steps per epoch, 15 epochs.
  EXPECT_EQ(EpochLabel(235, 235, 3525), "epoch 1/15 (step 235/3525)");
  EXPECT_EQ(EpochLabel(3525, 235, 3525), "epoch 15/15 (step 3525/3525)");
  // A last epoch cut short (the fraction 14.96 of before) is still epoch 15 of 15.
  EXPECT_EQ(EpochLabel(3516, 235, 3516), "epoch 15/15 (step 3516/3516)");
  // --max_steps stopping in the first epoch.
  EXPECT_EQ(EpochLabel(6, 8, 6), "epoch 1/1 (step 6/6)");
}

// A ledger of `steps` DP-SGD steps at q = 0.01, sigma = `sigma`, C = 1.
std::string WriteLedger(const std::string& name, int64_t steps, double sigma) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream out(path, std::ios::trunc);
  for (int64_t i = 0; i < steps; ++i) {
    out << nlohmann::json{{"type", "sample"},
                          {"step", i},
                          {"sampling_rate", 0.01},
                          {"queries", {{{"clip_norm", 1.0}, {"noise_stddev", sigma}}}}}
               .dump()
        << "\n";
  }
  return path;
}

std::string Reported(const RunPlan& plan, bool json, const std::string& ledger) {
  EpochReport report(plan, json, ledger, "");
  testing::internal::CaptureStdout();
  const absl::Status status =
      report.Report(plan.total_steps, {{"train_loss", 0.5}}, "train loss 0.5000", 1.0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// The text line: the label, then the certified headline rounded UP at its printed precision
// (a printed upper bound below the certified one would be a false statement).
TEST(EpochReportTest, TextLineStartsWithTheLabelAndTheBoundRoundedUp) {
  for (const double sigma : {0.8, 1.1, 1.7, 3.0}) {
    SCOPED_TRACE(sigma);
    RunPlan plan;
    plan.model = "mnist";
    plan.privacy.noise_multiplier = sigma;
    plan.privacy.sampling_rate = 0.01;
    plan.privacy.delta = 1e-5;
    plan.step.sampler = "poisson";
    plan.steps_per_epoch = 100;
    plan.total_steps = 300;
    const std::string ledger = WriteLedger("report_ledger.jsonl", 300, sigma);
    const nlohmann::json line = nlohmann::json::parse(Reported(plan, true, ledger));
    const double certified = line.at("epsilon").at("headline").at("epsilon").get<double>();
    EXPECT_EQ(line.at("total_steps"), 300);
    const std::string text = Reported(plan, false, ledger);
    const std::string head = "epoch 3/3 (step 300/300): eps <= ";
    ASSERT_EQ(text.rfind(head, 0), 0u) << text;
    const double printed = std::stod(text.substr(head.size()));
    EXPECT_GE(printed, certified) << text;
    EXPECT_LE(printed, certified * (1 + 1e-3)) << text;
    EXPECT_NE(text.find("; train loss 0.5000, 1.0 s"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace dpkit::models
