// `dpkit train imdb | movielens | adult` through the binary: registered, and a bad
// --data_dir is a usage error (exit 2, one line on stderr naming the file and the flag).
// Training itself is tested in models/wide/*_trainer_test.
#include <string>

#include "gtest/gtest.h"
#include "dpkit/tests/cli/dpkit_runner.h"

namespace dpkit::testing {
namespace {

TEST(DpkitTrainWideCliTest, HelpListsTheWideTrainers) {
  const CliRun run = Dpkit("train --help");
  const std::string text = run.out + run.err;
  for (const char* model : {"adult", "imdb", "movielens"}) {
    EXPECT_NE(text.find(std::string("\n  ") + model + "  "), std::string::npos) << model;
  }
}

TEST(DpkitTrainWideCliTest, MissingDataDirIsAUsageError) {
  const std::string missing = TempDir() + "/no_such_data";
  ExpectUsageError("train imdb --data_dir=" + missing, "cannot open IMDb folder " + missing);
  ExpectUsageError("train imdb --data_dir=" + missing, "--data_dir");
  ExpectUsageError("train movielens --data_dir=" + missing, missing + "/ratings.dat");
  ExpectUsageError("train movielens --data_dir=" + missing, "--data_dir");
  ExpectUsageError("train adult --data_dir=" + missing, missing + "/a9a");
  ExpectUsageError("train adult --data_dir=" + missing, "--data_dir");
}

TEST(DpkitTrainWideCliTest, BadAdultSplitIsAUsageError) {
  ExpectUsageError("train adult --adult_split=random", "--adult_split must be kfold or a9a");
}

}  // namespace
}  // namespace dpkit::testing
