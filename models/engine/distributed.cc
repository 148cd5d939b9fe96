#include "dpkit/models/engine/distributed.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef DPKIT_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dpkit/optim/poisson_sampler.h"

namespace dpkit::models {
namespace {

constexpr char kFailedKey[] = "dpkit/failed/";
// How long a rank whose collective failed waits for the other ranks' reports.
constexpr std::chrono::milliseconds kReportGrace{2000};

// The first line of an exception's message, at most 160 characters.
std::string OneLine(const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));
  if (line.size() > 160) line = line.substr(0, 157) + "...";
  return line;
}

// FNV-1a over 64-bit words (Fowler, Noll, Vo), then the tail bytes.
uint64_t HashBytes(const unsigned char* data, size_t bytes, uint64_t hash) {
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    hash = (hash ^ word) * kPrime;
  }
  for (; i < bytes; ++i) hash = (hash ^ data[i]) * kPrime;
  return hash;
}

}  // namespace

Shard ShardOf(int64_t population, int rank, int world_size) {
  const int64_t base = population / world_size, extra = population % world_size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

absl::StatusOr<std::vector<int64_t>> PoissonSampleShard(mechanisms::RandomGenerator& rng,
                                                        int64_t population, double sampling_rate,
                                                        int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in [0, world_size ", world_size, ")"));
  }
  const Shard shard = ShardOf(population, rank, world_size);
  if (shard.end == shard.begin) return std::vector<int64_t>();
  absl::StatusOr<std::vector<int64_t>> local =
      optim::PoissonSample(rng, shard.end - shard.begin, sampling_rate);
  if (!local.ok()) return local.status();
  for (int64_t& index : *local) index += shard.begin;
  return local;
}

absl::Status CheckDistributedSettings(const DistributedSettings& s) {
  if (s.world_size < 1 || s.world_size > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("--world_size (WORLD_SIZE) must be in [1, 65536], got ", s.world_size));
  }
  if (s.rank < 0 || s.rank >= s.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("--rank (RANK) must be in [0, ",
                                                   s.world_size, "), got ", s.rank));
  }
  if (s.master_port < 1 || s.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master_port (MASTER_PORT) must be in [1, 65535], got ", s.master_port));
  }
  if (s.master_addr.empty()) {
    return absl::InvalidArgumentError("--master_addr (MASTER_ADDR) must not be empty");
  }
  if (!(s.timeout_seconds >= 1 && s.timeout_seconds <= 86400)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--collective_timeout must be in [1, 86400] seconds, got ", s.timeout_seconds));
  }
  if (s.checksum_every < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--checksum_every must be >= 1, got ", s.checksum_every));
  }
  return absl::OkStatus();
}

struct DistributedGroup::Impl {
  DistributedSettings settings;
  torch::Device device{torch::kCPU};
  c10::intrusive_ptr<c10d::Store> store;
  // The group's collectives, each waiting for its result. Bound to the concrete group type:
  // LibTorch 1.13's groups derive from c10d::ProcessGroup, 2.x's from c10d::Backend.
  std::function<void(std::vector<at::Tensor>&)> all_reduce, broadcast;
  std::function<void(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&)> all_gather;
  std::string backend;
  int64_t last_bytes = 0, total_bytes = 0;

  template <typename Group>
  void Bind(c10::intrusive_ptr<Group> group) {
    all_reduce = [group](std::vector<at::Tensor>& t) { group->allreduce(t)->wait(); };
    broadcast = [group](std::vector<at::Tensor>& t) { group->broadcast(t)->wait(); };
    all_gather = [group](std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in) {
      group->allgather(out, in)->wait();
    };
  }

