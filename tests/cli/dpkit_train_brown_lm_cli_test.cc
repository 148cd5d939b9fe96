// `dpkit train brown-lm --help` states the model's defaults, its privacy unit and its own
// flags, and those stated defaults are the behaviour: each given as --flag=VALUE yields the
// same run header (n, q, sigma, C, optimizer, learning rate, steps, delta) as the run
// without it. One DP step each, on a small tagged-Brown-format corpus written here.
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "dpkit/tests/cli/dpkit_runner.h"
#include "gtest/gtest.h"

namespace dpkit::testing {
namespace {

// Files xa01..xa12 of 60 short sentences each (word/tag tokens): 8 x 40 training windows
// of 9 words, more than the default batch size.
std::string MakeBrownCorpus() {
  const std::string dir = TempDir() + "/help_brown";
  mkdir(dir.c_str(), 0755);
  for (int f = 1; f <= 12; ++f) {
    std::ofstream out(dir + "/xa" + (f < 10 ? "0" : "") + std::to_string(f));
    for (int s = 0; s < 60; ++s) {
      out << "\n\n\tThe/at cat/nn " << (s % 2 ? "sees" : "likes") << "/vbz the/at dog/nn ./.\n";
    }
  }
  return dir;
}

// The flags of the help text with a stated default: name -> default.
std::map<std::string, std::string> StatedDefaults(const std::string& help) {
  std::map<std::string, std::string> out;
  std::stringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("default: ");
    if (line.rfind("  --", 0) != 0 || at == std::string::npos) continue;
    const size_t end = line.find_first_of(";)", at);
    out[line.substr(4, line.find(' ', 4) - 4)] = line.substr(at + 9, end - at - 9);
  }
  return out;
}

TEST(DpkitTrainBrownLmTest, HelpStatesTheDefaultsThePrivacyUnitAndTheModelFlags) {
  const CliRun help = Dpkit("train brown-lm --help");
  ASSERT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("privacy unit: one window of --lm_context + 1 consecutive words"),
            std::string::npos)
      << help.out;
  const std::map<std::string, std::string> stated = StatedDefaults(help.out);
  const std::map<std::string, std::string> expected = {
      {"noise_multiplier", "0.6"}, {"batch_size", "256"},
      {"clip_norm", "1"},          {"epochs", "3"},
      {"optimizer", "adam"},       {"learning_rate", "0.003"},
      {"delta", "1e-05"},          {"lm_context", "32"},
      {"lm_vocabulary", "2000"}};
  for (const auto& [name, value] : expected) {
    ASSERT_TRUE(stated.count(name)) << name << "\n" << help.out;
    EXPECT_EQ(stated.at(name), value) << name;
  }
  const std::string args =
      "train brown-lm --data_dir=" + MakeBrownCorpus() +
      " --max_steps=1 --threads=1 --lm_context=8 --lm_dim=16 --lm_layers=1 --lm_heads=2";
  const CliRun base = Dpkit(args);
  ASSERT_EQ(base.exit_code, 0) << base.err;
  const std::string header = base.out.substr(0, base.out.find('\n'));
  EXPECT_EQ(header.rfind("dpkit train brown-lm: n=", 0), 0u) << base.out;
  for (const char* name : {"learning_rate", "clip_norm", "noise_multiplier", "batch_size", "epochs",
                           "optimizer", "delta"}) {
    SCOPED_TRACE(name);
    const CliRun given = Dpkit(args + " --" + name + "=" + stated.at(name));
    ASSERT_EQ(given.exit_code, 0) << given.err;
    EXPECT_EQ(given.out.substr(0, given.out.find('\n')), header);
  }
}

TEST(DpkitTrainBrownLmTest, ListedAndAMissingCorpusIsAUsageError) {
  const CliRun run = Dpkit("train --help");
  EXPECT_NE((run.out + run.err).find("\n  brown-lm  "), std::string::npos) << run.out;
  const std::string missing = TempDir() + "/no_such_corpus";
  ExpectUsageError("train brown-lm --data_dir=" + missing, "cannot open Brown corpus directory");
  ExpectUsageError("train brown-lm --data_dir=" + missing, "--data_dir");
}

}  // namespace
}  // namespace dpkit::testing
