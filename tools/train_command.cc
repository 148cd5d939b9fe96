// `dpkit train MODEL`: parses the common training flags and dispatches to the trainer that
// models/trainer_registry.h holds for MODEL. Trainers register with init_priority, so
// every trainer (and its extra flags) is known when this command registers its flag list.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/command.h"
#include "dpkit/tools/common_flags.h"

// The defaults of the per-model flags are each model's (TrainerInfo::defaults); --help states
// them (tools/train_command.cc, TrainHelp), not these texts.
ABSL_FLAG(double, learning_rate, 0.0, "learning rate");
ABSL_FLAG(double, clip_norm, 0.0, "per-example L2 clipping norm C");
ABSL_FLAG(std::string, optimizer, "sgd",
          "DP-SGD, DP-Adam (torch's Adam), NoisyAdam (Bu et al. 2020, Alg. 2: no bias "
          "correction) or DP-AdaGrad");
ABSL_FLAG(std::string, device, "cpu", "where to train");
ABSL_FLAG(std::string, output_dir, "",
          "directory for ledger.jsonl, metrics.jsonl and checkpoints (none if empty)");
ABSL_FLAG(int64_t, max_steps, 0, "stop after this many steps (0: no limit)");
ABSL_FLAG(int64_t, train_subset, 0, "use only the first N training examples (0: all)");
ABSL_FLAG(int64_t, test_subset, 0, "use only the first N test examples (0: all)");
ABSL_FLAG(std::string, data_dir, "", "directory of the data files (default: per model)");
ABSL_FLAG(bool, resume, false, "continue from the checkpoint in --output_dir");
ABSL_FLAG(bool, overwrite, false,
          "replace the run in --output_dir (its checkpoint is removed before the new ledger "
          "starts); without it a fresh run refuses a directory holding a run");
ABSL_FLAG(int64_t, threads, 0, "CPU threads (0: all cores)");
ABSL_FLAG(int64_t, nproc, 1,
          "local worker processes (dpkit train starts them: RANK, WORLD_SIZE, MASTER_ADDR, "
          "MASTER_PORT set for each; threads per process = cores / nproc unless --threads)");
ABSL_FLAG(int64_t, rank, 0, "this process's rank (without the flag: $RANK, else 0)");
ABSL_FLAG(int64_t, world_size, 1, "number of processes (without the flag: $WORLD_SIZE, else 1)");
ABSL_FLAG(std::string, master_addr, "127.0.0.1",
          "rendezvous host, rank 0's address (without the flag: $MASTER_ADDR, else 127.0.0.1)");
ABSL_FLAG(int64_t, master_port, 29500,
          "rendezvous port (without the flag: $MASTER_PORT, else 29500)");
ABSL_FLAG(double, collective_timeout, 300,
          "seconds after which a silent rank counts as failed (rendezvous and collectives)");
ABSL_FLAG(int64_t, checksum_every, 50,
          "check every N steps that all ranks hold bit-identical parameters");

namespace dpkit::tools {
namespace {

// --optimizer's values (parsed, checked and listed by --help from here).
const std::vector<std::string>& Optimizers() {
  static const auto* names = new std::vector<std::string>{"sgd", "adam", "noisy_adam", "adagrad"};
  return *names;
}

// The choices below are the ones RunTrain checks (the parser checks them first).
const std::vector<FlagSpec>& CommonTrainFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      "learning_rate", "clip_norm", "noise_multiplier", "target_epsilon", "delta",
      "batch_size", "epochs", FlagSpec("optimizer", "sgd", Optimizers()),
      FlagSpec("seed", "0", {}),
      FlagSpec("device", "cpu", {"cpu", "cuda"}), "output_dir",
      FlagSpec("format", "text", {"text", "json"}), "max_steps", "train_subset", "test_subset",
      "data_dir", "resume", "overwrite", "threads", "nproc", "rank", "world_size",
      "master_addr", "master_port", "collective_timeout", "checksum_every"};
  return *flags;
}

