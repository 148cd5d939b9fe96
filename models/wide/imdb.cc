#include "dpkit/models/wide/imdb.h"

#include <algorithm>
#include <cctype>
#include <dirent.h>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace dpkit::models::wide {
namespace {

absl::StatusOr<std::vector<std::string>> ListTextFiles(const std::string& directory) {
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return absl::NotFoundError(absl::StrCat("cannot open IMDb folder ", directory));
  std::vector<std::string> files;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0) {
      files.push_back(directory + "/" + name);
    }
  }
  closedir(dir);
  std::sort(files.begin(), files.end());
  return files;
}

// Reviews of one split: (tokens, label), neg then pos.
absl::StatusOr<std::vector<std::pair<std::vector<std::string>, int>>> ReadSplit(
    const std::string& directory) {
  std::vector<std::pair<std::vector<std::string>, int>> reviews;
  for (int label : {0, 1}) {
    auto files = ListTextFiles(directory + (label ? "/pos" : "/neg"));
    if (!files.ok()) return files.status();
    for (const std::string& file : *files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file));
      std::stringstream text;
      text << in.rdbuf();
      reviews.emplace_back(TokenizeReview(text.str()), label);
    }
  }
  if (reviews.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no reviews (*.txt) in ", directory, "/{neg,pos}"));
  }
  return reviews;
}

}  // namespace

std::vector<std::string> TokenizeReview(const std::string& text) {
  const std::string clean = absl::StrReplaceAll(text, {{"<br />", " "}});
  std::vector<std::string> tokens;
  std::string current;
  for (char c : clean) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::isalnum(static_cast<unsigned char>(lower)) || lower == '\'') {
      current.push_back(lower);
    } else if (!current.empty()) {
      tokens.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

absl::StatusOr<ImdbData> ReadImdb(const std::string& directory, int vocabulary_size, int length) {
  if (vocabulary_size < 1 || length < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary_size and length must be >= 1, got ", vocabulary_size, " and ", length));
  }
  auto train = ReadSplit(directory + "/train");
  if (!train.ok()) return train.status();
  auto test = ReadSplit(directory + "/test");
  if (!test.ok()) return test.status();
  absl::flat_hash_map<std::string, int64_t> counts;
  for (const auto& [tokens, label] : *train) {
    for (const std::string& t : tokens) ++counts[t];
  }
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (static_cast<int>(sorted.size()) > vocabulary_size) sorted.resize(static_cast<size_t>(vocabulary_size));
  absl::flat_hash_map<std::string, int32_t> ids;
  for (size_t i = 0; i < sorted.size(); ++i) ids.emplace(sorted[i].first, static_cast<int32_t>(i + 2));
  ImdbData data;
  data.length = length;
  data.vocabulary_size = vocabulary_size;
  auto encode = [&](const auto& reviews, ImdbSplit& split) {
    for (const auto& [tokens, label] : reviews) {
      split.labels.push_back(label);
      const size_t start = split.tokens.size();
      split.tokens.resize(start + static_cast<size_t>(length), 0);
      // Keras' pad_sequences defaults (truncating='pre', padding='pre'), as their
      // imdb_tutorial.py: the LAST `length` tokens, right-aligned after the padding.
      const size_t n = std::min(tokens.size(), static_cast<size_t>(length));
      const size_t skip = tokens.size() - n;
      const size_t pad = static_cast<size_t>(length) - n;
      for (size_t i = 0; i < n; ++i) {
        auto it = ids.find(tokens[skip + i]);
        split.tokens[start + pad + i] = it == ids.end() ? 1 : it->second;
      }
    }
  };
  encode(*train, data.train);
  encode(*test, data.test);
  return data;
}

}  // namespace dpkit::models::wide
