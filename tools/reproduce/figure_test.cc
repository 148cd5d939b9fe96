#include "dpkit/tools/reproduce/figure.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "dpkit/base/files.h"
#include "gtest/gtest.h"
#include "dpkit/tools/reproduce/item.h"

namespace dpkit::tools::reproduce {
namespace {

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

Figure TwoSeries() {
  Figure f{"a <b> & \"c\"", "x", "y", false, true, {}};
  f.series.push_back(Series{"first", {1, 2, 3}, {1e-3, 1e-2, 0.1}});
  f.series.push_back(Series{"second (approx.)", {1, 2, 3}, {0, 1e-20, 1}, true});
  return f;
}

TEST(FigureTest, SvgHasOnePolylinePerSeriesAndEscapesText) {
  const std::string svg = FigureSvg(TwoSeries());
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<polyline"), 2);
  EXPECT_EQ(Count(svg, "stroke-dasharray"), 2);  // the dashed curve and its legend line
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_EQ(svg, FigureSvg(TwoSeries()));  // deterministic
}

TEST(FigureTest, LogAxisAndLowerLimitSkipPointsTheyCannotDraw) {
  Figure f = TwoSeries();
  // The zero of the second series is skipped on the log axis: 2 points drawn, not 3.
  std::string svg = FigureSvg(f);
  const size_t second = svg.find("points=\"", svg.find("<polyline", svg.find("<polyline") + 1));
  const std::string points = svg.substr(second, svg.find('"', second + 8) - second);
  EXPECT_EQ(Count(points, ","), 2);
  f.y_min = 1e-6;  // now 1e-20 is below the axis too
  svg = FigureSvg(f);
  const size_t again = svg.find("points=\"", svg.find("<polyline", svg.find("<polyline") + 1));
  EXPECT_EQ(Count(svg.substr(again, svg.find('"', again + 8) - again), ","), 1);
  EXPECT_EQ(svg.find("1e-20"), std::string::npos);
}

TEST(FigureTest, CsvHasOneRowPerPointWithRoundTripValues) {
  const std::string csv = FigureCsv(TwoSeries());
  EXPECT_EQ(csv.rfind("series,x,y\n", 0), 0u);
  EXPECT_EQ(Count(csv, "\n"), 7);
  EXPECT_NE(csv.find("\"first\",2,0.01\n"), std::string::npos);
  EXPECT_NE(csv.find("\"second (approx.)\",2,1e-20\n"), std::string::npos);
}

absl::StatusOr<ItemResult> TinyItem() {
  ItemResult r;
  r.table.columns = {"a", "b"};
  r.table.rows = {{"1", "2"}};
  r.table.json_rows = nlohmann::json::array({{{"a", 1}, {"b", 2}}});
  r.notes = "notes";
  r.figure = TwoSeries();
  return r;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(FigureTest, WriteItemWritesTheFourFilesAndIndexLinksThem) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  const std::string dir = base::Join(tmp, "reproduce");
  ASSERT_TRUE(base::MakeDirs(dir).ok());
  const Item item{"tiny", "A paper, Fig. 1", "look here", &TinyItem};
  auto result = item.run();
  ASSERT_TRUE(result.ok());
  ASSERT_TRUE(WriteItem(dir, item, *result).ok());
  const std::string md = ReadFile(dir + "/tiny.md");
  EXPECT_NE(md.find("| a | b |\n|---|---|\n| 1 | 2 |\n"), std::string::npos);
  EXPECT_NE(md.find("![tiny](tiny.svg)"), std::string::npos);
  const auto json = nlohmann::json::parse(ReadFile(dir + "/tiny.json"));
  EXPECT_EQ(json["item"], "tiny");
  EXPECT_EQ(json["rows"][0]["b"], 2);
  EXPECT_EQ(ReadFile(dir + "/tiny.svg"), FigureSvg(result->figure));
  EXPECT_EQ(ReadFile(dir + "/tiny.csv"), FigureCsv(result->figure));
  EXPECT_FALSE(base::PathExists(dir + "/tiny.svg.tmp"));
  const std::string html = IndexHtml({&item}, {true}, {{"gdp-table1", "Table 1"}});
  for (const char* link : {"tiny.svg", "tiny.md", "tiny.json", "tiny.csv", "look here",
                           "gdp-table1.md", "gdp-table1.json"}) {
    EXPECT_NE(html.find(link), std::string::npos) << link;
  }
}

TEST(FigureTest, EveryItemHasAUniqueNameAndALineOnWhatToLookAt) {
  std::set<std::string> names;
  for (const Item& item : Items()) {
    EXPECT_TRUE(names.insert(item.name).second) << item.name;
    EXPECT_GT(std::string(item.look_at).size(), 20u) << item.name;
  }
  EXPECT_EQ(names.size(), 6u);
}

}  // namespace
}  // namespace dpkit::tools::reproduce
