#include "dpkit/models/wide/movielens.h"

#include "gtest/gtest.h"
#include "dpkit/models/wide/wide_testing.h"

namespace dpkit::models::wide {
namespace {

TEST(MovieLensTest, ReadsRatingsAndRemapsIds) {
  const std::string path = WriteTestFile(
      "ratings.dat", "1::1193::5::978300760\n1::661::3::978302109\n7::1193::4::978300275\n");
  auto data = ReadMovieLensRatings(path);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_users, 2);
  EXPECT_EQ(data->num_movies, 2);
  ASSERT_EQ(data->ratings.size(), 3u);
  EXPECT_EQ(data->ratings[2].user, 1);
  EXPECT_EQ(data->ratings[2].movie, 0);
  EXPECT_EQ(data->ratings[2].rating, 4.0f);
}

TEST(MovieLensTest, ErrorsNameTheLine) {
  struct Case {
    std::string text, message;
  } cases[] = {{"1::2::3::4\n1::2::3\n", ":2: expected"},
               {"1::2::6::4\n", "[1, 5]"},
               {"0::2::3::4\n", "UserID"},
               {"1::x::3::4\n", "MovieID"},
               {"1,2,3,4\n", "expected"}};
  for (const Case& c : cases) {
    auto data = ReadMovieLensRatings(WriteTestFile("bad.dat", c.text));
    ASSERT_FALSE(data.ok()) << c.text;
    EXPECT_NE(data.status().message().find(c.message), std::string::npos)
        << data.status().message();
  }
}

}  // namespace
}  // namespace dpkit::models::wide
