// End-to-end tests of `dpkit account FILE|-` and `dpkit ledger -`: an event tree in
// dp_accounting's spelling, read from standard input, is accounted exactly as `dpkit
// epsilon` accounts the same DP-SGD run (Bu et al. 2020, Table 1 rows), and a ledger read
// from standard input exactly as the same ledger read from a file.
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/cli/dpkit_runner.h"

namespace {

using dpkit::testing::CliRun;
using dpkit::testing::Dpkit;
using dpkit::testing::ExpectUsageError;
using dpkit::testing::TempDir;
using nlohmann::json;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

struct Row {
  const char* noise_multiplier;
  const char* epochs;
};

// Bu, Dong, Long, Su 2020, Table 1: MNIST, batch 256 of 60000, delta = 1e-5.
constexpr Row kTable1[] = {{"1.3", "15"}, {"1.1", "60"}, {"0.7", "45"},
                           {"0.6", "62"}, {"0.55", "68"}, {"0.5", "100"}};

class AccountTable1Test : public ::testing::TestWithParam<Row> {};

TEST_P(AccountTable1Test, DpAccountingSpellingOnStdinEqualsEpsilonCommand) {
  const Row row = GetParam();
  CliRun flags = Dpkit(std::string("epsilon --dataset_size=60000 --batch_size=256 --noise_multiplier=") +
                       row.noise_multiplier + " --epochs=" + row.epochs + " --delta=1e-5 --format=json");
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  const json expected = json::parse(flags.out);
  const json& input = expected["input"];
  // The same run in dp_accounting's spelling; doubles written in round-trip form.
  const json event = {
      {"SelfComposedDpEvent",
       {{"count", input["steps"]},
        {"event",
         {{"PoissonSampledDpEvent",
           {{"sampling_probability", input["sampling_rate"]},
            {"event", {{"GaussianDpEvent", {{"noise_multiplier", input["noise_multiplier"]}}}}}}}}}}}};
  const std::string path = WriteFile("table1.json", event.dump());
  CliRun account = Dpkit("account - --delta=1e-5 --format=json < " + path);
  ASSERT_EQ(account.exit_code, 0) << account.err;
  const json actual = json::parse(account.out);
  for (const char* key : {"rdp", "pld", "gdp", "headline"}) {
    ASSERT_TRUE(expected.contains(key)) << key;
    EXPECT_EQ(actual[key], expected[key]) << key;  // exact: same doubles
  }
  EXPECT_EQ(actual["input"]["file"], "-");
  EXPECT_EQ(actual["input"]["event"]["type"], "self_composed");
}

INSTANTIATE_TEST_SUITE_P(Table1, AccountTable1Test, ::testing::ValuesIn(kTable1));

TEST(DpkitAccountTest, DpkitSpellingFromFileAndDeltaAtEpsilon) {
  const std::string path = WriteFile(
      "laplace.json", R"({"type":"self_composed","count":100,"event":{"type":"laplace","scale":100}})");
  CliRun run = Dpkit("account " + path + " --epsilon=1 --format=json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json out = json::parse(run.out);
  EXPECT_EQ(out["input"]["epsilon"], 1.0);
  EXPECT_TRUE(out.contains("headline"));
  CliRun text = Dpkit("account " + path);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("headline"), std::string::npos);
}

TEST(DpkitAccountTest, BadInputIsOneUsageLine) {
  ExpectUsageError("account", "expected exactly one event FILE");
  ExpectUsageError("account " + TempDir() + "/absent.json", "cannot open event file");
  const std::string unsupported = WriteFile("noop.json", R"({"NoOpDpEvent": {}})");
  ExpectUsageError("account - < " + unsupported, "NoOpDpEvent is not supported");
  const std::string bad = WriteFile("bad.json", R"({"GaussianDpEvent": {"noise_multiplier": -1}})");
  ExpectUsageError("account " + bad, "noise_multiplier");
  ExpectUsageError("account " + bad + " --delta=1e-5 --epsilon=1", "not both");
}

TEST(DpkitLedgerStdinTest, StdinEqualsFile) {
  std::string text;
  for (int step = 0; step < 50; ++step) {
    text += "{\"type\":\"sample\",\"step\":" + std::to_string(step) +
            ",\"sampling_rate\":0.01,\"queries\":[{\"clip_norm\":1,\"noise_stddev\":1.1}]}\n";
  }
  text += "\n{\"type\":\"event\",\"event\":{\"type\":\"laplace\",\"scale\":20}}\n";
  const std::string path = WriteFile("ledger.jsonl", text);
  CliRun from_file = Dpkit("ledger " + path + " --format=json");
  CliRun from_stdin = Dpkit("ledger - --format=json < " + path);
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  json a = json::parse(from_file.out), b = json::parse(from_stdin.out);
  EXPECT_EQ(a["input"]["entries"], 51);
  a.erase("input");
  b.erase("input");
  EXPECT_EQ(a, b);
  const std::string broken = WriteFile("broken.jsonl", text + "{\"type\":\"sampel\"}\n");
  ExpectUsageError("ledger - < " + broken, "standard input line 53");
}

// Fixed-size steps (`dpkit train --sampler=fixed_size`: one SampledWithoutReplacement event
// line per step, replace-one adjacency): `dpkit ledger` merges them and reports the PLD
// interval (upper bound from C_p(f), lower bound from an explicit pair of datasets) beside
// RDP, exactly as `dpkit account` reports the merged event; PLD's upper bound heads it.
TEST(DpkitLedgerStdinTest, FixedSizeStepsAreAccountedByPldAndRdp) {
  const std::string step =
      R"({"type":"sampled_without_replacement","population":60000,"sample_size":256,)"
      R"("event":{"type":"gaussian","noise_multiplier":0.55}})";
  std::string text;
  for (int i = 0; i < 200; ++i) text += "{\"type\":\"event\",\"event\":" + step + "}\n";
  const std::string ledger = WriteFile("fixed.jsonl", text);
  const std::string event =
      WriteFile("fixed.json", R"({"type":"self_composed","count":200,"event":)" + step + "}");
  CliRun from_ledger = Dpkit("ledger " + ledger + " --format=json");
  CliRun from_event = Dpkit("account " + event + " --format=json");
  ASSERT_EQ(from_ledger.exit_code, 0) << from_ledger.err;
  ASSERT_EQ(from_event.exit_code, 0) << from_event.err;
  json a = json::parse(from_ledger.out), b = json::parse(from_event.out);
  for (const char* key : {"rdp", "pld", "headline"}) EXPECT_EQ(a[key], b[key]) << key;
  const json& pld = a["pld"];
  ASSERT_TRUE(pld.contains("epsilon_upper")) << a.dump();
  EXPECT_LT(pld["epsilon_lower"].get<double>(), pld["epsilon_upper"].get<double>());
  EXPECT_LT(pld["epsilon_upper"].get<double>(), a["rdp"]["epsilon"].get<double>());
  EXPECT_EQ(a["headline"]["accountant"], "pld");
  EXPECT_TRUE(a["gdp"].contains("not_applicable"));
}

TEST(DpkitDeltaWarningTest, WarnsOnOneStderrLineWhenDeltaIsNotBelowOneOverN) {
  const std::string run = "epsilon --dataset_size=1000 --batch_size=10 --noise_multiplier=1 --steps=10 "
                          "--accountant=rdp --format=json";
  CliRun at = Dpkit(run + " --delta=1e-3");  // delta = 1/n
  ASSERT_EQ(at.exit_code, 0) << at.err;
  EXPECT_EQ(dpkit::testing::CountLines(at.err), 1);
  EXPECT_NE(at.err.find("warning: --delta=0.001 is not below 1/n = 1/1000"), std::string::npos) << at.err;
  EXPECT_TRUE(json::parse(at.out).contains("rdp"));  // the report is still printed
  CliRun below = Dpkit(run + " --delta=9.99e-4");
  ASSERT_EQ(below.exit_code, 0) << below.err;
  EXPECT_EQ(below.err, "");
  CliRun rate_only = Dpkit("epsilon --sampling_rate=0.01 --noise_multiplier=1 --steps=10 --delta=0.5");
  ASSERT_EQ(rate_only.exit_code, 0) << rate_only.err;
  EXPECT_EQ(rate_only.err, "");  // no dataset size given: nothing to compare with
  CliRun tradeoff = Dpkit("tradeoff --dataset_size=1000 --batch_size=10 --noise_multiplier=1 --steps=10 "
                          "--delta=0.01 --points=3");
  ASSERT_EQ(tradeoff.exit_code, 0) << tradeoff.err;
  EXPECT_EQ(dpkit::testing::CountLines(tradeoff.err), 1);
}

}  // namespace