  // Runs `collective` (which waits); on failure, the one-line error naming the failed ranks.
  template <typename Collective>
  absl::Status Run(const char* what, int64_t step, Collective collective) {
    try {
      collective();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "distributed training stopped at step ", step, ": ", FailedRanks(), " (", what,
          " on rank ", settings.rank, " failed within --collective_timeout=",
          settings.timeout_seconds, "s: ", OneLine(e.what()), ")"));
    }
  }

  // Reports this rank's failure in the store and names the ranks that do not report theirs
  // within kReportGrace (dead or hung), or rank 0 when the store it hosts is gone.
  std::string FailedRanks() {
    const int n = settings.world_size, me = settings.rank;
    try {
      store->setTimeout(kReportGrace);
      store->set(absl::StrCat(kFailedKey, me), std::vector<uint8_t>{1});
      std::vector<int> silent;
      const auto deadline = std::chrono::steady_clock::now() + kReportGrace;
      while (true) {
        silent.clear();
        for (int r = 0; r < n; ++r) {
          if (r != me && !store->check({absl::StrCat(kFailedKey, r)})) silent.push_back(r);
        }
        if (silent.empty() || std::chrono::steady_clock::now() > deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (silent.empty()) return "every other rank reported a failure too";
      return absl::StrCat(silent.size() == 1 ? "rank " : "ranks ", absl::StrJoin(silent, ", "),
                          " did not answer (dead or hung)");
    } catch (const std::exception&) {
      return me == 0 ? "the rendezvous store failed"
                     : "rank 0 did not answer (dead or hung: its rendezvous store is gone)";
    }
  }
};

DistributedGroup::DistributedGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DistributedGroup::~DistributedGroup() = default;
int DistributedGroup::rank() const { return impl_->settings.rank; }
int DistributedGroup::world_size() const { return impl_->settings.world_size; }
int64_t DistributedGroup::last_all_reduce_bytes() const { return impl_->last_bytes; }
int64_t DistributedGroup::total_all_reduce_bytes() const { return impl_->total_bytes; }
const std::string& DistributedGroup::backend() const { return impl_->backend; }

absl::StatusOr<std::unique_ptr<DistributedGroup>> DistributedGroup::Connect(
    const DistributedSettings& settings, const torch::Device& device) {
  absl::Status valid = CheckDistributedSettings(settings);
  if (!valid.ok()) return valid;
  // A peer that died leaves a closed socket: writing to it must fail with EPIPE (reported as
  // that rank's failure), not kill this process with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  auto impl = std::make_unique<Impl>();
  impl->settings = settings;
  impl->device = device;
  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(settings.timeout_seconds * 1000));
  const std::string where = absl::StrCat(settings.master_addr, ":", settings.master_port);
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(settings.master_port);
    options.isServer = settings.rank == 0;
    options.numWorkers = static_cast<size_t>(settings.world_size);
    options.waitWorkers = true;
    options.timeout = timeout;
    impl->store = c10::make_intrusive<c10d::TCPStore>(settings.master_addr, options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", settings.rank, ": no rendezvous of ", settings.world_size, " ranks at ", where,
        " within ", settings.timeout_seconds, "s: ", OneLine(e.what())));
  }
  try {
    if (device.is_cuda()) {
#ifdef DPKIT_WITH_NCCL
      // NCCL collectives honour the timeout only in blocking-wait mode.
      setenv("NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      impl->Bind(c10::make_intrusive<c10d::ProcessGroupNCCL>(
          impl->store, settings.rank, settings.world_size, options));
      impl->backend = "NCCL";
#else
      return absl::InvalidArgumentError(
          "--device=cuda with several processes needs NCCL: build with "
          "tools/build_cuda_trainer.sh (it defines DPKIT_WITH_NCCL)");
#endif
    } else {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
      const bool loopback = settings.master_addr == "localhost" ||
                            settings.master_addr.rfind("127.", 0) == 0;
      options->devices.push_back(
          interface != nullptr && *interface != '\0'
              ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
          : loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                     : c10d::ProcessGroupGloo::createDefaultDevice());
      impl->Bind(c10::make_intrusive<c10d::ProcessGroupGloo>(
          impl->store, settings.rank, settings.world_size, options));
      impl->backend = "Gloo";
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rank ", settings.rank,
                                               ": cannot form the process group at ", where,
                                               ": ", OneLine(e.what())));
  }
  return std::unique_ptr<DistributedGroup>(new DistributedGroup(std::move(impl)));
}

absl::Status DistributedGroup::AllReduceSum(const std::vector<torch::Tensor>& tensors,
                                            int64_t step) {
  if (tensors.empty()) return absl::OkStatus();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat;
  for (const torch::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  std::vector<torch::Tensor> buffer{torch::cat(flat).to(impl_->device)};
  impl_->last_bytes = buffer[0].numel() * static_cast<int64_t>(buffer[0].element_size());
  impl_->total_bytes += impl_->last_bytes;
  absl::Status done =
      impl_->Run("the all-reduce of the clipped, noised sums", step,
                 [&] { impl_->all_reduce(buffer); });
  if (!done.ok()) return done;
  int64_t offset = 0;
  for (const torch::Tensor& t : tensors) {
    t.copy_(buffer[0].narrow(0, offset, t.numel()).view_as(t));
    offset += t.numel();
  }
  return absl::OkStatus();
}

absl::Status DistributedGroup::Broadcast(const std::vector<torch::Tensor>& tensors,
                                         int64_t step) {
  torch::NoGradGuard no_grad;
  // One call per tensor (any dtype): this runs once per run, not per step.
  for (const torch::Tensor& t : tensors) {
    std::vector<torch::Tensor> buffer{t.detach().to(impl_->device).contiguous()};
    absl::Status done = impl_->Run("the broadcast of rank 0's parameters", step,
                                   [&] { impl_->broadcast(buffer); });
    if (!done.ok()) return done;
    t.copy_(buffer[0]);
  }
  return absl::OkStatus();
}

absl::Status DistributedGroup::CheckIdentical(const std::vector<torch::Tensor>& tensors,
                                              int64_t step) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a offset basis
  for (const torch::Tensor& t : tensors) {
    const torch::Tensor cpu = t.detach().to(torch::kCPU).contiguous();
    hash = HashBytes(static_cast<const unsigned char*>(cpu.data_ptr()),
                     static_cast<size_t>(cpu.numel()) * cpu.element_size(), hash);
  }
  const int n = impl_->settings.world_size;
  std::vector<torch::Tensor> input{
      torch::tensor({static_cast<int64_t>(hash >> 1)}, torch::kLong).to(impl_->device)};
  std::vector<std::vector<torch::Tensor>> output(1);
  for (int r = 0; r < n; ++r) output[0].push_back(torch::empty_like(input[0]));
  absl::Status done = impl_->Run("the parameter checksum all-gather", step,
                                 [&] { impl_->all_gather(output, input); });
  if (!done.ok()) return done;
  std::vector<int> differing;
  const int64_t reference = output[0][0].to(torch::kCPU).item<int64_t>();
  for (int r = 1; r < n; ++r) {
    if (output[0][r].to(torch::kCPU).item<int64_t>() != reference) differing.push_back(r);
  }
  if (differing.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "distributed training stopped at step ", step, ": the parameters of rank",
      differing.size() == 1 ? " " : "s ", absl::StrJoin(differing, ", "),
      " differ from rank 0's (checksum all-gather); the ranks no longer train one model"));
}

