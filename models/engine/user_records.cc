#include "dpkit/models/engine/user_records.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dpkit::models {

absl::StatusOr<UserIndex> UserIndex::Create(const std::vector<int64_t>& user_of_example) {
  if (user_of_example.empty()) {
    return absl::InvalidArgumentError("user-level DP: the training set is empty");
  }
  UserIndex index;
  std::unordered_map<int64_t, int64_t> dense;
  for (size_t i = 0; i < user_of_example.size(); ++i) {
    const auto [it, added] =
        dense.emplace(user_of_example[i], static_cast<int64_t>(index.examples_.size()));
    if (added) index.examples_.emplace_back();
    index.examples_[it->second].push_back(static_cast<int64_t>(i));
  }
  index.num_examples_ = static_cast<int64_t>(user_of_example.size());
  return index;
}

optim::MicrobatchedBatch UserIndex::Records(const std::vector<int64_t>& users) const {
  optim::MicrobatchedBatch batch;
  for (int64_t u : users) {
    const std::vector<int64_t>& examples = examples_[u];
    batch.examples.insert(batch.examples.end(), examples.begin(), examples.end());
    batch.microbatch_sizes.push_back(static_cast<int64_t>(examples.size()));
  }
  return batch;
}

absl::StatusOr<optim::MicrobatchedBatch> UserIndex::SampleRecords(
    mechanisms::RandomGenerator& rng, double sampling_rate) const {
  absl::StatusOr<std::vector<int64_t>> users =
      optim::PoissonSample(rng, num_users(), sampling_rate);
  if (!users.ok()) return users.status();
  return Records(*users);
}

absl::StatusOr<std::vector<int64_t>> ReadUserIds(const std::string& path, int64_t num_examples) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--user_ids: cannot read ", path));
  std::vector<int64_t> ids;
  std::string line;
  while (std::getline(in, line)) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &id)) {
      return absl::InvalidArgumentError(absl::StrCat("--user_ids: ", path, " line ",
                                                     ids.size() + 1, ": not an integer user id"));
    }
    ids.push_back(id);
  }
  if (static_cast<int64_t>(ids.size()) != num_examples) {
    return absl::InvalidArgumentError(
        absl::StrCat("--user_ids: ", path, " has ", ids.size(),
                     " lines; it needs one per training example (", num_examples, ")"));
  }
  return ids;
}

int64_t UserLevelBatchSize(int64_t num_users, int64_t num_examples, int64_t example_batch) {
  if (num_examples < 1 || example_batch < 1) return 1;
  const double rate = static_cast<double>(example_batch) / static_cast<double>(num_examples);
  return std::clamp<int64_t>(std::llround(static_cast<double>(num_users) * rate), 1, num_users);
}

}  // namespace dpkit::models
