// Regression tests of issue 21 (crashes, exit codes, messages) and issue 15 (a report's
// headline is the certified bound, first; printed bounds rounded outward) through the
// built `dpkit` binary. Each test failed on the code before the fix it names.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/cli/dpkit_runner.h"

namespace {

using nlohmann::json;

using dpkit::testing::CliRun;
using dpkit::testing::CountLines;
using dpkit::testing::Dpkit;
using dpkit::testing::ExpectUsageError;
using dpkit::testing::TempDir;

std::string WriteLedger(const std::string& name, const std::string& event_json) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path) << "{\"type\":\"event\",\"event\":" << event_json << "}\n";
  return path;
}

// Issue 21: sigma 1e-20 at q = 1 aborted (json type_error.302) under --accountant=all in
// text and JSON; now every accountant answers or says why not, and no NaN is printed.
TEST(DpkitReliabilityTest, TinyNoiseAtRateOneDoesNotAbort) {
  const std::string args = "epsilon --sampling_rate=1 --noise_multiplier=1e-20 --steps=1";
  const CliRun text = Dpkit(args);
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.find("nan"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("headline: "), std::string::npos) << text.out;
  const CliRun as_json = Dpkit(args + " --format=json");
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const json out = json::parse(as_json.out);
  EXPECT_EQ(out["headline"]["accountant"], "rdp");
  EXPECT_TRUE(out["gdp"].contains("not_applicable")) << out.dump();
}

// Issue 21: a ledger event with noise multiplier 1e-300 aborted the same way; a file's
// events are now range-checked when read (accounting::CheckFileRanges): a usage error, in
// text and JSON, naming the range.
TEST(DpkitReliabilityTest, LedgerWithTinyNoiseIsAUsageErrorNotAnAbort) {
  const std::string path =
      WriteLedger("tiny.jsonl", R"({"type":"gaussian","noise_multiplier":1e-300})");
  for (const char* format : {"text", "json"}) {
    ExpectUsageError("ledger " + path + " --format=" + format,
                     "gaussian noise_multiplier must be >= 0.01 in a ledger or event file");
  }
}

// Issue 21: input errors exited 1 ("optimal RDP conversion did not converge"); the range is
// now checked at parse time and the message states the range enforced.
TEST(DpkitReliabilityTest, TinyDeltaIsAUsageErrorWithItsRange) {
  ExpectUsageError("epsilon --sampling_rate=0.01 --noise_multiplier=1 --steps=10 --delta=1e-320",
                   "--delta must be in [1e-300, 1), got ");
  const std::string path = WriteLedger("ok.jsonl", R"({"type":"gaussian","noise_multiplier":1})");
  ExpectUsageError("ledger " + path + " --delta=1e-320", "--delta must be in [1e-300, 1)");
  // 1e-300 itself is accepted (RDP answers; PLD says it needs delta >= 1e-100).
  const CliRun edge = Dpkit(
      "epsilon --sampling_rate=0.01 --noise_multiplier=1 --steps=10 --delta=1e-300 --format=json");
  ASSERT_EQ(edge.exit_code, 0) << edge.err;
  EXPECT_TRUE(json::parse(edge.out)["rdp"]["epsilon"].is_number());
}

TEST(DpkitReliabilityTest, TradeoffRefusesTinyDeltaAndTinyNoiseQuickly) {
  const std::string t = "tradeoff --sampling_rate=0.01 --steps=100";
  ExpectUsageError(t + " --noise_multiplier=1 --delta=1e-320", "--delta must be in [1e-100, 1)");
  const auto start = std::chrono::steady_clock::now();
  ExpectUsageError(t + " --noise_multiplier=1e-320", "--noise_multiplier");
  // It took 54 s (and exited 1): refused before any PLD is computed.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            10.0);
}

// Issue 21: a pure_dp event with epsilon 1e308 and a self_composed count of 2^62 exited 1.
TEST(DpkitReliabilityTest, HugeLedgerEventsAreUsageErrors) {
  const std::string pure = WriteLedger("pure.jsonl", R"({"type":"pure_dp","epsilon":1e308})");
  ExpectUsageError("ledger " + pure, "pure_dp epsilon must be in [0, 10000]");
  const std::string many = WriteLedger(
      "many.jsonl",
      R"({"type":"self_composed","count":4611686018427387904,)"
      R"("event":{"type":"gaussian","noise_multiplier":1}})");
  ExpectUsageError("ledger " + many, "nested self_composed counts multiply to at most");
}

