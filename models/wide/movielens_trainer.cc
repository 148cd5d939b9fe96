// `dpkit train movielens`: Bu et al. 2020, Sec. 4 — MovieLens 1M (ratings.dat), a
// simplified neural collaborative filtering model (He et al. 2017, NCF): a GMF branch
// (user and movie embeddings of 5 latent factors, multiplied elementwise) and an MLP branch
// (user and movie embeddings of 10, concatenated), concatenated (25 values) into a dense
// output of 5 logits, one per rating 1..5, trained with softmax cross-entropy; the
// prediction is the expected rating sum_r r softmax(logits)_r, and the metric is the test
// RMSE of that prediction. NoisyAdam: sigma 0.6, Poisson rate 1/80 (expected batch
// n_train / 80, 10,002 on the full data), learning rate 0.01, clip norm 5, 25 epochs,
// delta 1e-6 — the settings of their tensorflow_privacy `movielens_tutorial.py`. The paper
// reports test RMSE 0.915.
//
// Split (documented, deterministic, independent of --seed): rating (u, m) goes to the test
// set iff SplitMix64(u * 2^32 + m) mod 5 == 0, with u, m the dense indices of the reader
// (models/wide/movielens.h: order of first appearance in the file) — about 20 % test, as the
// paper's 80/20 random split (theirs is scikit-learn's with random_state 100, which this
// does not reproduce row for row).
//
// Data: --data_dir holds `ratings.dat` (the unpacked `ml-1m` folder of GroupLens).
//
// --privacy_unit=user gives user-level DP (McMahan et al. 2018): the rating's user is the
// unit (engine/user_records.h); n, q and --batch_size then count users.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/models/dp_step_options.h"
#include "dpkit/models/engine/torch_task.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/models/wide/movielens.h"
#include "nlohmann/json.hpp"
#include "dpkit/optim/torch/per_example_layers.h"

namespace dpkit::models::wide {
namespace {

namespace F = torch::nn::functional;

constexpr int64_t kGmfFactors = 5;
constexpr int64_t kMlpFactors = 10;
constexpr int64_t kRatings = 5;  // classes: rating 1..5

// Steele, Lea & Flood 2014 (SplitMix64 finaliser): a fixed, platform-independent hash.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool IsTestRating(const Rating& r) {
  const uint64_t key = (static_cast<uint64_t>(r.user) << 32) | static_cast<uint32_t>(r.movie);
  return SplitMix64(key) % 5 == 0;
}

class NcfNetImpl : public torch::nn::Module {
 public:
  NcfNetImpl(int64_t num_users, int64_t num_movies)
      : gmf_user_(register_module("gmf_user", optim::DpEmbedding(num_users, kGmfFactors))),
        gmf_movie_(register_module("gmf_movie", optim::DpEmbedding(num_movies, kGmfFactors))),
        mlp_user_(register_module("mlp_user", optim::DpEmbedding(num_users, kMlpFactors))),
        mlp_movie_(register_module("mlp_movie", optim::DpEmbedding(num_movies, kMlpFactors))),
        output_(register_module("output",
                                optim::DpLinear(kGmfFactors + 2 * kMlpFactors, kRatings))) {
    // Keras' default embedding initialiser, U(-0.05, 0.05), as in the paper's code.
    torch::NoGradGuard no_grad;
    for (auto* e : {&gmf_user_, &gmf_movie_, &mlp_user_, &mlp_movie_}) {
      (*e)->weight.uniform_(-0.05, 0.05);
    }
  }
  // users, movies: int64 (B) -> logits (B, 5).
  torch::Tensor forward(const torch::Tensor& users, const torch::Tensor& movies) {
    torch::Tensor gmf = gmf_user_->forward(users) * gmf_movie_->forward(movies);
    torch::Tensor mlp = torch::cat({mlp_user_->forward(users), mlp_movie_->forward(movies)}, 1);
    return output_->forward(torch::cat({gmf, mlp}, 1));
  }

 private:
  optim::DpEmbedding gmf_user_, gmf_movie_, mlp_user_, mlp_movie_;
  optim::DpLinear output_;
};
TORCH_MODULE(NcfNet);

struct Split {
  torch::Tensor users, movies;  // int64 (N)
  torch::Tensor labels;         // int64 (N): rating - 1
  torch::Tensor ratings;        // float32 (N)
};

Split ToTensors(const std::vector<Rating>& ratings, std::optional<int64_t> subset) {
  const int64_t n = subset ? std::min<int64_t>(*subset, static_cast<int64_t>(ratings.size()))
                           : static_cast<int64_t>(ratings.size());
  std::vector<int64_t> users(n), movies(n), labels(n);
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) {
    users[i] = ratings[i].user;
    movies[i] = ratings[i].movie;
    values[i] = ratings[i].rating;
    labels[i] = static_cast<int64_t>(std::lround(ratings[i].rating)) - 1;
  }
  return Split{torch::tensor(users, torch::kLong), torch::tensor(movies, torch::kLong),
               torch::tensor(labels, torch::kLong), torch::tensor(values, torch::kFloat32)};
}

