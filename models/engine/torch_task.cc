#include "dpkit/models/engine/torch_task.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "dpkit/models/dp_step_options.h"
#include "dpkit/models/engine/distributed.h"
#include "dpkit/models/files.h"
#include "dpkit/models/engine/user_records.h"
#include "dpkit/optim/fixed_size_sampler.h"
#include "dpkit/optim/poisson_sampler.h"
#include "dpkit/optim/torch/cpu_threads.h"
#include "dpkit/optim/torch/dp_optimizer.h"

namespace dpkit::models {
namespace {

constexpr char kModelFile[] = "model.pt";
constexpr char kOptimizerFile[] = "optimizer.pt";
constexpr char kStepKey[] = "dpkit_next_step";

// Writes `module`'s (or the optimizer's) state with its step to `path`.
template <typename Saveable>
absl::Status SaveArchive(Saveable& state, int64_t next_step, const std::string& path) {
  try {
    torch::serialize::OutputArchive archive;
    state.save(archive);
    archive.write(kStepKey, torch::tensor(next_step, torch::kLong));
    archive.save_to(path);
  } catch (const std::exception&) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

// Loads `state` from `path`; returns the step it holds.
template <typename Loadable>
absl::StatusOr<int64_t> LoadArchive(Loadable& state, const std::string& path,
                                    const torch::Device& device) {
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path, device);
    state.load(archive);
    torch::Tensor step;
    if (!archive.try_read(kStepKey, step) || step.numel() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resume: ", path, " holds no step (not a dpkit checkpoint)"));
    }
    return step.to(torch::kCPU).item<int64_t>();
  } catch (const std::exception&) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume: ", path, " cannot be read (truncated, or not this model's checkpoint)"));
  }
}

class TorchDpTask : public TrainingTask {
 public:
  // `users`: set for --privacy_unit=user (the run's units are then the users).
  TorchDpTask(TorchTask task, DistributedSettings distributed, std::optional<UserIndex> users)
      : task_(std::move(task)), distributed_(std::move(distributed)), users_(std::move(users)) {}

  int64_t train_size() const override {
    return users_ ? users_->num_users() : task_.train_size;
  }
  TaskDefaults defaults() const override {
    if (!users_) return task_.defaults;
    // The model's example-level sampling rate, applied to the users.
    TaskDefaults d = task_.defaults;
    d.batch_size = UserLevelBatchSize(users_->num_users(), task_.train_size, d.batch_size);
    d.batch_size_rule = "the model's sampling rate times the number of users (user-level DP)";
    return d;
  }
  std::vector<std::string> privacy_flags() const override { return DpStepPrivacyFlagNames(); }
  std::vector<std::string> state_files() const override { return {kModelFile, kOptimizerFile}; }
  std::vector<std::string> other_files() const override { return task_.prepared_files; }
  bool TrainsOnSeveralProcesses() const override { return true; }
  std::string DescribeThreads() const override {
    if (!group_) return task_.threads;
    return absl::StrCat(task_.threads, " per process; ", group_->world_size(),
                        " processes (c10d ", group_->backend(), ", ", all_reduce_bytes_,
                        " bytes all-reduced per step)");
  }

  absl::Status Validate(const RunPlan& plan) override {
    absl::StatusOr<torch::Device> device = TrainingDevice(plan.device);
    if (!device.ok()) return device.status();
    optim::DpOptimizerOptions options;
    options.clip_norm = plan.privacy.clip_norm;
    if (task_.prepare && (users_ || plan.step.fixed_size())) {
      // The preparation's event (DP-PCA) is example-level under add/remove adjacency; the
      // ledger must not compose it with user-level or replace-one steps.
      return absl::InvalidArgumentError(absl::StrCat(
          task_.model_name, " spends privacy in a preparation step accounted per example "
                            "under add/remove adjacency: it needs --privacy_unit=example and "
                            "--sampler=poisson or shuffled"));
    }
    if (distributed_.active()) {
      absl::Status valid = CheckDistributedSettings(distributed_);
      if (!valid.ok()) return valid;
      // Each rank Poisson-samples its own shard (engine/distributed.h); microbatches (a
      // per-step key shared by the ranks), shuffled batches and a data-dependent
      // preparation (DP-PCA) are single-process only.
      if (plan.step.sampler != "poisson" || plan.step.microbatch_size > 1 || task_.prepare ||
          users_) {
        return absl::InvalidArgumentError(absl::StrCat(
            "several processes (--world_size=", distributed_.world_size, ") need ",
            task_.prepare ? absl::StrCat("a model without a preparation step (", task_.model_name,
                                         " has one)")
                          : "--sampler=poisson and --microbatch_size=1 (and "
                            "--privacy_unit=example)"));
      }
    }
    return ApplyDpStepOptions(plan.step, *task_.model, &options);
  }

