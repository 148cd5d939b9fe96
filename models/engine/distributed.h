// Data-parallel DP-SGD on LibTorch's c10d (Gloo for CPU tensors; NCCL for CUDA tensors in
// a CUDA build compiled with DPKIT_WITH_NCCL): N ranks train one model with one privacy
// ledger, like Opacus' DPDDP / DistributedDPOptimizer and JAX Privacy's SPMD training.
//
// One step, on every rank r of N (DistributedDpStep):
//   1. sampling: rank r owns the disjoint shard ShardOf(n, r, N) of the training set and
//      Poisson-samples it with the GLOBAL rate q (PoissonSampleShard), from its own secure
//      generator. Each example is in exactly one shard and joins its shard's sample
//      independently with probability q, so the union of the N samples IS a Poisson sample
//      of rate q of the whole set (Abadi et al. 2016, Sec. 3.1: "each example is selected
//      independently with probability q"): the accountants' assumption holds unchanged;
//   2. per-record clipping of the local sample (optim::DpOptimizer::AccumulatePhysicalBatch),
//      giving the local clipped sum S_r;
//   3. noise ONCE per step: only rank 0 draws z ~ N(0, sigma^2 Delta^2 I) from its secure
//      generator (its DpOptimizer has draw_noise = true, every other rank's false) and adds
//      it to S_0; every rank divides by the global expected batch size B = q n
//      (DpOptimizer's fixed denominator), giving g_r = (S_r + [r = 0] z) / B;
//   4. all-reduce (sum) of the g_r: by linearity every rank holds
//        sum_r g_r = (sum_r S_r + z) / B = (S + z) / B,
//      the single-process update of Abadi et al. 2016, Alg. 1 for the union sample, with one
//      draw z of the full standard deviation sigma Delta: the released sum is the Gaussian
//      sum query that the ledger records, so epsilon is that of the single-process run with
//      the same q, sigma and steps. (The alternative, independent N(0, sigma^2 Delta^2 / N)
//      on every rank, sums to the same law, but needs every rank's generator to be trusted
//      and its noise differs from a one-process run's; drawing once keeps runs comparable.)
//   5. commit: rank 0 appends the step's sampling record (q, the noise plan's {Delta,
//      sigma Delta}) to the ledger, durably (fsync), and broadcasts whether it did (8
//      bytes); a rank applies the update only when the broadcast says so, and rank 0
//      applies every update it appended, even when its broadcast then fails (it stops
//      after the update). So no rank applies an update whose ledger line is not durable,
//      and the ledger holds exactly the updates rank 0 applied (rank 0's state is the one
//      that is saved): a failed all-reduce is neither accounted nor applied by any rank; a
//      failed append is applied by no rank; a failed broadcast is accounted and applied
//      by rank 0, and by the ranks that received it. (Between the all-reduce and the
//      append the noised sum exists only in the ranks' memory, inside the trust boundary
//      that already sees each rank's un-noised clipped sum S_r during the all-reduce, as
//      in Opacus' DPDDP; it is released only through an applied update, so only an
//      applied update must be counted.) As for one process, a kill -9 after the append
//      and before the update leaves the one accounted, unapplied step (safe);
//   6. every rank applies the identical update (the all-reduce result is bit-identical on
//      every rank, so are the parameters); every k steps a checksum all-gather of the
//      parameters' bytes checks it (a mismatch is a one-line error naming the ranks).
// Rank 0 writes the ledger, the metrics and the checkpoints (training_engine.cc).
//
// Faults: every collective has a timeout. A rank whose collective fails (a peer died: the
// connection is reset; a peer hung: the timeout passes) reports it in the rendezvous store
// and waits a short grace period for the other ranks' reports; the ranks that did not
// report are named in the one-line error ("rank 1 did not answer"); when the store itself
// is gone, rank 0 (its host) failed. The ledger then holds exactly the steps rank 0
// applied (step 5).
#ifndef DPKIT_MODELS_ENGINE_DISTRIBUTED_H_
#define DPKIT_MODELS_ENGINE_DISTRIBUTED_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/optim/torch/dp_optimizer.h"

