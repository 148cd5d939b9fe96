#include "models/wide/brown_corpus.h"

#include "gtest/gtest.h"
#include "models/wide/wide_testing.h"

namespace dpkit::models::wide {
namespace {

TEST(BrownCorpusTest, DropsTagsPunctuationAndLowercases) {
  const std::string path = WriteTestFile(
      "xa01", "\n\n\tThe/at Fulton/np-tl jury's/nn$ said/vbd ``/`` 1961/cd ./.\n\n"
              "\tterm-end/nn A/B/nn over-all/jj ,/,\n");
  auto words = ReadTaggedBrownFile(path);
  ASSERT_TRUE(words.ok()) << words.status();
  // "A/B/nn" has word "a/b", which is not a word; "1961" and punctuation are dropped.
  EXPECT_EQ(*words, (std::vector<std::string>{"the", "fulton", "jury's", "said", "term-end",
                                               "over-all"}));
}

TEST(BrownCorpusTest, RejectsUntaggedText) {
  const std::string path = WriteTestFile("xa02", "\tThe/at plain words\n");
  auto words = ReadTaggedBrownFile(path);
  ASSERT_FALSE(words.ok());
  EXPECT_NE(words.status().message().find(":1:"), std::string::npos);
  EXPECT_EQ(ReadTaggedBrownFile(TestPath("missing")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(BrownCorpusTest, VocabularyKeepsMostFrequentNonStopWords) {
  const std::vector<std::vector<std::string>> docs{
      {"the", "cat", "dog", "cat", "bird", "the", "cat", "dog", "emu"}};
  const Vocabulary v = BuildVocabulary(docs, EnglishStopWords(), 3);
  // cat 3, dog 2, then bird/emu tie at 1: alphabetical.
  EXPECT_EQ(v.words, (std::vector<std::string>{"cat", "dog", "bird"}));
  EXPECT_EQ(v.counts, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(v.ids.at("dog"), 1);
}

TEST(BrownCorpusTest, CbowSamplesUseWindowOnFilteredStream) {
  const std::vector<std::vector<std::string>> docs{{"a", "b", "x", "c", "d", "e"}, {"a", "b"}};
  Vocabulary v;
  for (std::string w : {"a", "b", "c", "d", "e"}) {
    v.ids[w] = static_cast<int32_t>(v.words.size());
    v.words.push_back(w);
  }
  // Filtered first doc: a b c d e -> one sample (target c) with window 2; the second
  // document is too short.
  const auto samples = MakeCbowSamples(docs, v, 2);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].target, 2);
  EXPECT_EQ(samples[0].context, (std::vector<int32_t>{0, 1, 3, 4}));
}

TEST(BrownCorpusTest, ListsOnlyCorpusFiles) {
  const std::string dir = TestPath("brown");
  MakeTestDirectory(dir);
  WriteTestFile("brown/cb02", "x/nn\n");
  WriteTestFile("brown/ca01", "x/nn\n");
  WriteTestFile("brown/README", "text\n");
  auto files = ListBrownFiles(dir);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files, (std::vector<std::string>{dir + "/ca01", dir + "/cb02"}));
  EXPECT_FALSE(ListBrownFiles(TestPath("nowhere")).ok());
}

}  // namespace
}  // namespace dpkit::models::wide