std::vector<FlagSpec> AllTrainFlags() {
  std::vector<FlagSpec> out = CommonTrainFlags();
  std::set<std::string> seen;
  for (const FlagSpec& spec : out) seen.insert(spec.name);
  for (const models::TrainerInfo* t : models::RegisteredTrainers()) {
    for (const std::string& f : t->flags) {
      if (seen.insert(f).second) out.push_back(f);
    }
  }
  return out;
}

constexpr char kSummary[] = "train a model with DP-SGD / DP-Adam / DP-AdaGrad";

std::string Usage() {
  std::string out =
      "Usage: dpkit train MODEL [flags]   (dpkit train MODEL --help: MODEL's flags and "
      "defaults)\n"
      "Trains MODEL with differential privacy (Poisson sampling, per-example or\n"
      "per-microbatch clipping, secure Gaussian noise), writing the privacy ledger and\n"
      "reporting epsilon from it. --sampler=fixed_size draws exactly --batch_size examples\n"
      "per step (replace-one adjacency, PLD and RDP); --privacy_unit=user makes a user's\n"
      "examples one record (user-level DP). --sampler=shuffled (where a model offers it) is\n"
      "not covered by the accountants: it writes no ledger and prints no epsilon.\n"
      "Models:";
  for (const models::TrainerInfo* t : models::RegisteredTrainers()) {
    absl::StrAppend(&out, "\n  ", t->name, "  ", t->summary);
    if (!t->flags.empty()) absl::StrAppend(&out, " [--", absl::StrJoin(t->flags, ", --"), "]");
  }
  return out;
}

// The ranges enforced at parse time (issue 21: a value that passes must not crash or
// overflow later, e.g. sigma * C in the ledger or a learning rate cast to float).
constexpr double kMaxLearningRate = 1e4;
constexpr double kMaxClipNorm = 1e6;
constexpr double kMaxNoiseMultiplier = 1e6;

absl::Status CheckRange(const char* name, double value, double max) {
  if (std::isfinite(value) && value > 0 && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", name, " must be finite, > 0 and <= ",
                                                 max, ", got ", value));
}

