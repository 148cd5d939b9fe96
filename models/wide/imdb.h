// The IMDb movie-review data set (Maas et al. 2011), in the standard `aclImdb` folder
// layout of https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz:
//   aclImdb/train/pos/*.txt  aclImdb/train/neg/*.txt  (12,500 each)
//   aclImdb/test/pos/*.txt   aclImdb/test/neg/*.txt   (12,500 each)
// one review per file. Reviews are tokenised like Keras' IMDb preprocessing: "<br />"
// removed, lowercased, words = maximal runs of [a-z0-9']. The vocabulary is the
// `vocabulary_size` most frequent TRAINING words (ties alphabetical); ids follow the
// Keras convention: 0 padding, 1 out-of-vocabulary, 2 + rank for vocabulary words, so
// ids are < vocabulary_size + 2. Each review keeps its LAST `length` tokens, padded with 0
// at the start: Keras' pad_sequences defaults (truncating and padding 'pre'), which Bu et
// al.'s imdb_tutorial.py uses (their Sec. 4: 10,000 words, length 256).
#ifndef DPKIT_MODELS_WIDE_IMDB_H_
#define DPKIT_MODELS_WIDE_IMDB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dpkit::models::wide {

struct ImdbSplit {
  std::vector<int32_t> tokens;  // size() x length, row-major
  std::vector<int> labels;      // 1 positive, 0 negative
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

struct ImdbData {
  int length = 0;
  int vocabulary_size = 0;  // ids < vocabulary_size + 2
  ImdbSplit train, test;
};

// Lowercased tokens of one review.
std::vector<std::string> TokenizeReview(const std::string& text);

// Reads `directory`/{train,test}/{pos,neg}/*.txt (files sorted by name, neg first).
// NotFound naming the missing folder; InvalidArgument for an empty split.
absl::StatusOr<ImdbData> ReadImdb(const std::string& directory, int vocabulary_size,
                                  int length);

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_IMDB_H_
