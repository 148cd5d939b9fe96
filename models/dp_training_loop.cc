#include "models/dp_training_loop.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "accounting/report.h"
#include "mechanisms/random.h"
#include "models/dp_step_options.h"
#include "models/training_ledger.h"
#include "optim/poisson_sampler.h"
#include "optim/torch/cpu_threads.h"
#include "optim/torch/dp_optimizer.h"

namespace dpkit::models {
namespace {

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : absl::StrCat(dir, "/", name);
}

const char kNotPrivateNote[] = "not private: --noise_multiplier=0 adds no noise";

}  // namespace

absl::Status MakeDirs(const std::string& dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!partial.empty() && ::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::NotFoundError(absl::StrCat("cannot create --output_dir ", dir));
      }
    }
    if (i < dir.size()) partial += dir[i];
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp));
  }
  return absl::OkStatus();
}

std::string EpsilonText(const nlohmann::json& eps, double delta) {
  // The accounting report's one-line form: the headline rounded up, named.
  accounting::Result<accounting::PrivacyReport> report =
      accounting::ReportFromJson(eps, accounting::ReportQuantity::kEpsilon, delta);
  if (!report.ok()) return "eps: " + report.error();
  return accounting::ReportToLine(*report);
}

absl::StatusOr<torch::Device> TrainingDevice(const TrainOptions& o) {
  if (o.device == "cpu") return torch::Device(torch::kCPU);
  if (o.device == "cuda") {
    if (!torch::cuda::is_available()) {
      return absl::InvalidArgumentError(
          "--device=cuda: no CUDA device visible to this LibTorch build (build with "
          "--config=cuda; see models/README.md)");
    }
    return torch::Device(torch::kCUDA);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device must be cpu or cuda, got '", o.device, "'"));
}

absl::Status RunDpTraining(const TrainOptions& o, const DpTrainingDefaults& d,
                           DpTrainingTask& task) {
  const auto wall_start = std::chrono::steady_clock::now();
  // LibTorch's threads, the BLAS's and the allocator together (optim/torch/cpu_threads.h).
  optim::ConfigureCpuThreads(o.threads);
  absl::StatusOr<torch::Device> device = TrainingDevice(o);
  if (!device.ok()) return device.status();
  const int64_t n = task.train_size;
  const int64_t batch_size = o.batch_size.value_or(d.batch_size);
  if (n <= 0) return absl::InvalidArgumentError("the training set is empty");
  if (batch_size > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_size must be <= the number of training examples (", n, "), got ", batch_size));
  }
  const double delta = o.given_flags.count("delta") ? o.delta : d.delta;
  const double learning_rate = o.learning_rate.value_or(d.learning_rate);
  const double clip_norm = o.clip_norm.value_or(d.clip_norm);
  const double epochs = o.epochs.value_or(d.epochs);
  const std::string optimizer_name = o.optimizer.value_or(d.optimizer);
  absl::StatusOr<DpStepOptions> step_options =
      ParseDpStepOptions(o, batch_size, d.physical_batch_size);
  if (!step_options.ok()) return step_options.status();
  const bool shuffled = step_options->shuffled();
  absl::StatusOr<optim::StepRecordSampler> records = optim::StepRecordSampler::Create(
      n, batch_size, step_options->microbatch_size, shuffled);
  if (!records.ok()) return records.status();
  const double q = records->sampling_rate();
  const int64_t steps_per_epoch = records->steps_per_epoch();
  int64_t total_steps = records->TotalSteps(epochs);
  if (o.max_steps) total_steps = std::min(total_steps, *o.max_steps);
  total_steps = std::max<int64_t>(total_steps, 1);

  double sigma = d.noise_multiplier;
  if (o.target_epsilon && o.resume) {
    // The calibrated sigma holds for the run's planned steps from its start; recalibrating
    // for a longer run would not count the steps already taken at the old sigma.
    return absl::InvalidArgumentError(
        "--target_epsilon cannot be combined with --resume (sigma was calibrated when the run "
        "started); resume without it to keep the checkpoint's sigma, or give --noise_multiplier");
  }
  if (o.target_epsilon) {
    absl::StatusOr<double> calibrated =
        CalibrateNoiseMultiplierRdp(*o.target_epsilon, delta, q, total_steps);
    if (!calibrated.ok()) return calibrated.status();
    sigma = *calibrated;
  } else if (o.noise_multiplier) {
    sigma = *o.noise_multiplier;
  }
  auto noise_rng = mechanisms::SecureRandomGenerator::Create();
  if (!noise_rng.ok()) return noise_rng.status();
  auto sample_rng = mechanisms::SecureRandomGenerator::Create();
  if (!sample_rng.ok()) return sample_rng.status();

  // Files: without --output_dir the ledger is a temporary file (epsilon is still computed
  // from it) removed at the end.
  const bool files = !o.output_dir.empty();
  const std::string ledger_path =
      files ? Join(o.output_dir, "ledger.jsonl")
            : (std::filesystem::temp_directory_path() /
               absl::StrCat("dpkit-ledger-", ::getpid(), "-", o.model, ".jsonl"))
                  .string();
  if (files) {
    absl::Status made = MakeDirs(o.output_dir);
    if (!made.ok()) return made;
  }
  const std::string state_path = Join(o.output_dir, "checkpoint.json");
  const std::string model_path = Join(o.output_dir, "model.pt");
  const std::string optimizer_path = Join(o.output_dir, "optimizer.pt");
  nlohmann::json state;
  if (o.resume) {
    if (!files) return absl::InvalidArgumentError("--resume needs --output_dir");
    std::ifstream in(state_path);
    if (!in) return absl::NotFoundError(absl::StrCat("--resume: no checkpoint at ", state_path));
    state = nlohmann::json::parse(in, nullptr, false);
    if (state.is_discarded() || !state.contains("next_step") ||
        state.value("model", std::string()) != o.model) {
      return absl::InvalidArgumentError(
          absl::StrCat(state_path, ": not a dpkit checkpoint of model ", o.model));
    }
    if (state.value("sampler", std::string("poisson")) != step_options->sampler) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--resume: the checkpoint was trained with --sampler=",
          state.value("sampler", std::string("poisson")), ", not ", step_options->sampler));
    }
    // Without --noise_multiplier a resumed run keeps the checkpoint's sigma.
    if (!o.noise_multiplier) sigma = state.value("noise_multiplier", sigma);
  } else {
    std::remove(ledger_path.c_str());
    if (files) std::remove(Join(o.output_dir, "metrics.jsonl").c_str());
  }
  const bool private_run = sigma > 0;
  // Shuffled batches are not Poisson samples: writing them as ledger steps would let an
  // accountant certify an epsilon that does not hold, so no ledger is written at all.
  const bool certified = private_run && !shuffled;
  std::optional<TrainingLedger> ledger;
  if (certified) {
    absl::StatusOr<TrainingLedger> opened = TrainingLedger::Open(ledger_path);
    if (!opened.ok()) return opened.status();
    ledger.emplace(*std::move(opened));
  }

  torch::nn::Module& model = *task.model;
  model.to(*device);
  absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> torch_optimizer =
      optim::MakeTorchOptimizer(optimizer_name, model.parameters(), learning_rate);
  if (!torch_optimizer.ok()) return torch_optimizer.status();
  int64_t start_step = 0;
  if (o.resume) {
    torch::serialize::InputArchive model_archive, optimizer_archive;
    model_archive.load_from(model_path, *device);
    model.load(model_archive);
    optimizer_archive.load_from(optimizer_path, *device);
    (*torch_optimizer)->load(optimizer_archive);
    start_step = state["next_step"].get<int64_t>();
  }
  optim::DpOptimizerOptions dp_options;
  dp_options.noise_multiplier = sigma;
  dp_options.clip_norm = clip_norm;
  dp_options.sampling_rate = q;
  dp_options.expected_batch_size = static_cast<double>(batch_size);
  absl::Status applied = ApplyDpStepOptions(*step_options, model, &dp_options);
  if (!applied.ok()) return applied;
  absl::StatusOr<std::unique_ptr<optim::DpOptimizer>> dp = optim::DpOptimizer::Create(
      model, *std::move(torch_optimizer), dp_options, *std::move(noise_rng));
  if (!dp.ok()) return dp.status();

  const bool json = o.format == "json";
  std::ofstream metrics;
  if (files) metrics.open(Join(o.output_dir, "metrics.jsonl"), std::ios::app);
  if (!json) {
    std::printf("dpkit train %s: n=%lld, q=%.6g, sigma=%.6g%s, C=%g (%s clipping%s), %s "
                "lr=%g, %lld steps (%lld per epoch), %s, delta=%g, %s\n",
                o.model.c_str(), static_cast<long long>(n), q, sigma,
                o.target_epsilon ? " (calibrated)" : "", clip_norm,
                step_options->clipping_name.c_str(),
                step_options->microbatch_size > 1
                    ? absl::StrCat(", microbatches of ", step_options->microbatch_size,
                                   ": sensitivity 2C")
                          .c_str()
                    : "",
                optimizer_name.c_str(), learning_rate, static_cast<long long>(total_steps),
                static_cast<long long>(steps_per_epoch),
                shuffled ? "shuffled fixed-size batches (NOT covered by the accountants)"
                         : "Poisson batches",
                delta, files ? ("output in " + o.output_dir).c_str() : "no --output_dir");
    std::fflush(stdout);
  }
  double loss_sum = 0;
  int64_t seen = 0;
  auto epoch_start = std::chrono::steady_clock::now();
  const int64_t microbatch_size = step_options->microbatch_size;
  model.train();
  for (int64_t step = start_step; step < total_steps; ++step) {
    // Records: a Poisson sample (or the shuffled loader's next batch, a fresh secure
    // permutation at each epoch start and after a resume), as single examples or as
    // microbatches by a keyed hash of the example index (optim/poisson_sampler.h).
    absl::StatusOr<optim::MicrobatchedBatch> grouped = records->Next(step, **sample_rng);
    if (!grouped.ok()) return grouped.status();
    const torch::Tensor index = torch::tensor(grouped->examples, torch::kLong);
    for (const optim::PhysicalBatchRange& range :
         optim::PhysicalBatchRanges(grouped->microbatch_sizes, step_options->physical_batch_size)) {
      torch::Tensor losses =
          task.losses(index.narrow(0, range.first_example, range.num_examples), *device);
      losses.sum().backward();
      absl::Span<const int64_t> sizes;
      if (microbatch_size > 1) {
        sizes = absl::MakeConstSpan(grouped->microbatch_sizes)
                    .subspan(static_cast<size_t>(range.first_microbatch),
                             static_cast<size_t>(range.num_microbatches));
      }
      absl::StatusOr<int64_t> done = (*dp)->AccumulatePhysicalBatch(sizes);
      if (!done.ok()) return done.status();
      loss_sum += losses.detach().sum().item<double>();
      seen += range.num_examples;
    }
    absl::StatusOr<optim::DpStepRecord> record = (*dp)->Step();
    if (!record.ok()) return record.status();
    if (ledger) {
      std::vector<LedgerQuery> queries;
      for (const auto& query : record->queries) {
        queries.push_back({query.clip_norm, query.noise_stddev});
      }
      absl::Status appended = ledger->AppendStep(step, q, queries);
      if (!appended.ok()) return appended;
    }
    const bool epoch_end = (step + 1) % steps_per_epoch == 0 || step + 1 == total_steps;
    if (!epoch_end) continue;

    nlohmann::json epsilon = nullptr;
    if (ledger) {
      double upper = 0;
      absl::StatusOr<nlohmann::json> eps = LedgerEpsilon(ledger_path, delta, &upper);
      if (!eps.ok()) return eps.status();
      epsilon = *std::move(eps);
    }
    nlohmann::json test;
    {
      torch::NoGradGuard no_grad;
      model.eval();
      test = task.evaluate(*device);
      model.train();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    const double epoch = static_cast<double>(step + 1) / static_cast<double>(steps_per_epoch);
    nlohmann::json line = {{"epoch", epoch},
                           {"step", step + 1},
                           {"train_loss", seen ? loss_sum / static_cast<double>(seen) : 0.0}};
    for (const auto& [key, value] : test.items()) line[key] = value;
    line["epsilon"] = epsilon;
    line["delta"] = delta;
    line["noise_multiplier"] = sigma;
    line["sampling_rate"] = q;
    line["sampler"] = step_options->sampler;
    line["microbatch_size"] = microbatch_size;
    line["seconds"] = seconds;
    if (!private_run) {
      line["epsilon_note"] = kNotPrivateNote;
    } else if (shuffled) {
      line["epsilon_note"] = std::string(kShuffledNote);
    }
    if (json) {
      std::printf("%s\n", line.dump().c_str());
    } else {
      std::printf("epoch %.4g: train loss %.4f, %s, %s, %.1f s\n", epoch,
                  line["train_loss"].get<double>(), task.describe(test).c_str(),
                  !private_run ? kNotPrivateNote
                  : shuffled   ? absl::StrCat("epsilon ", kShuffledNote).c_str()
                               : EpsilonText(epsilon, delta).c_str(),
                  seconds);
    }
    std::fflush(stdout);
    if (files) {
      metrics << line.dump() << "\n";
      metrics.flush();
      torch::serialize::OutputArchive model_archive, optimizer_archive;
      model.save(model_archive);
      model_archive.save_to(model_path + ".tmp");
      (*dp)->optimizer().save(optimizer_archive);
      optimizer_archive.save_to(optimizer_path + ".tmp");
      if (std::rename((model_path + ".tmp").c_str(), model_path.c_str()) != 0 ||
          std::rename((optimizer_path + ".tmp").c_str(), optimizer_path.c_str()) != 0) {
        return absl::InternalError("cannot write the checkpoint");
      }
      const nlohmann::json checkpoint = {{"next_step", step + 1},
                                         {"model", o.model},
                                         {"noise_multiplier", sigma},
                                         {"sampling_rate", q},
                                         {"sampler", step_options->sampler}};
      absl::Status written = WriteFileAtomically(state_path, checkpoint.dump() + "\n");
      if (!written.ok()) return written;
    }
    loss_sum = 0;
    seen = 0;
    epoch_start = std::chrono::steady_clock::now();
  }
  if (!files) std::remove(ledger_path.c_str());
  if (!json) {
    std::printf("done in %.1f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start)
                    .count());
  }
  return absl::OkStatus();
}

}  // namespace dpkit::models