// The common flags' values, range-checked at parse time (one-line errors, exit 2).
absl::Status ParseCommonFlags(models::TrainOptions* o) {
  if (FlagGiven("learning_rate")) {
    absl::Status s =
        CheckRange("learning_rate", absl::GetFlag(FLAGS_learning_rate), kMaxLearningRate);
    if (!s.ok()) return s;
    o->learning_rate = absl::GetFlag(FLAGS_learning_rate);
  }
  if (FlagGiven("clip_norm")) {
    absl::Status s = CheckRange("clip_norm", absl::GetFlag(FLAGS_clip_norm), kMaxClipNorm);
    if (!s.ok()) return s;
    o->clip_norm = absl::GetFlag(FLAGS_clip_norm);
  }
  if (FlagGiven("noise_multiplier") && FlagGiven("target_epsilon")) {
    return absl::InvalidArgumentError("give --noise_multiplier or --target_epsilon, not both");
  }
  if (FlagGiven("noise_multiplier")) {
    absl::Status s = CheckRange("noise_multiplier", absl::GetFlag(FLAGS_noise_multiplier),
                                kMaxNoiseMultiplier);
    if (!s.ok()) return s;
    o->noise_multiplier = absl::GetFlag(FLAGS_noise_multiplier);
  }
  if (FlagGiven("target_epsilon")) {
    absl::Status s = CheckFinitePositive("target_epsilon", absl::GetFlag(FLAGS_target_epsilon));
    if (!s.ok()) return s;
    o->target_epsilon = absl::GetFlag(FLAGS_target_epsilon);
  }
  {
    absl::Status s = CheckOpenUnit("delta", absl::GetFlag(FLAGS_delta));
    if (!s.ok()) return s;
    o->delta = absl::GetFlag(FLAGS_delta);
  }
  if (FlagGiven("batch_size")) {
    absl::Status s = CheckPositiveInt("batch_size", absl::GetFlag(FLAGS_batch_size));
    if (!s.ok()) return s;
    o->batch_size = absl::GetFlag(FLAGS_batch_size);
  }
  if (FlagGiven("epochs")) {
    absl::Status s = CheckFinitePositive("epochs", absl::GetFlag(FLAGS_epochs));
    if (!s.ok()) return s;
    o->epochs = absl::GetFlag(FLAGS_epochs);
  }
  if (FlagGiven("optimizer")) {
    absl::Status s = CheckOneOf("optimizer", absl::GetFlag(FLAGS_optimizer), Optimizers());
    if (!s.ok()) return s;
    o->optimizer = absl::GetFlag(FLAGS_optimizer);
  }
  for (auto [name, flag, target] :
       {std::tuple<const char*, absl::Flag<int64_t>*, std::optional<int64_t>*>{
            "max_steps", &FLAGS_max_steps, &o->max_steps},
        {"train_subset", &FLAGS_train_subset, &o->train_subset},
        {"test_subset", &FLAGS_test_subset, &o->test_subset}}) {
    if (!FlagGiven(name)) continue;
    absl::Status s = CheckPositiveInt(name, absl::GetFlag(*flag));
    if (!s.ok()) return s;
    *target = absl::GetFlag(*flag);
  }
  {
    absl::Status s = CheckOneOf("device", absl::GetFlag(FLAGS_device), {"cpu", "cuda"});
    if (!s.ok()) return s;
    s = CheckOneOf("format", absl::GetFlag(FLAGS_format), {"text", "json"});
    if (!s.ok()) return s;
  }
  if (absl::GetFlag(FLAGS_threads) < 0 || absl::GetFlag(FLAGS_threads) > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads must be in [0, 4096], got ", absl::GetFlag(FLAGS_threads)));
  }
  return absl::OkStatus();
}

// --rank, --world_size, --master_addr, --master_port, each from $RANK, $WORLD_SIZE,
// $MASTER_ADDR, $MASTER_PORT when its flag is not given (torchrun, srun, Kubernetes).
absl::Status ParseDistributedFlags(models::DistributedSettings* d) {
  if (absl::GetFlag(FLAGS_nproc) != 1) {
    return absl::InvalidArgumentError(
        "--nproc is handled by `dpkit train`, which starts the processes; run the training "
        "binary directly with --rank and --world_size (or RANK and WORLD_SIZE) instead");
  }
  auto integer = [](const char* flag, const char* env, absl::Flag<int64_t>& value,
                    int64_t* out) -> absl::Status {
    const char* text = std::getenv(env);
    if (FlagGiven(flag) || text == nullptr || *text == '\0') {
      *out = absl::GetFlag(value);
      return absl::OkStatus();
    }
    char* end = nullptr;
    const long long parsed = std::strtoll(text, &end, 10);
    if (*end != '\0' || parsed < 0 || parsed > 1000000) {
      return absl::InvalidArgumentError(
          absl::StrCat("$", env, " must be a non-negative integer, got '", text, "'"));
    }
    *out = parsed;
    return absl::OkStatus();
  };
  int64_t rank = 0, world = 1, port = 0;
  for (auto [flag, env, value, out] :
       {std::tuple<const char*, const char*, absl::Flag<int64_t>*, int64_t*>{
            "rank", "RANK", &FLAGS_rank, &rank},
        {"world_size", "WORLD_SIZE", &FLAGS_world_size, &world},
        {"master_port", "MASTER_PORT", &FLAGS_master_port, &port}}) {
    absl::Status s = integer(flag, env, *value, out);
    if (!s.ok()) return s;
  }
  if (world < 1 || world > 65536 || rank < 0 || rank >= world || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need 0 <= rank < world_size <= 65536 and 1 <= master_port <= 65535, got rank ", rank,
        ", world_size ", world, ", master_port ", port));
  }
  d->rank = static_cast<int>(rank);
  d->world_size = static_cast<int>(world);
  d->master_port = static_cast<int>(port);
  const char* addr = std::getenv("MASTER_ADDR");
  d->master_addr = FlagGiven("master_addr") || addr == nullptr || *addr == '\0'
                       ? absl::GetFlag(FLAGS_master_addr)
                       : addr;
  d->timeout_seconds = absl::GetFlag(FLAGS_collective_timeout);
  d->checksum_every = absl::GetFlag(FLAGS_checksum_every);
  if (!(d->timeout_seconds >= 1 && d->timeout_seconds <= 86400)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--collective_timeout must be in [1, 86400] seconds, got ", d->timeout_seconds));
  }
  if (d->checksum_every < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--checksum_every must be >= 1, got ", d->checksum_every));
  }
  return absl::OkStatus();
}

