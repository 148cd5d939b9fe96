// NoisySGD / NoisyAdam on a flat parameter vector (Bu et al. 2020, Algorithms 1–2;
// Abadi et al. 2016, Alg. 1), framework-free, for the small models of models/wide:
// clip each example's gradient to clip_norm, sum, add N(0, (noise_multiplier *
// clip_norm)^2) per coordinate from the given (secure) generator, divide by the expected
// batch size, then an SGD or Adam (Kingma & Ba 2015, Alg. 1) update. noise_multiplier 0
// is non-private training (no noise; the caller records no privacy event).
#ifndef DPKIT_MODELS_WIDE_DENSE_DP_OPTIMIZER_H_
#define DPKIT_MODELS_WIDE_DENSE_DP_OPTIMIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "mechanisms/random.h"

namespace dpkit::models::wide {

class DenseDpOptimizer {
 public:
  // optimizer: "sgd" or "adam". learning_rate, clip_norm, expected_batch_size finite > 0;
  // noise_multiplier finite >= 0.
  static absl::StatusOr<DenseDpOptimizer> Create(const std::string& optimizer,
                                                 int64_t num_params, double learning_rate,
                                                 double clip_norm, double noise_multiplier,
                                                 double expected_batch_size);

  // per_example: batch x num_params, row-major (batch may be 0).
  void Step(absl::Span<const float> per_example, int64_t batch, absl::Span<float> params,
            mechanisms::RandomGenerator& rng);

  // The same step when the caller has already clipped each example to clip_norm and
  // summed (e.g. sparse embedding gradients accumulated row by row): `clipped_sum` has
  // num_params entries; last_gradient() then holds the noisy average.
  void StepWithClippedSum(absl::Span<double> clipped_sum, absl::Span<float> params,
                          mechanisms::RandomGenerator& rng);

  // The noisy average gradient of the last step (for tests).
  const std::vector<double>& last_gradient() const { return gradient_; }

 private:
  DenseDpOptimizer(bool adam, int64_t n, double lr, double c, double z, double b)
      : adam_(adam), num_params_(n), learning_rate_(lr), clip_norm_(c), noise_multiplier_(z),
        expected_batch_size_(b), gradient_(static_cast<size_t>(n)), m_(adam ? n : 0, 0.0),
        v_(adam ? n : 0, 0.0) {}
  bool adam_;
  int64_t num_params_;
  double learning_rate_, clip_norm_, noise_multiplier_, expected_batch_size_;
  std::vector<double> gradient_, m_, v_;
  int64_t t_ = 0;
};

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_DENSE_DP_OPTIMIZER_H_