  absl::Status Start(const RunPlan& plan, LedgerSink& ledger, bool resumed,
                     const std::string& output_dir) override {
    absl::StatusOr<torch::Device> device = TrainingDevice(plan.device);
    if (!device.ok()) return device.status();
    device_ = *device;
    auto noise = mechanisms::SecureRandomGenerator::Create();
    if (!noise.ok()) return noise.status();
    auto sample = mechanisms::SecureRandomGenerator::Create();
    if (!sample.ok()) return sample.status();
    sample_rng_ = *std::move(sample);
    if (task_.prepare) {
      absl::Status prepared = task_.prepare({resumed, output_dir, &ledger, noise->get()});
      if (!prepared.ok()) return prepared;
    }
    absl::StatusOr<optim::StepRecordSampler> records = optim::StepRecordSampler::Create(
        plan.train_size, plan.privacy.batch_size, plan.step.microbatch_size, plan.step.shuffled());
    if (!records.ok()) return records.status();
    records_.emplace(*std::move(records));
    physical_batch_size_ = plan.step.physical_batch_size;
    microbatch_size_ = plan.step.microbatch_size;
    steps_per_epoch_ = plan.steps_per_epoch;
    planned_learning_rate_ = plan.learning_rate;
    fixed_size_ = plan.step.fixed_size();
    sampling_rate_ = plan.privacy.sampling_rate;
    batch_size_ = plan.privacy.batch_size;
    torch::nn::Module& model = *task_.model;
    model.to(device_);
    auto torch_optimizer =
        optim::MakeTorchOptimizer(plan.optimizer, model.parameters(), plan.learning_rate);
    if (!torch_optimizer.ok()) return torch_optimizer.status();
    optim::DpOptimizerOptions options;
    options.noise_multiplier = plan.privacy.noise_multiplier;
    options.clip_norm = plan.privacy.clip_norm;
    options.sampling_rate = plan.privacy.sampling_rate;
    options.expected_batch_size = static_cast<double>(plan.privacy.batch_size);
    options.draw_noise = distributed_.writer();  // several processes: noise once, on rank 0
    absl::Status applied = ApplyDpStepOptions(plan.step, model, &options);
    if (!applied.ok()) return applied;
    auto dp = optim::DpOptimizer::Create(model, *std::move(torch_optimizer), options,
                                         *std::move(noise));
    if (!dp.ok()) return dp.status();
    dp_ = *std::move(dp);
    // The engine's ledger hears each step before its update is applied.
    optim::DpStepListener append = [&ledger](const accounting::SamplingRecord& record) {
      return ledger.AppendStep(record);
    };
    if (fixed_size_) {
      // Sampling without replacement: the step's event under replace-one adjacency.
      append = [&ledger, n = task_.train_size,
                b = plan.privacy.batch_size](const accounting::SamplingRecord& record) {
        if (!ledger.active()) return absl::OkStatus();
        absl::StatusOr<accounting::LedgerEntry> entry =
            optim::FixedSizeSampleEntry(n, b, record.queries);
        if (!entry.ok()) return entry.status();
        return ledger.AppendStepEvent(std::get<accounting::Event>(entry->record), record.step);
      };
    }
    model.train();
    if (!distributed_.active()) {
      dp_->SetStepListener(std::move(append));
      return absl::OkStatus();
    }
    // Several processes: rank 0 appends after the all-reduce and before the commit that
    // every rank's update waits for (engine/distributed.h, step 5).
    absl::StatusOr<std::unique_ptr<DistributedGroup>> group =
        DistributedGroup::Connect(distributed_, device_);
    if (!group.ok()) return group.status();
    group_ = *std::move(group);
    absl::StatusOr<std::unique_ptr<DistributedDpStep>> step = DistributedDpStep::Create(
        *group_, model, *dp_, std::move(append), distributed_.checksum_every);
    if (!step.ok()) return step.status();
    distributed_step_ = *std::move(step);
    for (const torch::Tensor& p : model.parameters()) {
      if (p.requires_grad()) {
        all_reduce_bytes_ += p.numel() * static_cast<int64_t>(p.element_size());
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<StepOutcome> Step(int64_t step, LedgerSink& /*ledger: the listener*/) override {
    // Records: a Poisson sample (or the shuffled loader's next batch), as single examples
    // or as microbatches by a keyed hash of the example index (optim/poisson_sampler.h).
    absl::StatusOr<optim::MicrobatchedBatch> grouped = Records(step);
    if (!grouped.ok()) return grouped.status();
    const torch::Tensor index = torch::tensor(grouped->examples, torch::kLong);
    StepOutcome outcome;
    for (const optim::PhysicalBatchRange& range :
         optim::PhysicalBatchRanges(grouped->microbatch_sizes, physical_batch_size_)) {
      TorchLosses losses =
          task_.losses(index.narrow(0, range.first_example, range.num_examples), device_);
      losses.losses.sum().backward();
      absl::Span<const int64_t> sizes;
      if (microbatch_size_ > 1 || users_) {
        sizes = absl::MakeConstSpan(grouped->microbatch_sizes)
                    .subspan(static_cast<size_t>(range.first_microbatch),
                             static_cast<size_t>(range.num_microbatches));
      }
      absl::StatusOr<int64_t> done = dp_->AccumulatePhysicalBatch(sizes);
      if (!done.ok()) return done.status();
      outcome.loss_sum += losses.losses.detach().sum().item<double>();
      outcome.examples += range.num_examples;
      if (losses.correct >= 0) outcome.correct = std::max<int64_t>(outcome.correct, 0) + losses.correct;
    }
    if (task_.learning_rate_at) {
      const double rate = task_.learning_rate_at(step, steps_per_epoch_, planned_learning_rate_);
      for (auto& group : dp_->optimizer().param_groups()) group.options().set_lr(rate);
    }
    absl::StatusOr<optim::DpStepResult> stepped =
        distributed_step_ ? distributed_step_->Step(step) : dp_->Step(step);
    if (!stepped.ok()) return stepped.status();
    return outcome;
  }

  // This step's records: one process draws them from the whole set; with several, this
  // rank Poisson-samples its shard (each example its own record), after the first step's
  // copy of rank 0's parameters to every rank.
  absl::StatusOr<optim::MicrobatchedBatch> Records(int64_t step) {
    if (users_) return users_->SampleRecords(*sample_rng_, sampling_rate_);
    if (fixed_size_) {
      absl::StatusOr<std::vector<int64_t>> sample =
          optim::FixedSizeSample(*sample_rng_, task_.train_size, batch_size_);
      if (!sample.ok()) return sample.status();
      optim::MicrobatchedBatch batch;
      batch.microbatch_sizes.assign(sample->size(), 1);
      batch.examples = *std::move(sample);
      return batch;
    }
    if (!distributed_step_) return records_->Next(step, *sample_rng_);
    if (!synchronized_) {
      absl::Status synced = distributed_step_->SynchronizeParameters(step);
      if (!synced.ok()) return synced;
      synchronized_ = true;
    }
    absl::StatusOr<std::vector<int64_t>> sample =
        PoissonSampleShard(*sample_rng_, task_.train_size, sampling_rate_,
                           distributed_.rank, distributed_.world_size);
    if (!sample.ok()) return sample.status();
    optim::MicrobatchedBatch batch;
    batch.microbatch_sizes.assign(sample->size(), 1);
    batch.examples = *std::move(sample);
    return batch;
  }

  bool ReleasesPrivateTrainMetrics() const override { return true; }

  // --train_metrics=private (models/train_metrics.h): a fresh Poisson sample of the training
  // set (secure generator), evaluated by the current model in eval mode without gradients,
  // released by the nested query; its event reaches the ledger before the values return.
  absl::StatusOr<TrainMetricsRelease> PrivateTrainMetrics(int64_t step,
                                                          const TrainMetricsOptions& options,
                                                          LedgerSink& ledger) override {
    absl::StatusOr<std::vector<int64_t>> sample =
        optim::PoissonSample(*sample_rng_, task_.train_size, options.sampling_rate);
    if (!sample.ok()) return sample.status();
    TrainMetricsSample values;
    {
      torch::NoGradGuard no_grad;
      task_.model->eval();
      const torch::Tensor index = torch::tensor(*sample, torch::kLong);
      bool classifier = true;
      for (int64_t first = 0; first < index.size(0); first += physical_batch_size_) {
        const int64_t len = std::min<int64_t>(physical_batch_size_, index.size(0) - first);
        TorchLosses losses = task_.losses(index.narrow(0, first, len), device_);
        const torch::Tensor l = losses.losses.detach().to(torch::kCPU, torch::kDouble).contiguous();
        values.losses.insert(values.losses.end(), l.data_ptr<double>(), l.data_ptr<double>() + len);
        classifier = classifier && losses.correct_mask.defined();
        if (classifier) {
          const torch::Tensor c = losses.correct_mask.to(torch::kCPU, torch::kDouble).contiguous();
          values.correct.insert(values.correct.end(), c.data_ptr<double>(),
                                c.data_ptr<double>() + len);
        }
      }
      if (!classifier || index.size(0) == 0) values.correct.clear();
      task_.model->train();
    }
    if (!metrics_noise_) {
      auto noise = mechanisms::SecureRandomGenerator::Create();
      if (!noise.ok()) return noise.status();
      metrics_noise_ = *std::move(noise);
    }
    return ReleaseTrainMetrics(
        options, task_.train_size, values, step, *metrics_noise_,
        [&ledger](const accounting::Event& event) { return ledger.AppendEvent(event); });
  }

  absl::StatusOr<nlohmann::json> Evaluate() override {
    torch::NoGradGuard no_grad;
    task_.model->eval();
    nlohmann::json metrics = task_.evaluate(device_);
    task_.model->train();
    return metrics;
  }

  std::string Describe(const nlohmann::json& metrics) const override {
    return task_.describe(metrics);
  }

  absl::Status Save(const std::string& dir, const std::string& suffix, int64_t next_step) override {
    absl::Status saved = SaveArchive(*task_.model, next_step, Join(dir, kModelFile) + suffix);
    if (!saved.ok()) return saved;
    return SaveArchive(dp_->optimizer(), next_step, Join(dir, kOptimizerFile) + suffix);
  }

  absl::StatusOr<int64_t> Load(const std::string& dir) override {
    absl::StatusOr<int64_t> model_step = LoadArchive(*task_.model, Join(dir, kModelFile), device_);
    if (!model_step.ok()) return model_step;
    // The optimizer's state (moments) is post-processing of accounted steps: one from an
    // earlier checkpoint (a crash between the two renames) is harmless to privacy.
    absl::StatusOr<int64_t> optimizer_step =
        LoadArchive(dp_->optimizer(), Join(dir, kOptimizerFile), device_);
    if (!optimizer_step.ok()) return optimizer_step;
    return model_step;
  }

 private:
  TorchTask task_;
  torch::Device device_{torch::kCPU};
  std::unique_ptr<mechanisms::RandomGenerator> sample_rng_;
  std::unique_ptr<mechanisms::RandomGenerator> metrics_noise_;  // --train_metrics=private
  std::optional<optim::StepRecordSampler> records_;
  std::unique_ptr<optim::DpOptimizer> dp_;
  int64_t physical_batch_size_ = 512, microbatch_size_ = 1, batch_size_ = 1;
  int64_t steps_per_epoch_ = 1;
  double planned_learning_rate_ = 0;
  bool fixed_size_ = false;
  DistributedSettings distributed_;
  std::optional<UserIndex> users_;
  double sampling_rate_ = 0;
  // Several processes only (declared after dp_: destroyed before it).
  std::unique_ptr<DistributedGroup> group_;
  std::unique_ptr<DistributedDpStep> distributed_step_;
  bool synchronized_ = false;
  int64_t all_reduce_bytes_ = 0;  // per step and rank: the trainable parameters' gradients
};

}  // namespace

std::string ConfigureTorchThreads(const TrainOptions& options) {
  return optim::DescribeCpuThreadSetup(optim::ConfigureCpuThreads(options.threads));
}

absl::StatusOr<torch::Device> TrainingDevice(const std::string& device) {
  if (device == "cpu") return torch::Device(torch::kCPU);
  if (device == "cuda") {
    if (!torch::cuda::is_available()) {
      return absl::InvalidArgumentError(
          "--device=cuda: no CUDA device visible to this LibTorch build (build with "
          "--config=cuda or tools/build_cuda_trainer.sh; see models/README.md)");
    }
    return torch::Device(torch::kCUDA);
  }
  return absl::InvalidArgumentError(absl::StrCat("--device must be cpu or cuda, got '", device, "'"));
}

std::vector<std::string> DpStepPrivacyFlagNames() {
  std::vector<std::string> names;
  const std::vector<std::string> metrics = TrainMetricsFlagNames();
  for (std::string& name : DpStepFlagNames()) {
    // Memory only; and each metrics release is in the ledger, so a resumed run may change
    // them.
    if (name == "physical_batch_size" ||
        std::find(metrics.begin(), metrics.end(), name) != metrics.end()) {
      continue;
    }
    names.push_back(std::move(name));
  }
  return names;
}

absl::Status RunTorchTraining(const TrainOptions& options, TorchTask task) {
  // --privacy_unit and --user_ids decide the run's units before planning (on --resume,
  // the checkpoint's values).
  absl::StatusOr<TrainOptions> effective = WithCheckpointFlags(options, DpStepPrivacyFlagNames());
  if (!effective.ok()) return effective.status();
  const auto flag = [&](const std::string& name) {
    const auto it = effective->extra_flags.find(name);
    return it == effective->extra_flags.end() ? std::string() : it->second;
  };
  std::optional<UserIndex> users;
  if (flag("privacy_unit") == "user") {
    std::vector<int64_t> ids = task.user_of_example;
    if (!flag("user_ids").empty()) {
      absl::StatusOr<std::vector<int64_t>> read = ReadUserIds(flag("user_ids"), task.train_size);
      if (!read.ok()) return read.status();
      ids = *std::move(read);
    } else if (static_cast<int64_t>(ids.size()) != task.train_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--privacy_unit=user: ", task.model_name,
          " has no user column; give --user_ids (one user id per training example)"));
    }
    absl::StatusOr<UserIndex> index = UserIndex::Create(ids);
    if (!index.ok()) return index.status();
    users = *std::move(index);
  }
  TorchDpTask runner(std::move(task), options.distributed, std::move(users));
  return RunTraining(options, runner);
}

TorchLosses ClassificationLosses(const torch::Tensor& logits, const torch::Tensor& labels) {
  namespace F = torch::nn::functional;
  TorchLosses out{F::cross_entropy(logits, labels,
                                   F::CrossEntropyFuncOptions().reduction(torch::kNone))};
  out.correct_mask = logits.argmax(1).eq(labels);
  out.correct = out.correct_mask.sum().item<int64_t>();
  return out;
}

nlohmann::json TestAccuracyJson(int64_t correct, int64_t total) {
  return {{"test_accuracy", total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0}};
}

std::string DescribeTestAccuracy(const nlohmann::json& metrics) {
  return absl::StrFormat("test accuracy %.2f%%", 100 * metrics["test_accuracy"].get<double>());
}

}  // namespace dpkit::models