// The flags whose defaults are the model's (TaskDefaults): `dpkit train --help` says so,
// `dpkit train MODEL --help` states MODEL's values.
const std::vector<std::string>& PerModelFlags() {
  static const auto* names = new std::vector<std::string>{
      "learning_rate", "clip_norm", "noise_multiplier", "batch_size", "epochs", "optimizer",
      "delta"};
  return *names;
}

// MODEL's defaults for a run given only `optimizer` (empty: none): its extra flags at their
// defaults, the training set's size unknown. The same function plans its runs.
// `variant` (may be null) sets one extra flag (TrainerInfo::default_variants).
models::TaskDefaults DefaultsOf(const models::TrainerInfo& trainer, const std::string& optimizer,
                                const std::pair<std::string, std::string>* variant = nullptr) {
  models::TrainOptions o;
  o.model = trainer.name;
  if (!optimizer.empty()) o.optimizer = optimizer;
  for (const std::string& f : trainer.flags) {
    if (const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(f)) {
      o.extra_flags[f] = flag->DefaultValue();
    }
  }
  if (variant != nullptr) o.extra_flags[variant->first] = variant->second;
  return trainer.defaults(o, 0);
}

// The per-model flags' values in `d`, by flag name ("" for a batch size that depends on n).
std::map<std::string, std::string> DefaultValues(const models::TaskDefaults& d) {
  return {{"learning_rate", absl::StrCat(d.learning_rate)},
          {"clip_norm", absl::StrCat(d.clip_norm)},
          {"noise_multiplier", absl::StrCat(d.noise_multiplier)},
          {"batch_size", d.batch_size > 0 ? absl::StrCat(d.batch_size) : ""},
          {"epochs", absl::StrCat(d.epochs)},
          {"optimizer", d.optimizer},
          {"delta", absl::StrCat(d.delta)}};
}

absl::Status RunTrain(const CommandContext& context);

// `dpkit train MODEL --help`: MODEL's flags only, each per-model flag with MODEL's default.
Command ModelHelp(const models::TrainerInfo& trainer) {
  const models::TaskDefaults d = DefaultsOf(trainer, "");
  const std::map<std::string, std::string> values = DefaultValues(d);
  std::string usage = absl::StrCat("Usage: dpkit train ", trainer.name, " [flags]\n",
                                   trainer.name, ": ", trainer.summary, ".\n",
                                   "The defaults below are this model's (its paper's settings).");
  for (const std::string& other : Optimizers()) {
    const double rate = DefaultsOf(trainer, other).learning_rate;
    if (other != d.optimizer && rate != d.learning_rate) {
      absl::StrAppend(&usage, "\nWith --optimizer=", other, " the default --learning_rate is ",
                      rate, ".");
    }
  }
  if (!d.batch_size_rule.empty()) {
    absl::StrAppend(&usage, "\nThe default --batch_size is ", d.batch_size_rule, ".");
  }
  for (const auto& variant : trainer.default_variants) {
    const std::map<std::string, std::string> other =
        DefaultValues(DefaultsOf(trainer, "", &variant));
    absl::StrAppend(&usage, "\nWith --", variant.first, "=", variant.second, " the defaults are");
    for (const std::string& name : PerModelFlags()) {
      if (!other.at(name).empty()) absl::StrAppend(&usage, " --", name, "=", other.at(name));
    }
    absl::StrAppend(&usage, ".");
  }
  std::vector<FlagSpec> flags;
  for (FlagSpec spec : CommonTrainFlags()) {
    if (const auto value = values.find(spec.name); value != values.end()) {
      spec.default_value = value->second;
    }
    flags.push_back(std::move(spec));
  }
  for (const std::string& f : trainer.flags) flags.emplace_back(f);
  return Command{"train", kSummary, usage, flags, &RunTrain};
}

