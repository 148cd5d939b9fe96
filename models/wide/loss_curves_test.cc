#include "dpkit/models/wide/loss_curves.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "dpkit/models/wide/wide_testing.h"

namespace dpkit::models::wide {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(LossCurvesTest, CsvHasOneRowPerEpoch) {
  const std::string path = TestPath("loss.csv");
  ASSERT_TRUE(WriteLossCsv(path, {{"train", {2.5, 2.0}}, {"test", {3.0, 2.75}}}).ok());
  EXPECT_EQ(ReadAll(path), "epoch,train,test\n1,2.5,3\n2,2,2.75\n");
  std::ifstream temp(path + ".tmp");
  EXPECT_FALSE(temp.good()) << "temporary file left behind";
}

TEST(LossCurvesTest, SvgHasOnePolylinePerCurveAndLegend) {
  const std::string path = TestPath("loss.svg");
  ASSERT_TRUE(WriteLossSvg(path, "t", {{"train", {2.5, 2.0, 1.0}}, {"test", {3.0, NAN, 2.0}}}).ok());
  const std::string svg = ReadAll(path);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  size_t count = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 2u);
  EXPECT_NE(svg.find(">train</text>"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(LossCurvesTest, UnwritableDirectoryIsAnError) {
  EXPECT_FALSE(WriteLossCsv("/nonexistent_dir/x.csv", {{"a", {1}}}).ok());
}

}  // namespace
}  // namespace dpkit::models::wide