// Bu et al. 2020, Sec. 4 (MovieLens): 80 expected batches per epoch.
TaskDefaults MovieLensDefaults(const TrainOptions& /*options*/, int64_t train_size) {
  constexpr int64_t kBatchesPerEpoch = 80;
  TaskDefaults d;
  d.learning_rate = 0.01;
  d.clip_norm = 5.0;
  d.noise_multiplier = 0.6;
  d.batch_size = train_size > 0 ? std::max<int64_t>(1, std::llround(static_cast<double>(train_size) /
                                                                     kBatchesPerEpoch))
                                : 0;
  d.batch_size_rule = absl::StrCat("n/", kBatchesPerEpoch, " rounded, n the training ratings");
  d.epochs = 25;
  d.optimizer = "adam";
  d.delta = 1e-6;
  return d;
}

absl::Status TrainMovieLens(const TrainOptions& o) {
  TorchTask task;
  // LibTorch's threads, the BLAS's and the allocator, before any tensor operation.
  task.threads = ConfigureTorchThreads(o);
  const std::string dir = o.data_dir.empty() ? "data/ml-1m" : o.data_dir;
  absl::StatusOr<MovieLensData> data = ReadMovieLensRatings(dir + "/ratings.dat");
  if (!data.ok()) {
    return absl::Status(data.status().code(),
                        absl::StrCat(data.status().message(),
                                     " (set --data_dir to the folder holding ratings.dat)"));
  }
  std::vector<Rating> train_ratings, test_ratings;
  for (const Rating& r : data->ratings) (IsTestRating(r) ? test_ratings : train_ratings).push_back(r);
  if (train_ratings.empty() || test_ratings.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, "/ratings.dat: too few ratings for a train/test split (", data->ratings.size(), ")"));
  }
  const Split train = ToTensors(train_ratings, o.train_subset);
  const Split test = ToTensors(test_ratings, o.test_subset);
  torch::manual_seed(o.seed);  // initialisation only
  NcfNet net(data->num_users, data->num_movies);
  const torch::Tensor rating_values = torch::arange(1, kRatings + 1, torch::kFloat32);

  task.model_name = o.model;
  task.model = net.ptr().get();
  task.train_size = train.labels.size(0);
  // --privacy_unit=user: a rating's user is its privacy unit (user-level DP).
  const torch::Tensor train_users = train.users.contiguous();
  task.user_of_example.assign(train_users.data_ptr<int64_t>(),
                              train_users.data_ptr<int64_t>() + task.train_size);
  task.losses = [&](const torch::Tensor& index, const torch::Device& device) {
    torch::Tensor logits = net->forward(train.users.index_select(0, index).to(device),
                                        train.movies.index_select(0, index).to(device));
    return TorchLosses{F::cross_entropy(logits, train.labels.index_select(0, index).to(device),
                            F::CrossEntropyFuncOptions().reduction(torch::kNone))};
  };
  task.evaluate = [&](const torch::Device& device) {
    double squared = 0;
    const int64_t n = test.labels.size(0);
    for (int64_t first = 0; first < n; first += 65536) {
      const int64_t len = std::min<int64_t>(65536, n - first);
      torch::Tensor logits = net->forward(test.users.narrow(0, first, len).to(device),
                                          test.movies.narrow(0, first, len).to(device));
      // Expected rating under the predicted distribution (the paper's RMSE prediction).
      torch::Tensor predicted = torch::softmax(logits, 1).cpu().matmul(rating_values);
      squared += (predicted - test.ratings.narrow(0, first, len)).pow(2).sum().item<double>();
    }
    return nlohmann::json{{"test_rmse", n > 0 ? std::sqrt(squared / n) : 0.0}};
  };
  task.describe = [](const nlohmann::json& m) {
    return absl::StrFormat("test RMSE %.4f", m["test_rmse"].get<double>());
  };
  task.defaults = MovieLensDefaults(o, task.train_size);
  return RunTorchTraining(o, std::move(task));
}

}  // namespace
}  // namespace dpkit::models::wide

DPKIT_REGISTER_TRAINER((dpkit::models::TrainerInfo{
    "movielens",
    "NCF (GMF 5 + MLP 10) on MovieLens 1M (ratings.dat in --data_dir), NoisyAdam, test RMSE "
    "(Bu et al. 2020)",
    dpkit::models::DpStepFlagNames(), &dpkit::models::wide::TrainMovieLens,
    &dpkit::models::wide::MovieLensDefaults}));
