// The privacy ledger of a training run (McMahan et al. 2018, Sec. 3), and epsilon from it.
//
// A thin adapter over //accounting:ledger (LedgerWriter / ReadLedger / LedgerToEvent) in
// the trainers' terms. One JSON line per DP step:
//   {"type":"sample","step":12,"sampling_rate":0.004266,
//    "queries":[{"clip_norm":1.5,"noise_stddev":1.95}]}
// and one line per other mechanism (e.g. DP-PCA): {"type":"event","event":{...}}.
// Appends are crash-safe (see accounting/ledger.h): each line is one write() + fsync(), and
// the trainer appends a step before it reports anything computed after that step.
//
// Epsilon is computed from the FILE, never from the optimizer's arithmetic: the ledger is
// read back, consecutive identical steps are merged into
// SelfComposed(PoissonSampled(q, Gaussian(z)), k) with the collapsed noise multiplier
// z = (sum_g (C_g / s_g)^2)^(-1/2) (McMahan et al. 2018, eq. (1)), and the resulting event is
// given to the PLD accountant (certified upper and lower bounds) and the RDP accountant
// (certified upper bound, optimal conversion of Asoodeh et al. 2021); the reported bound is
// the smaller certified upper bound. For a homogeneous run the GDP CLT value mu_CLT (Bu et al. 2020, eq. (3.1)) is shown
// labelled approximate (it is not an upper bound).
#ifndef DPKIT_MODELS_TRAINING_LEDGER_H_
#define DPKIT_MODELS_TRAINING_LEDGER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/ledger.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {

class TrainingLedger {
 public:
  // Creates the file or appends to it (resume continues the same ledger).
  static absl::StatusOr<TrainingLedger> Open(const std::string& path);
  TrainingLedger(TrainingLedger&& other) noexcept;
  TrainingLedger& operator=(TrainingLedger&& other) noexcept;
  ~TrainingLedger();

  // One Poisson-sampled step with its sum queries (the noise plan's records,
  // optim/clipping.h).
  absl::Status AppendStep(const accounting::SamplingRecord& record);
  // Any other mechanism, as an event.
  absl::Status AppendEvent(const accounting::Event& event);

 private:
  explicit TrainingLedger(std::unique_ptr<accounting::LedgerWriter> writer)
      : writer_(std::move(writer)) {}
  std::unique_ptr<accounting::LedgerWriter> writer_;
};

// The composed event of a ledger file; `steps` receives the number of sample lines.
absl::StatusOr<accounting::Event> LedgerFileToEvent(const std::string& path, int64_t* steps);

// Epsilon of a ledger file at `delta`: the accounting report (accounting/report.h) as
// `dpkit ledger --format=json` prints it, without the minimum-error figures:
//   {"rdp": {"epsilon", "order", "conversion"}, "pld": {"epsilon", "epsilon_upper",
//    "epsilon_lower", ...} or {"not_applicable": why}, "gdp": {"mu", "epsilon",
//    "approximate"} or {"not_applicable": why}, "headline": {"accountant", "epsilon", ...}}
// An empty ledger gives epsilon 0. `epsilon_upper` receives the headline: the smallest
// certified upper bound.
absl::StatusOr<nlohmann::json> LedgerEpsilon(const std::string& path, double delta,
                                             double* epsilon_upper);

// "eps <= 1.2346 (PLD, delta=1e-05; RDP 1.3002)" from a LedgerEpsilon object: the headline
// rounded up (accounting::ReportToLine).
std::string EpsilonText(const nlohmann::json& epsilon, double delta);

// The noise multiplier sigma for which T steps of the Poisson-subsampled Gaussian with rate
// q have RDP epsilon <= target at delta (optimal conversion), by //accounting:calibrate:
// re-accounted, it meets the target, and it is within 0.1 % of the smallest such sigma.
absl::StatusOr<double> CalibrateNoiseMultiplierRdp(double target_epsilon, double delta,
                                                   double sampling_rate, int64_t steps);

// The same for T fixed-size steps (optim/fixed_size_sampler.h): the noise multiplier
// sigma (noise sigma C at clip norm C) for which T steps of
// SampledWithoutReplacement(population, sample_size, Gaussian(sigma / 2)) — the
// replace-one event of each step — have a headline epsilon <= target at delta, the headline
// being what the run's report prints: the smaller certified upper bound of PLD
// (accounting/pld.h, replace-one) and RDP (Wang, Balle, Kasiviswanathan 2019, Thm. 9;
// optimal conversion). accounting::CalibrateWithoutReplacementNoiseMultiplier for each
// (re-accounted, within 0.1 % of the smallest sigma meeting the target); the smaller sigma.
// InvalidArgument when the target is unreachable with sigma <= 2e4 or an argument is out of
// range.
absl::StatusOr<double> CalibrateFixedSizeNoiseMultiplier(double target_epsilon, double delta,
                                                            int64_t population,
                                                            int64_t sample_size, int64_t steps);

// The noise multiplier sigma of a run whose whole event is `run_event(sigma)` (e.g. the
// training steps composed with the private training-metrics releases, models/train_metrics.h):
// a sigma >= floor_sigma whose RDP epsilon (optimal conversion) is <= target at delta, within
// 0.1 % of the smallest such sigma found by bisection in log(sigma) (epsilon is nonincreasing
// in sigma). InvalidArgument when the target is unreachable below sigma = 1e6.
absl::StatusOr<double> CalibrateRunNoiseMultiplierRdp(
    double target_epsilon, double delta, double floor_sigma,
    const std::function<absl::StatusOr<accounting::Event>(double sigma)>& run_event);

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_TRAINING_LEDGER_H_
