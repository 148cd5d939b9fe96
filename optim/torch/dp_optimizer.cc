#include "optim/torch/dp_optimizer.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mechanisms/gaussian.h"

namespace dpkit::optim {

absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeTorchOptimizer(
    const std::string& name, std::vector<torch::Tensor> parameters, double learning_rate) {
  if (!(std::isfinite(learning_rate) && learning_rate > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning_rate must be finite and > 0, got ", learning_rate));
  }
  if (name == "sgd") {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::SGD>(
        parameters, torch::optim::SGDOptions(learning_rate)));
  }
  if (name == "adam") {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::Adam>(
        parameters, torch::optim::AdamOptions(learning_rate)));
  }
  if (name == "adagrad") {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::Adagrad>(
        parameters, torch::optim::AdagradOptions(learning_rate)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer must be one of sgd, adam, adagrad, got '", name, "'"));
}

absl::StatusOr<std::unique_ptr<DpOptimizer>> DpOptimizer::Create(
    torch::nn::Module& model, std::unique_ptr<torch::optim::Optimizer> optimizer,
    const DpOptimizerOptions& options,
    std::unique_ptr<mechanisms::RandomGenerator> noise_generator) {
  if (optimizer == nullptr || noise_generator == nullptr) {
    return absl::InvalidArgumentError("optimizer and noise generator must be given");
  }
  if (!(std::isfinite(options.noise_multiplier) && options.noise_multiplier >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noise_multiplier must be finite and >= 0, got ", options.noise_multiplier));
  }
  if (!(options.sampling_rate > 0 && options.sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate must be in (0, 1], got ", options.sampling_rate));
  }
  if (!(std::isfinite(options.expected_batch_size) && options.expected_batch_size > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected_batch_size must be finite and > 0, got ", options.expected_batch_size));
  }
  auto dp = std::unique_ptr<DpOptimizer>(new DpOptimizer());
  absl::Status valid = ValidateForPerExampleGradients(model, &dp->layers_);
  if (!valid.ok()) return valid;
  absl::StatusOr<ClippingGroups> groups =
      MakeClippingGroups(options.clipping, options.clip_norm,
                         static_cast<int>(dp->layers_.size()), options.joint_groups,
                         options.joint_clip_norms);
  if (!groups.ok()) return groups.status();
  // Every trainable parameter of the model must be one the optimizer steps and one a
  // layer clips; otherwise it would be updated without privacy.
  int64_t clipped = 0;
  for (auto& l : dp->layers_) clipped += static_cast<int64_t>(l.layer->DpParameters().size());
  int64_t trainable = 0;
  for (const auto& p : model.parameters()) trainable += p.requires_grad() ? 1 : 0;
  if (trainable != clipped) {
    return absl::InvalidArgumentError("model has trainable parameters outside its DP layers");
  }
  dp->optimizer_ = std::move(optimizer);
  dp->options_ = options;
  dp->groups_ = *std::move(groups);
  dp->noise_ = std::move(noise_generator);
  for (auto& l : dp->layers_) {
    std::vector<torch::Tensor> acc;
    for (auto& p : l.layer->DpParameters()) acc.push_back(torch::zeros_like(p));
    dp->accumulators_.push_back(std::move(acc));
  }
  return dp;
}

absl::StatusOr<int64_t> DpOptimizer::AccumulatePhysicalBatch() {
  torch::NoGradGuard no_grad;
  int64_t batch = -1;
  for (auto& l : layers_) {
    if (!l.layer->HasCapture()) continue;
    int64_t b = l.layer->CapturedBatchSize();
    if (batch != -1 && b != batch) {
      return absl::InternalError(absl::StrCat("layer ", l.name, " captured ", b,
                                              " examples, another layer ", batch));
    }
    batch = b;
  }
  if (batch <= 0) return 0;
  // Squared norms per layer (sum over its parameters), then per group.
  const int num_groups = static_cast<int>(groups_.clip_norms.size());
  std::vector<torch::Tensor> group_sq(num_groups);
  for (int g = 0; g < num_groups; ++g) group_sq[g] = torch::zeros({batch}, torch::kFloat64);
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!layers_[i].layer->HasCapture()) continue;
    std::vector<torch::Tensor> norms;
    layers_[i].layer->AppendSquaredNorms(&norms);
    for (const torch::Tensor& n : norms) group_sq[groups_.group_of_layer[i]] += n.cpu();
  }
  // Clip factors min(1, C_g / ||g_i,g||) (Abadi et al. 2016, Alg. 1), per group.
  std::vector<torch::Tensor> factors(num_groups);
  last_norms_.assign(batch, 0.0);
  for (int g = 0; g < num_groups; ++g) {
    torch::Tensor sq = group_sq[g].contiguous();
    torch::Tensor f = torch::empty({batch}, torch::kFloat64);
    ClipFactors(absl::MakeConstSpan(sq.data_ptr<double>(), batch), groups_.clip_norms[g],
                absl::MakeSpan(f.data_ptr<double>(), batch));
    for (int64_t i = 0; i < batch; ++i) last_norms_[i] += sq.data_ptr<double>()[i];
    factors[g] = f;
  }
  for (double& n : last_norms_) n = std::sqrt(n);
  for (size_t i = 0; i < layers_.size(); ++i) {
    PerExampleLayer* layer = layers_[i].layer;
    if (!layer->HasCapture()) continue;
    torch::Tensor f = factors[groups_.group_of_layer[i]].to(
        accumulators_[i][0].options().dtype(torch::kFloat64));
    std::vector<torch::Tensor> scales(accumulators_[i].size(), f);
    std::vector<torch::Tensor> sums = layer->ScaledGradientSums(scales);
    for (size_t k = 0; k < sums.size(); ++k) accumulators_[i][k].add_(sums[k]);
    layer->ClearCapture();
  }
  examples_ += batch;
  return batch;
}

absl::StatusOr<DpStepRecord> DpOptimizer::Step() {
  torch::NoGradGuard no_grad;
  const double sensitivity = groups_.TotalSensitivity();
  const double noise_stddev = options_.noise_multiplier * sensitivity;
  const double inverse_batch = 1.0 / options_.expected_batch_size;
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<torch::Tensor> params = layers_[i].layer->DpParameters();
    for (size_t k = 0; k < params.size(); ++k) {
      torch::Tensor& acc = accumulators_[i][k];
      if (noise_stddev > 0) {
        // N(0, sigma^2 S^2) per coordinate from the secure generator, drawn on the CPU.
        torch::Tensor noise = torch::empty(acc.sizes(), torch::kFloat32);
        mechanisms::FillGaussian(*noise_, noise_stddev, noise.data_ptr<float>(),
                                 static_cast<size_t>(noise.numel()));
        acc.add_(noise.to(acc.device(), acc.scalar_type()));
      }
      // Abadi et al. 2016, Alg. 1: g~ = (sum_i clip(g_i) + N(0, sigma^2 C^2 I)) / L.
      params[k].mutable_grad() = acc.mul(inverse_batch);
      acc.zero_();
    }
  }
  optimizer_->step();
  DpStepRecord record;
  record.sampling_rate = options_.sampling_rate;
  for (double c : groups_.clip_norms) record.queries.push_back({c, noise_stddev});
  record.batch_examples = examples_;
  examples_ = 0;
  return record;
}

}  // namespace dpkit::optim