absl::StatusOr<std::unique_ptr<DistributedDpStep>> DistributedDpStep::Create(
    DistributedGroup& group, torch::nn::Module& model, optim::DpOptimizer& dp,
    optim::DpStepListener rank_zero_listener, int64_t checksum_every) {
  if (dp.options().draw_noise != (group.rank() == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", group.rank(), ": the DP optimizer must ", group.rank() == 0 ? "" : "not ",
        "draw noise (rank 0 draws the step's noise once for all ranks)"));
  }
  if (checksum_every < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checksum_every must be >= 1, got ", checksum_every));
  }
  auto step = std::unique_ptr<DistributedDpStep>(new DistributedDpStep(
      group, model, dp, std::move(rank_zero_listener), checksum_every));
  DistributedDpStep* self = step.get();
  // Called by dp.Step() after the local noise (rank 0) and the division by B, before the
  // update. The commit protocol of distributed.h (steps 4 to 6): every rank sums the
  // ranks' gradients; rank 0 then accounts the step (the ledger line, durably) and
  // broadcasts whether it did; a rank applies the update only on rank 0's word, and rank
  // 0 applies every step it accounted (when its broadcast fails, after the update).
  dp.SetStepListener([self](const accounting::SamplingRecord& record) -> absl::Status {
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& p : self->TrainableParameters()) grads.push_back(p.grad());
    absl::Status summed = self->group_.AllReduceSum(grads, self->current_step_);
    if (!summed.ok()) return summed;  // Not accounted, applied by no rank.
    const bool rank_zero = self->group_.rank() == 0;
    absl::Status accounted = absl::OkStatus();
    if (rank_zero && self->rank_zero_listener_) accounted = self->rank_zero_listener_(record);
    std::vector<torch::Tensor> commit{torch::tensor({accounted.ok() ? 1 : 0}, torch::kLong)};
    absl::Status told = self->group_.Broadcast(commit, self->current_step_);
    if (rank_zero) {
      if (!accounted.ok()) return accounted;
      self->after_update_ = told;  // The line is durable: apply the update, then stop.
      return absl::OkStatus();
    }
    if (!told.ok()) return told;
    if (commit[0].item<int64_t>() != 1) {
      return absl::UnavailableError(absl::StrCat(
          "distributed training stopped at step ", self->current_step_,
          ": rank 0 could not append the step to the ledger; the update is not applied"));
    }
    return absl::OkStatus();
  });
  return step;
}

std::vector<torch::Tensor> DistributedDpStep::TrainableParameters() const {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : model_.parameters()) {
    if (p.requires_grad()) out.push_back(p);
  }
  return out;
}

absl::Status DistributedDpStep::SynchronizeParameters(int64_t step) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> state = model_.parameters();
  for (const torch::Tensor& b : model_.buffers()) state.push_back(b);
  absl::Status sent = group_.Broadcast(state, step);
  if (!sent.ok()) return sent;
  std::vector<torch::Tensor> start{torch::tensor({step}, torch::kLong)};
  absl::Status told = group_.Broadcast(start, step);
  if (!told.ok()) return told;
  const int64_t rank_zero_step = start[0].item<int64_t>();
  if (rank_zero_step != step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", group_.rank(), " would start at step ", step, ", rank 0 at step ",
        rank_zero_step, ": the ranks read different checkpoints; refusing to train"));
  }
  return absl::OkStatus();
}

absl::StatusOr<optim::DpStepResult> DistributedDpStep::Step(int64_t step) {
  current_step_ = step;
  after_update_ = absl::OkStatus();
  absl::StatusOr<optim::DpStepResult> result = dp_.Step(step);
  if (!result.ok()) return result;
  if (!after_update_.ok()) return after_update_;  // Applied and accounted; then stopped.
  if ((step + 1) % checksum_every_ == 0) {
    absl::Status same = group_.CheckIdentical(TrainableParameters(), step);
    if (!same.ok()) return same;
  }
  return result;
}

}  // namespace dpkit::models
