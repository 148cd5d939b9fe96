#include "dpkit/models/wide/brown_corpus.h"

#include "gtest/gtest.h"
#include "dpkit/models/wide/wide_testing.h"

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
  // Dropping out-of-vocabulary words, the first doc is a b c d e -> one sample (target c)
  // with window 2; the second document is too short.
  const absl::flat_hash_set<std::string> no_stop_words;
  const auto samples = MakeCbowSamples(docs, v, no_stop_words, 2, OutOfVocabulary::kDrop);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].target, 2);
  EXPECT_EQ(samples[0].context, (std::vector<int32_t>{0, 1, 3, 4}));
}

TEST(BrownCorpusTest, UnkKeepsOutOfVocabularyWordsAsOneIdAndStillDropsStopWords) {
  const std::vector<std::vector<std::string>> docs{
      {"the", "cat", "zebra", "of", "dog", "yak", "and", "emu", "cat"}};
  Vocabulary v;
  for (std::string w : {"cat", "dog", "emu"}) {
    v.ids[w] = static_cast<int32_t>(v.words.size());
    v.words.push_back(w);
  }
  ASSERT_EQ(UnkId(v), 3);
  // Stream without stop words: cat UNK dog UNK emu cat -> targets dog and UNK.
  const auto unk = MakeCbowSamples(docs, v, EnglishStopWords(), 2, OutOfVocabulary::kUnk);
  ASSERT_EQ(unk.size(), 2u);
  EXPECT_EQ(unk[0].target, 1);
  EXPECT_EQ(unk[0].context, (std::vector<int32_t>{0, 3, 3, 2}));
  EXPECT_EQ(unk[1].target, 3);
  EXPECT_EQ(unk[1].context, (std::vector<int32_t>{3, 1, 2, 0}));
  // Dropped instead: cat dog emu cat is too short for a window of 2 on each side.
  EXPECT_TRUE(MakeCbowSamples(docs, v, EnglishStopWords(), 2, OutOfVocabulary::kDrop).empty());
  EXPECT_EQ(MakeCbowSamples(docs, v, EnglishStopWords(), 1, OutOfVocabulary::kDrop).size(), 2u);
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
