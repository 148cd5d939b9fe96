#include "dpkit/models/wide/libsvm.h"

#include "gtest/gtest.h"
#include "dpkit/models/wide/wide_testing.h"

namespace dpkit::models::wide {
namespace {

TEST(LibsvmTest, ReadsLabelsAndSparseFeatures) {
  const std::string path =
      WriteTestFile("a.libsvm", "-1 3:1 5:1 123:1\n+1 1:1 2:0.5\n\n0 4:1\r\n");
  auto data = ReadLibsvm(path, 123);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->labels, (std::vector<int>{0, 1, 0}));
  ASSERT_EQ(data->features.size(), 3u * 123u);
  EXPECT_EQ(data->features[2], 1.0f);
  EXPECT_EQ(data->features[122], 1.0f);
  EXPECT_EQ(data->features[123 + 1], 0.5f);
  EXPECT_EQ(data->features[2 * 123 + 3], 1.0f);
  EXPECT_EQ(data->features[2 * 123 + 2], 0.0f);
}

TEST(LibsvmTest, ErrorsNameTheLine) {
  struct Case {
    std::string text, message;
  } cases[] = {{"+1 1:1\n2 3:1\n", ":2: label"},
               {"+1 1:1\n-1 124:1\n", "[1, 123]"},
               {"+1 5:1 3:1\n", "increasing"},
               {"+1 x\n", "index:value"},
               {"+1 1:nan\n", "finite"},
               {"", "no examples"}};
  for (const Case& c : cases) {
    auto data = ReadLibsvm(WriteTestFile("bad.libsvm", c.text), 123);
    ASSERT_FALSE(data.ok()) << c.text;
    EXPECT_NE(data.status().message().find(c.message), std::string::npos)
        << data.status().message();
  }
  EXPECT_EQ(ReadLibsvm(TestPath("missing"), 123).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dpkit::models::wide