namespace dpkit::models {

// The contiguous block [begin, end) of {0, ..., population - 1} that `rank` of `world_size`
// owns: the blocks of all ranks partition the set, sizes differ by at most one.
struct Shard {
  int64_t begin = 0, end = 0;
};
Shard ShardOf(int64_t population, int rank, int world_size);

// The sorted global indices of a Poisson sample of rate q of rank's shard (see above: the
// union over ranks is a Poisson sample of rate q of the whole set).
absl::StatusOr<std::vector<int64_t>> PoissonSampleShard(mechanisms::RandomGenerator& rng,
                                                        int64_t population, double sampling_rate,
                                                        int rank, int world_size);

// Checks rank, world size, rendezvous address and port, timeout and checksum period
// (one-line errors naming the flag and its environment variable).
absl::Status CheckDistributedSettings(const DistributedSettings& settings);

// A c10d process group: TCPStore rendezvous at master_addr:master_port (rank 0 hosts it),
// Gloo (CPU) or NCCL (CUDA, DPKIT_WITH_NCCL builds). Collectives return one-line errors
// naming the failed rank (see the file comment).
class DistributedGroup {
 public:
  static absl::StatusOr<std::unique_ptr<DistributedGroup>> Connect(
      const DistributedSettings& settings, const torch::Device& device);
  ~DistributedGroup();
  DistributedGroup(const DistributedGroup&) = delete;
  DistributedGroup& operator=(const DistributedGroup&) = delete;

  int rank() const;
  int world_size() const;
  // In-place sum over ranks of `tensors` (of one dtype), through one flat buffer.
  absl::Status AllReduceSum(const std::vector<torch::Tensor>& tensors, int64_t step);
  // Rank 0's values of `tensors` on every rank, in place.
  absl::Status Broadcast(const std::vector<torch::Tensor>& tensors, int64_t step);
  // Checks that `tensors` are bit-identical on every rank (a 64-bit hash, all-gathered).
  absl::Status CheckIdentical(const std::vector<torch::Tensor>& tensors, int64_t step);
  // Bytes of the last AllReduceSum's buffer (per rank) and of all of them.
  int64_t last_all_reduce_bytes() const;
  int64_t total_all_reduce_bytes() const;
  const std::string& backend() const;  // "Gloo" or "NCCL"

 private:
  struct Impl;
  explicit DistributedGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The distributed DP step around a DpOptimizer (steps 3 to 6 of the file comment). Usage,
// on every rank, with the caller's own model and data:
//   options.draw_noise = group.rank() == 0;            // noise once, on rank 0
//   auto dp = optim::DpOptimizer::Create(model, torch_optimizer, options, secure_noise);
//   auto step = DistributedDpStep::Create(group, model, **dp, ledger_append, every_k);
//   (*step)->SynchronizeParameters(first_step);        // rank 0's parameters everywhere
//   for each step t: indices = PoissonSampleShard(rng, n, q, rank, N);
//                    forward, backward of the summed losses, dp->AccumulatePhysicalBatch();
//                    (*step)->Step(t);
class DistributedDpStep {
 public:
  // `dp` must not draw noise on ranks other than 0 and must draw it on rank 0.
  // `rank_zero_listener` (the ledger append) runs on rank 0 after the all-reduce and
  // before the commit broadcast (step 5); an error there is broadcast, and no rank applies
  // that update.
  static absl::StatusOr<std::unique_ptr<DistributedDpStep>> Create(
      DistributedGroup& group, torch::nn::Module& model, optim::DpOptimizer& dp,
      optim::DpStepListener rank_zero_listener, int64_t checksum_every);

  // Copies rank 0's parameters to every rank (at the start and after a resume) and checks
  // that every rank starts at rank 0's `step`.
  absl::Status SynchronizeParameters(int64_t step);

  // dp.Step(step) with the all-reduce and the commit before the update; then, every
  // checksum_every steps, the parameter check.
  absl::StatusOr<optim::DpStepResult> Step(int64_t step);

  DistributedGroup& group() { return group_; }

 private:
  DistributedDpStep(DistributedGroup& group, torch::nn::Module& model, optim::DpOptimizer& dp,
                    optim::DpStepListener listener, int64_t checksum_every)
      : group_(group), model_(model), dp_(dp), rank_zero_listener_(std::move(listener)),
        checksum_every_(checksum_every) {}
  std::vector<torch::Tensor> TrainableParameters() const;
  DistributedGroup& group_;
  torch::nn::Module& model_;
  optim::DpOptimizer& dp_;
  optim::DpStepListener rank_zero_listener_;
  int64_t checksum_every_;
  int64_t current_step_ = 0;
  // Rank 0: the commit broadcast's error, returned after the (accounted) update.
  absl::Status after_update_;
};

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_ENGINE_DISTRIBUTED_H_
