// User-level DP records (McMahan et al. 2018, Alg. 1, DP-FedSGD): the privacy unit is a
// user, i.e. all training examples sharing a user id. Each step Poisson-samples USERS with
// rate q = B / N (N users, B the expected number of users per step); every sampled user's
// examples form one record (their mean gradient, clipped to C by optim::DpOptimizer with
// unit_records), so adding or removing a user adds or removes one record of norm <= C:
// the step is the Poisson-subsampled Gaussian mechanism over users, and the ledger's
// epsilon is user-level (the record-level formula with n = N).
//
// Framework-free: the trainers' LibTorch step (engine/torch_task.h) calls these.
#ifndef DPKIT_MODELS_ENGINE_USER_RECORDS_H_
#define DPKIT_MODELS_ENGINE_USER_RECORDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/optim/poisson_sampler.h"

namespace dpkit::models {

// The training examples of each user: users numbered densely in order of first
// appearance in `user_of_example` (any int64 ids), each user's examples in increasing
// order. InvalidArgument when there are no examples.
class UserIndex {
 public:
  static absl::StatusOr<UserIndex> Create(const std::vector<int64_t>& user_of_example);
  int64_t num_users() const { return static_cast<int64_t>(examples_.size()); }
  int64_t num_examples() const { return num_examples_; }
  const std::vector<int64_t>& examples_of(int64_t user) const { return examples_[user]; }
  // The records of a step that sampled `users` (dense user numbers): their examples,
  // grouped by user (a run of consecutive examples per user), and each run's size.
  optim::MicrobatchedBatch Records(const std::vector<int64_t>& users) const;
  // A Poisson sample of the users with rate q (the secure generator in training), as
  // records.
  absl::StatusOr<optim::MicrobatchedBatch> SampleRecords(mechanisms::RandomGenerator& rng,
                                                         double sampling_rate) const;

 private:
  UserIndex() = default;
  std::vector<std::vector<int64_t>> examples_;
  int64_t num_examples_ = 0;
};

// --user_ids: one integer per line (surrounding blanks allowed), line i the user of
// training example i; exactly `num_examples` lines (empty lines are errors). One-line
// errors naming the file and line.
absl::StatusOr<std::vector<int64_t>> ReadUserIds(const std::string& path, int64_t num_examples);

// The default expected number of users per step: the model's example-level sampling rate
// (example_batch / num_examples) applied to the users, max(1, round(users * rate)).
int64_t UserLevelBatchSize(int64_t num_users, int64_t num_examples, int64_t example_batch);

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_ENGINE_USER_RECORDS_H_
