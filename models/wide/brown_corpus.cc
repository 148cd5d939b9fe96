#include "dpkit/models/wide/brown_corpus.h"

#include <algorithm>
#include <cctype>
#include <dirent.h>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace dpkit::models::wide {
namespace {

// [a-z]+(['-][a-z]+)*
bool IsWord(const std::string& w) {
  if (w.empty() || !std::islower(static_cast<unsigned char>(w.front())) ||
      !std::islower(static_cast<unsigned char>(w.back()))) {
    return false;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    const char c = w[i];
    if (std::islower(static_cast<unsigned char>(c))) continue;
    if ((c == '\'' || c == '-') && i + 1 < w.size() &&
        std::islower(static_cast<unsigned char>(w[i + 1]))) {
      continue;
    }
    return false;
  }
  return true;
}

bool IsBrownFileName(const std::string& name) {
  return name.size() == 4 && std::islower(static_cast<unsigned char>(name[0])) &&
         std::islower(static_cast<unsigned char>(name[1])) &&
         std::isdigit(static_cast<unsigned char>(name[2])) &&
         std::isdigit(static_cast<unsigned char>(name[3]));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadTaggedBrownFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read Brown corpus file ", path));
  std::vector<std::string> words;
  std::string line, token;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    std::istringstream tokens(line);
    while (tokens >> token) {
      const size_t slash = token.rfind('/');
      if (slash == std::string::npos || slash == 0 || slash + 1 == token.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", line_number, ": token '", token.substr(0, 40),
            "' is not of the form word/tag (is this the tagged Brown corpus?)"));
      }
      std::string word = token.substr(0, slash);
      for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (IsWord(word)) words.push_back(std::move(word));
    }
  }
  return words;
}

absl::StatusOr<std::vector<std::string>> ListBrownFiles(const std::string& directory) {
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open Brown corpus directory ", directory));
  }
  std::vector<std::string> files;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (IsBrownFileName(name)) files.push_back(directory + "/" + name);
  }
  closedir(dir);
  if (files.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no Brown corpus files (like ca01) in ", directory));
  }
  std::sort(files.begin(), files.end());
  return files;
}

const absl::flat_hash_set<std::string>& EnglishStopWords() {
  static const auto* const kWords = new absl::flat_hash_set<std::string>{
      "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and",
      "any", "are", "as", "at", "be", "because", "been", "before", "being", "below",
      "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down",
      "during", "each", "even", "ever", "every", "few", "for", "from", "further", "had",
      "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself",
      "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "may",
      "me", "might", "more", "most", "much", "must", "my", "myself", "no", "nor", "not",
      "now", "of", "off", "on", "once", "one", "only", "or", "other", "our", "ours",
      "ourselves", "out", "over", "own", "same", "shall", "she", "should", "so", "some",
      "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then",
      "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
      "up", "upon", "us", "very", "was", "we", "were", "what", "when", "where", "which",
      "while", "who", "whom", "whose", "why", "will", "with", "would", "yet", "you",
      "your", "yours", "yourself", "yourselves"};
  return *kWords;
}

Vocabulary BuildVocabulary(const std::vector<std::vector<std::string>>& documents,
                           const absl::flat_hash_set<std::string>& stop_words, int size) {
  absl::flat_hash_map<std::string, int64_t> counts;
  for (const auto& doc : documents) {
    for (const std::string& w : doc) {
      if (!stop_words.contains(w)) ++counts[w];
    }
  }
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (static_cast<int>(sorted.size()) > size) sorted.resize(static_cast<size_t>(size));
  Vocabulary vocabulary;
  for (const auto& [word, count] : sorted) {
    vocabulary.ids.emplace(word, static_cast<int32_t>(vocabulary.words.size()));
    vocabulary.words.push_back(word);
    vocabulary.counts.push_back(count);
  }
  return vocabulary;
}

std::vector<CbowSample> MakeCbowSamples(const std::vector<std::vector<std::string>>& documents,
                                        const Vocabulary& vocabulary,
                                        const absl::flat_hash_set<std::string>& stop_words,
                                        int window, OutOfVocabulary oov) {
  std::vector<CbowSample> samples;
  std::vector<int32_t> ids;
  for (const auto& doc : documents) {
    ids.clear();
    for (const std::string& w : doc) {
      if (stop_words.contains(w)) continue;
      auto it = vocabulary.ids.find(w);
      if (it != vocabulary.ids.end()) {
        ids.push_back(it->second);
      } else if (oov == OutOfVocabulary::kUnk) {
        ids.push_back(UnkId(vocabulary));
      }
    }
    for (size_t i = static_cast<size_t>(window); i + static_cast<size_t>(window) < ids.size();
         ++i) {
      CbowSample sample;
      sample.target = ids[i];
      for (int k = window; k >= 1; --k) sample.context.push_back(ids[i - static_cast<size_t>(k)]);
      for (int k = 1; k <= window; ++k) sample.context.push_back(ids[i + static_cast<size_t>(k)]);
      samples.push_back(std::move(sample));
    }
  }
  return samples;
}

}  // namespace dpkit::models::wide
