#include "dpkit/models/lm/brown_lm_data.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "dpkit/models/wide/brown_corpus.h"

namespace dpkit::models::lm {

void AppendWindows(const std::vector<int64_t>& document, Windows* out) {
  const size_t length = static_cast<size_t>(out->length);
  for (size_t first = 0; first + length <= document.size(); first += length) {
    out->ids.insert(out->ids.end(), document.begin() + static_cast<std::ptrdiff_t>(first),
                    document.begin() + static_cast<std::ptrdiff_t>(first + length));
  }
}

absl::StatusOr<BrownLmData> ReadBrownLmData(const std::string& directory, int vocabulary_size,
                                            int context) {
  if (vocabulary_size < 1 || context < 1) {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary size and context must be >= 1, got ",
                                                   vocabulary_size, " and ", context));
  }
  absl::StatusOr<std::vector<std::string>> files = wide::ListBrownFiles(directory);
  if (!files.ok()) return files.status();
  if (files->size() < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        directory, " holds ", files->size(),
        " Brown files; the language model needs >= 3 (validation, vocabulary, training)"));
  }
  std::vector<std::vector<std::string>> train_docs, validation_docs, vocabulary_docs;
  for (size_t i = 0; i < files->size(); ++i) {
    absl::StatusOr<std::vector<std::string>> words = wide::ReadTaggedBrownFile((*files)[i]);
    if (!words.ok()) return words.status();
    auto& split = i % 10 == 0 ? validation_docs : i % 10 == 1 ? vocabulary_docs : train_docs;
    split.push_back(*std::move(words));
  }
  const wide::Vocabulary vocabulary =
      wide::BuildVocabulary(vocabulary_docs, absl::flat_hash_set<std::string>(), vocabulary_size);
  BrownLmData data;
  data.words = vocabulary.words;
  data.num_ids = static_cast<int64_t>(data.words.size()) + 1;
  const int64_t unk = static_cast<int64_t>(data.words.size());
  data.train.length = data.validation.length = context + 1;
  data.train_files = static_cast<int64_t>(train_docs.size());
  data.validation_files = static_cast<int64_t>(validation_docs.size());
  data.vocabulary_files = static_cast<int64_t>(vocabulary_docs.size());
  std::vector<int64_t> ids;
  for (auto* split : {&train_docs, &validation_docs}) {
    Windows& out = split == &train_docs ? data.train : data.validation;
    for (const std::vector<std::string>& doc : *split) {
      ids.clear();
      for (const std::string& w : doc) {
        auto it = vocabulary.ids.find(w);
        ids.push_back(it == vocabulary.ids.end() ? unk : it->second);
      }
      AppendWindows(ids, &out);
    }
  }
  for (int64_t id : data.train.ids) data.unknown_train_words += id == unk ? 1 : 0;
  data.train_words = static_cast<int64_t>(data.train.ids.size());
  if (data.train.size() == 0 || data.validation.size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        directory, ": no complete window of ", context + 1, " words in the ",
        data.train.size() == 0 ? "training" : "validation", " files (lower --lm_context)"));
  }
  return data;
}

}  // namespace dpkit::models::lm