// Issue 21: `sample laplace --scale=1e308` printed -inf; the range is checked up front.
TEST(DpkitReliabilityTest, SampleScaleIsBoundedSoNoSampleIsInfinite) {
  ExpectUsageError("sample laplace --scale=1e308", "--scale must be finite and in (0, 1e+300]");
  ExpectUsageError("sample gaussian --stddev=1e308", "--stddev must be finite and in (0, 1e+300]");
  const CliRun run = Dpkit("sample laplace --scale=1e300 --count=1000");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find("inf"), std::string::npos);
  EXPECT_EQ(CountLines(run.out), 1000);
}

// Issue 21: errors echoed a bad value in full (twice); now at most ~80 characters of it.
TEST(DpkitReliabilityTest, BadValuesAreEchoedShort) {
  const std::string long_value(5000, 'x');
  for (const std::string& args :
       {"epsilon --delta=" + long_value, "epsilon --format=" + long_value,
        "epsilon --" + long_value + "=1", "epsilon --accountant=" + long_value}) {
    const CliRun run = Dpkit(args);
    EXPECT_EQ(run.exit_code, 2) << args.substr(0, 40);
    EXPECT_EQ(CountLines(run.err), 1) << run.err.substr(0, 300);
    EXPECT_LT(run.err.size(), 400u) << run.err.substr(0, 300);
  }
}

// Issue 21: a file name with a newline gave a two-line error.
TEST(DpkitReliabilityTest, FileNameWithNewlineGivesOneLine) {
  const CliRun run = Dpkit("ledger \"$(printf 'no\\nsuch.jsonl')\"");
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_EQ(CountLines(run.err), 1) << run.err;
  EXPECT_NE(run.err.find("no\\nsuch.jsonl"), std::string::npos) << run.err;
}

// Issue 21 item 3 and issue 15 item 7: the headline is the smallest certified upper bound,
// named, first in the text and in the JSON; the approximate GDP line comes last.
TEST(DpkitReliabilityTest, HeadlineIsTheSmallestCertifiedBoundFirst) {
  const std::string args =
      "epsilon --dataset_size=60000 --batch_size=256 --noise_multiplier=1.1 --epochs=60 "
      "--delta=1e-5";
  const CliRun as_json = Dpkit(args + " --format=json");
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const json out = json::parse(as_json.out);
  const double pld = out["pld"]["epsilon_upper"].get<double>();
  const double rdp = out["rdp"]["epsilon"].get<double>();
  EXPECT_EQ(out["headline"]["accountant"], pld <= rdp ? "pld" : "rdp");
  EXPECT_EQ(out["headline"]["epsilon"].get<double>(), std::min(pld, rdp));
  const CliRun text = Dpkit(args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const size_t headline = text.out.find("\nheadline: epsilon <= ");
  ASSERT_NE(headline, std::string::npos) << text.out;
  // The printed headline, read back, is at least the certified bound (rounded up).
  const double printed =
      std::strtod(text.out.c_str() + headline + std::string("\nheadline: epsilon <= ").size(),
                  nullptr);
  EXPECT_GE(printed, std::min(pld, rdp));
  const size_t gdp = text.out.find("\ngdp: ");
  ASSERT_NE(gdp, std::string::npos);
  EXPECT_GT(gdp, text.out.find("\nrdp: "));
  EXPECT_GT(gdp, text.out.find("\npld: "));
  EXPECT_NE(text.out.find("CLT APPROXIMATION", gdp), std::string::npos);
}

// Issue 15 item 3: `dpkit train --help` still works through the training binary, and a
// missing training binary is one line, not a crash.
TEST(DpkitReliabilityTest, TrainHelpRunsTheTrainingBinary) {
  const CliRun help = Dpkit("train --help");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("Usage: dpkit train MODEL"), std::string::npos) << help.out;
  const CliRun missing = Dpkit("train --help", "DPKIT_TRAIN_BINARY=/nonexistent/dpkit_train");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(CountLines(missing.err), 1) << missing.err;
  EXPECT_NE(missing.err.find("/nonexistent/dpkit_train"), std::string::npos) << missing.err;
}

// Issue 21: `tradeoff --output=/dev/full` exited 0 and replaced /dev/full with a regular
// file; a symlink given as --output was replaced too. Now the device is written into (its
// error is a one-line usage error, exit 2) and a link keeps pointing at its file.
TEST(DpkitReliabilityTest, TradeoffOutputRespectsSpecialFilesAndSymlinks) {
  const std::string args = "tradeoff --sampling_rate=0.01 --noise_multiplier=1 --steps=100 ";
  ExpectUsageError(args + "--output=/dev/full", "No space left on device");
  struct stat info;
  ASSERT_EQ(::stat("/dev/full", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  const std::string target = TempDir() + "/curves.csv";
  const std::string link = TempDir() + "/curves_link.csv";
  std::ofstream(target) << "old\n";
  ::unlink(link.c_str());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  const CliRun run = Dpkit(args + "--output=" + link);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(::lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  std::ifstream in(target);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "curve,alpha,beta");
}

}  // namespace