// `dpkit train [MODEL] --help`.
Command TrainHelp(const std::vector<std::string>& args) {
  const models::TrainerInfo* trainer = args.empty() ? nullptr : models::FindTrainer(args[0]);
  if (trainer != nullptr && trainer->defaults != nullptr) return ModelHelp(*trainer);
  std::vector<FlagSpec> flags = AllTrainFlags();
  const std::vector<std::string>& per_model = PerModelFlags();
  for (FlagSpec& spec : flags) {
    if (std::find(per_model.begin(), per_model.end(), spec.name) != per_model.end()) {
      spec.default_value = "per model: see dpkit train MODEL --help";
    }
  }
  return Command{"train", kSummary, Usage(), flags, &RunTrain};
}

absl::Status RunTrain(const CommandContext& context) {
  if (context.args.empty()) {
    std::vector<std::string> names;
    for (const models::TrainerInfo* t : models::RegisteredTrainers()) names.push_back(t->name);
    return absl::InvalidArgumentError(
        absl::StrCat("give a model: dpkit train ", absl::StrJoin(names, "|")));
  }
  const models::TrainerInfo* trainer = models::FindTrainer(context.args[0]);
  if (trainer == nullptr) {
    std::vector<std::string> names;
    for (const models::TrainerInfo* t : models::RegisteredTrainers()) names.push_back(t->name);
    return absl::InvalidArgumentError(absl::StrCat("unknown model '", context.args[0],
                                                   "' (models: ", absl::StrJoin(names, ", "), ")"));
  }
  models::TrainOptions o;
  o.model = trainer->name;
  o.args.assign(context.args.begin() + 1, context.args.end());
  // Flags of another trainer are rejected, not silently ignored.
  std::set<std::string> allowed;
  for (const FlagSpec& spec : CommonTrainFlags()) allowed.insert(spec.name);
  allowed.insert(trainer->flags.begin(), trainer->flags.end());
  for (const FlagSpec& spec : AllTrainFlags()) {
    const std::string& f = spec.name;
    if (FlagGiven(f)) {
      o.given_flags.insert(f);
      if (allowed.count(f) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", f, " does not apply to model ", trainer->name));
      }
    }
  }
  absl::Status parsed = ParseCommonFlags(&o);
  if (!parsed.ok()) return parsed;
  o.device = absl::GetFlag(FLAGS_device);
  o.format = absl::GetFlag(FLAGS_format);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.output_dir = absl::GetFlag(FLAGS_output_dir);
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.overwrite = absl::GetFlag(FLAGS_overwrite);
  o.threads = static_cast<int>(absl::GetFlag(FLAGS_threads));
  absl::Status distributed = ParseDistributedFlags(&o.distributed);
  if (!distributed.ok()) return distributed;
  for (const std::string& f : trainer->flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(f);
    if (flag == nullptr) return absl::InternalError(absl::StrCat("flag --", f, " is not defined"));
    o.extra_flags[f] = flag->CurrentValue();
  }
  return trainer->run(o);
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{"train", kSummary, Usage(), AllTrainFlags(), &RunTrain,
                                &TrainHelp}));

}  // namespace dpkit::tools
