#include "dpkit/models/wide/imdb.h"

#include "gtest/gtest.h"
#include "dpkit/models/wide/wide_testing.h"

namespace dpkit::models::wide {
namespace {

TEST(ImdbTest, TokenizesLikeKeras) {
  EXPECT_EQ(TokenizeReview("Great film!<br /><br />I didn't LIKE it, 10/10."),
            (std::vector<std::string>{"great", "film", "i", "didn't", "like", "it", "10", "10"}));
}

TEST(ImdbTest, ReadsFolderLayoutWithVocabularyAndPadding) {
  const std::string root = TestPath("aclImdb");
  for (std::string d : {"", "/train", "/test", "/train/pos", "/train/neg", "/test/pos",
                        "/test/neg"}) {
    MakeTestDirectory(root + d);
  }
  WriteTestFile("aclImdb/train/pos/0_9.txt", "good good film");
  WriteTestFile("aclImdb/train/neg/0_1.txt", "bad bad bad");
  WriteTestFile("aclImdb/test/pos/0_8.txt", "film good unseen good");
  WriteTestFile("aclImdb/test/neg/0_2.txt", "bad");
  auto data = ReadImdb(root, 2, 3);
  ASSERT_TRUE(data.ok()) << data.status();
  // Vocabulary of size 2: bad (3) -> 2, good (2) -> 3; film is out of vocabulary (1).
  // Length 3 as Keras' pad_sequences: the last 3 tokens, zeros in front.
  EXPECT_EQ(data->train.labels, (std::vector<int>{0, 1}));
  EXPECT_EQ(data->train.tokens, (std::vector<int32_t>{2, 2, 2, 3, 3, 1}));
  EXPECT_EQ(data->test.tokens, (std::vector<int32_t>{0, 0, 2, 3, 1, 3}));
}

TEST(ImdbTest, MissingFolderIsNotFound) {
  auto data = ReadImdb(TestPath("no_such_imdb"), 10, 5);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(data.status().message().find("no_such_imdb/train/neg"), std::string::npos);
}

}  // namespace
}  // namespace dpkit::models::wide
