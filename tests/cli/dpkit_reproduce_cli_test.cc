// `dpkit reproduce --list` and `dpkit reproduce all --output_dir=DIR` end to end: every
// item's four files and index.html are written and link each other; the numbers are
// checked by //tools/reproduce:*_test (one test per item).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/cli/dpkit_runner.h"

namespace dpkit::testing {
namespace {

const std::vector<std::string> kItems = {"bu-fig2",        "bu-fig3",
                                         "bu-general-clt", "asoodeh-iterations",
                                         "asoodeh-region", "abadi-composition"};

TEST(DpkitReproduceCliTest, ListNamesEveryItem) {
  CliRun run = Dpkit("reproduce --list");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const std::string& name : kItems) EXPECT_NE(run.out.find(name), std::string::npos) << name;
  EXPECT_NE(run.out.find("gdp-table1"), std::string::npos);
  EXPECT_NE(run.out.find("all "), std::string::npos);
}

TEST(DpkitReproduceCliTest, RejectsMisusedFlags) {
  ExpectUsageError("reproduce all", "--output_dir");
  ExpectUsageError("reproduce gdp-table1 --output_dir=/tmp/x", "reproduce all");
  ExpectUsageError("reproduce --list gdp-table1", "--list takes no");
}

TEST(DpkitReproduceCliTest, AllWritesEveryTableFigureAndTheIndex) {
  const std::string dir = TempDir() + "/reproduce_all";
  CliRun run = Dpkit("reproduce all --output_dir=" + dir);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string index = ReadFile(dir + "/index.html");
  for (const std::string& name : kItems) {
    SCOPED_TRACE(name);
    EXPECT_NE(run.out.find(name + " "), std::string::npos);
    for (const char* ext : {".md", ".svg", ".csv"}) {
      EXPECT_FALSE(ReadFile(dir + "/" + name + ext).empty()) << ext;
      EXPECT_NE(index.find(name + ext), std::string::npos) << ext;
    }
    const auto json = nlohmann::json::parse(ReadFile(dir + "/" + name + ".json"));
    EXPECT_EQ(json["item"], name);
    EXPECT_EQ(json["agrees"], true);
    EXPECT_FALSE(json["rows"].empty());
    EXPECT_EQ(ReadFile(dir + "/" + name + ".svg").rfind("<svg ", 0), 0u);
  }
  for (const char* table : {"gdp-table1", "gdp-experiments"}) {
    const auto json = nlohmann::json::parse(ReadFile(dir + "/" + table + ".json"));
    EXPECT_EQ(json["agrees"], true) << table;
    EXPECT_NE(index.find(std::string(table) + ".md"), std::string::npos) << table;
  }
}

}  // namespace
}  // namespace dpkit::testing
