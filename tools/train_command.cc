// `dpkit train MODEL`: parses the common training flags and dispatches to the trainer that
// models/trainer_registry.h holds for MODEL. Trainers register with init_priority, so
// every trainer (and its extra flags) is known when this command registers its flag list.
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
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

ABSL_FLAG(double, learning_rate, 0.0, "learning rate (default: the model's paper setting)");
ABSL_FLAG(double, clip_norm, 0.0, "per-example L2 clipping norm C (default: per model)");
ABSL_FLAG(std::string, optimizer, "sgd", "DP-SGD, DP-Adam or DP-AdaGrad");
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

namespace dpkit::tools {
namespace {

// The choices below are the ones RunTrain checks (the parser checks them first).
const std::vector<FlagSpec>& CommonTrainFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      "learning_rate", "clip_norm", "noise_multiplier", "target_epsilon", "delta",
      "batch_size", "epochs", FlagSpec("optimizer", "sgd", {"sgd", "adam", "adagrad"}),
      FlagSpec("seed", "0", {}),
      FlagSpec("device", "cpu", {"cpu", "cuda"}), "output_dir",
      FlagSpec("format", "text", {"text", "json"}), "max_steps", "train_subset", "test_subset",
      "data_dir", "resume", "overwrite", "threads"};
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

std::string Usage() {
  std::string out =
      "Usage: dpkit train MODEL [flags]\n"
      "Trains MODEL with differential privacy (Poisson sampling, per-example or\n"
      "per-microbatch clipping, secure Gaussian noise), writing the privacy ledger and\n"
      "reporting epsilon from it. --sampler=shuffled (where a model offers it) is not\n"
      "covered by the accountants: it writes no ledger and prints no epsilon.\n"
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
    absl::Status s = CheckOneOf("optimizer", absl::GetFlag(FLAGS_optimizer), {"sgd", "adam", "adagrad"});
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
  for (const std::string& f : trainer->flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(f);
    if (flag == nullptr) return absl::InternalError(absl::StrCat("flag --", f, " is not defined"));
    o.extra_flags[f] = flag->CurrentValue();
  }
  return trainer->run(o);
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{"train", "train a model with DP-SGD / DP-Adam / DP-AdaGrad",
                                Usage(), AllTrainFlags(), &RunTrain}));

}  // namespace dpkit::tools
