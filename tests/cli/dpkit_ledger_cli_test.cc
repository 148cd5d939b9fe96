// End-to-end tests of `dpkit ledger FILE`: a ledger written as JSON lines is accounted
// exactly like the equivalent `dpkit epsilon` flags, and bad ledgers exit 2 with one line.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/cli/dpkit_runner.h"

namespace {

using nlohmann::json;

using dpkit::testing::CliRun;
using dpkit::testing::Dpkit;
using dpkit::testing::ExpectUsageError;
using dpkit::testing::TempDir;

std::string WriteLedger(const std::string& name, const std::string& text) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string SampleLine(int step, double rate, const std::string& queries) {
  return "{\"type\":\"sample\",\"step\":" + std::to_string(step) +
         ",\"sampling_rate\":" + std::to_string(rate) + ",\"queries\":[" + queries + "]}\n";
}

TEST(DpkitLedgerTest, AccountsLikeTheEquivalentEpsilonCommand) {
  // 200 steps at q = 0.01, each with two sum queries (clip 1, noise std 2): the
  // collapsed noise multiplier is (2 * (1/2)^2)^(-1/2) = sqrt 2 (McMahan et al. 2018,
  // eq. 1).
  std::string text;
  for (int step = 0; step < 200; ++step) {
    text += SampleLine(step, 0.01,
                       "{\"clip_norm\":1,\"noise_stddev\":2},"
                       "{\"clip_norm\":1,\"noise_stddev\":2}");
  }
  const std::string path = WriteLedger("two_queries.jsonl", text);
  CliRun ledger = Dpkit("ledger " + path + " --format=json --delta=1e-6");
  ASSERT_EQ(ledger.exit_code, 0) << ledger.err;
  CliRun flags = Dpkit(
      "epsilon --sampling_rate=0.01 --noise_multiplier=1.4142135623730951 --steps=200 "
      "--delta=1e-6 --format=json");
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  json a = json::parse(ledger.out), b = json::parse(flags.out);
  // The collapsed multiplier may differ from sqrt 2 in the last bit: 1e-12 relative.
  for (const char* accountant : {"rdp", "gdp"}) {
    const double x = a[accountant]["epsilon"].get<double>();
    const double y = b[accountant]["epsilon"].get<double>();
    EXPECT_NEAR(x, y, 1e-12 * y) << accountant;
  }
  EXPECT_EQ(a["gdp"]["approximate"], true);
  EXPECT_EQ(a["rdp"]["conversion"], "optimal");
  EXPECT_EQ(a["input"]["entries"], 200);

  // --epsilon reports delta instead.
  CliRun delta = Dpkit("ledger " + path + " --format=json --epsilon=1");
  ASSERT_EQ(delta.exit_code, 0) << delta.err;
  EXPECT_TRUE(json::parse(delta.out)["rdp"]["delta"].is_number());
  // Text output.
  CliRun text_run = Dpkit("ledger " + path);
  ASSERT_EQ(text_run.exit_code, 0) << text_run.err;
  EXPECT_NE(text_run.out.find("rdp: epsilon = "), std::string::npos) << text_run.out;
}

TEST(DpkitLedgerTest, GdpIsNotApplicableToLaplaceEvents) {
  const std::string path = WriteLedger(
      "laplace.jsonl", "{\"type\":\"event\",\"event\":{\"type\":\"laplace\",\"scale\":2}}\n");
  CliRun run = Dpkit("ledger " + path + " --format=json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json out = json::parse(run.out);
  EXPECT_TRUE(out["rdp"]["epsilon"].is_number());
  EXPECT_TRUE(out["gdp"].contains("not_applicable"));
  ExpectUsageError("ledger " + path + " --accountant=gdp", "--accountant=gdp");
}

std::string EventLines(int count, const std::string& event) {
  std::string text;
  for (int i = 0; i < count; ++i) text += "{\"type\":\"event\",\"event\":" + event + "}\n";
  return text;
}

TEST(DpkitLedgerTest, AccountsBoundedRangeEventsTighterThanPureDp) {
  const std::string br = WriteLedger(
      "bounded_range.jsonl", EventLines(100, R"({"type":"bounded_range","epsilon":0.1})"));
  const std::string pure =
      WriteLedger("pure_dp.jsonl", EventLines(100, R"({"type":"pure_dp","epsilon":0.1})"));
  CliRun br_run = Dpkit("ledger " + br + " --format=json --delta=1e-6");
  ASSERT_EQ(br_run.exit_code, 0) << br_run.err;
  CliRun pure_run = Dpkit("ledger " + pure + " --format=json --delta=1e-6");
  ASSERT_EQ(pure_run.exit_code, 0) << pure_run.err;
  json b = json::parse(br_run.out), p = json::parse(pure_run.out);
  // RDP: the exact bounded-range RDP is below the randomized-response RDP at every order.
  EXPECT_LT(b["rdp"]["epsilon"].get<double>(), p["rdp"]["epsilon"].get<double>());
  // PLD: the upper bound is that of pure DP (randomized response with 0.1), the lower
  // bound that of randomized response with 0.05, so it is strictly below the upper one.
  ASSERT_TRUE(b["pld"]["epsilon"].is_number()) << br_run.out;
  EXPECT_NEAR(b["pld"]["epsilon"].get<double>(), p["pld"]["epsilon"].get<double>(),
              1e-9 * p["pld"]["epsilon"].get<double>());
  EXPECT_LT(b["pld"]["epsilon_lower"].get<double>(),
            0.9 * b["pld"]["epsilon"].get<double>());
  EXPECT_TRUE(b["gdp"].contains("not_applicable"));
  CliRun text_run = Dpkit("ledger " + br);
  ASSERT_EQ(text_run.exit_code, 0) << text_run.err;
  EXPECT_NE(text_run.out.find("rdp: epsilon = "), std::string::npos) << text_run.out;
}

// Discrete Gaussian events (mechanisms' DiscreteGaussianMechanism and lattice
// GaussianMechanism): RDP (CKS zCDP; Poisson-sampled through the general bound) and the
// PLD accountant's certified interval; GDP does not claim them.
TEST(DpkitLedgerTest, AccountsDiscreteGaussianEventsWithRdpAndPld) {
  const std::string dg = R"({"type":"discrete_gaussian","sigma":2048,"sensitivity":1025})";
  const std::string path = WriteLedger(
      "discrete_gaussian.jsonl",
      EventLines(10, dg) +
          EventLines(5, R"({"type":"poisson_sampled","sampling_rate":0.1,"event":)" + dg + "}"));
  CliRun run = Dpkit("ledger " + path + " --format=json --delta=1e-6");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json out = json::parse(run.out);
  ASSERT_TRUE(out["rdp"]["epsilon"].is_number()) << run.out;
  ASSERT_TRUE(out["pld"]["epsilon"].is_number()) << run.out;
  const double upper = out["pld"]["epsilon"].get<double>();
  const double lower = out["pld"]["epsilon_lower"].get<double>();
  EXPECT_LE(lower, upper);
  EXPECT_GT(lower, 0.99 * upper);  // the default tolerance keeps the interval tight
  EXPECT_LT(upper, out["rdp"]["epsilon"].get<double>());
  ASSERT_TRUE(out["gdp"].contains("not_applicable")) << run.out;
  EXPECT_NE(out["gdp"]["not_applicable"].get<std::string>().find("discrete_gaussian"),
            std::string::npos)
      << run.out;
  ExpectUsageError(
      "ledger " + WriteLedger("bad_dg.jsonl",
                              EventLines(1, R"({"type":"discrete_gaussian","sigma":1,)"
                                            R"("sensitivity":0})")),
      "sensitivity must be an integer in [1, 2^40], got 0");
}

// The sparse DP-SGD step event (optim/sparse/sparse_dp_sgd.h StepEvent): a Poisson
// sample of a selection composed with a Gaussian, accounted by the general Poisson
// subsampling bound of the RDP accountant and by the PLD accountant (subsampling of the
// composed inner PLD).
TEST(DpkitLedgerTest, AccountsSparseDpSgdStepEvents) {
  const std::string step =
      R"({"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"composed","events":[)"
      R"({"type":"self_composed","count":10,"event":{"type":"bounded_range","epsilon":0.01}},)"
      R"({"type":"gaussian","noise_multiplier":1}]}})";
  const std::string path = WriteLedger("sparse_steps.jsonl", EventLines(300, step));
  CliRun run = Dpkit("ledger " + path + " --format=json --delta=1e-5");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json out = json::parse(run.out);
  const double eps = out["rdp"]["epsilon"].get<double>();
  // At least the epsilon of the Gaussian part alone (DP-SGD with the same q, z, steps)
  // and finite.
  CliRun gaussian = Dpkit(
      "epsilon --sampling_rate=0.01 --noise_multiplier=1 --steps=300 --delta=1e-5 "
      "--format=json");
  ASSERT_EQ(gaussian.exit_code, 0) << gaussian.err;
  EXPECT_GT(eps, json::parse(gaussian.out)["rdp"]["epsilon"].get<double>());
  EXPECT_LT(eps, 20.0);
  // The PLD accountant Poisson-samples the composed step too: a certified interval,
  // tighter than RDP, and its upper bound is above the Gaussian part's lower bound.
  ASSERT_TRUE(out["pld"]["epsilon"].is_number()) << run.out;
  const double pld_upper = out["pld"]["epsilon"].get<double>();
  EXPECT_LE(out["pld"]["epsilon_lower"].get<double>(), pld_upper);
  EXPECT_LT(pld_upper, eps);
  EXPECT_GT(pld_upper, json::parse(gaussian.out)["pld"]["epsilon_lower"].get<double>());
  CliRun delta = Dpkit("ledger " + path + " --format=json --epsilon=3");
  ASSERT_EQ(delta.exit_code, 0) << delta.err;
  EXPECT_TRUE(json::parse(delta.out)["rdp"]["delta"].is_number());
  ExpectUsageError("ledger " +
                       WriteLedger("bad_br.jsonl",
                                   EventLines(1, R"({"type":"bounded_range","epsilon":-1})")),
                   "epsilon must be finite and >= 0");
}

TEST(DpkitLedgerTest, RejectsBadLedgersAndArguments) {
  const std::string good = SampleLine(0, 0.01, "{\"clip_norm\":1,\"noise_stddev\":1}");
  const std::string malformed =
      WriteLedger("malformed.jsonl", good + "{\"type\":\"sample\",\"step\":1,,}\n" + good);
  ExpectUsageError("ledger " + malformed, "line 2");  // names the line number
  const std::string bad_rate = WriteLedger(
      "bad_rate.jsonl", SampleLine(0, 1.5, "{\"clip_norm\":1,\"noise_stddev\":1}") + good);
  ExpectUsageError("ledger " + bad_rate, "sampling_rate");
  ExpectUsageError("ledger " + TempDir() + "/does_not_exist.jsonl", "does_not_exist");
  ExpectUsageError("ledger", "FILE");
  ExpectUsageError("ledger a.jsonl b.jsonl", "FILE");
  const std::string ok = WriteLedger("ok.jsonl", good);
  ExpectUsageError("ledger " + ok + " --delta=2", "--delta must be in [1e-300, 1)");
  ExpectUsageError("ledger " + ok + " --epsilon=-1", "--epsilon must be finite and >= 0");
  ExpectUsageError("ledger " + ok + " --epsilon=1 --delta=1e-5", "not both");
  ExpectUsageError("ledger " + ok + " --steps=3", "unknown flag --steps");
}

}  // namespace
