// Registry of `dpkit train MODEL` trainers.
//
// A trainer is a function that trains one model end to end (data, model, DP optimizer,
// ledger, metrics, checkpoints). `dpkit train MODEL` (tools/train_command.cc) parses the
// common training flags into a TrainOptions and dispatches on MODEL through this registry,
// so a model library (e.g. models/wide/) registers itself without editing any other file:
//
//   // models/wide/adult_trainer.cc, in an alwayslink cc_library depending on
//   // //models:trainer_registry, added (surgically) to the deps of //tools:dpkit
//   ABSL_FLAG(std::string, adult_data, "", "path of the a9a file");   // extra flag
//   absl::Status TrainAdult(const dpkit::models::TrainOptions& options) {
//     std::string path = options.extra_flags.at("adult_data");  ...
//   }
//   DPKIT_REGISTER_TRAINER((dpkit::models::TrainerInfo{
//       "adult", "MLP on Adult (Bu et al. 2020, Sec. 4)", {"adult_data"}, &TrainAdult}));
//
// Extra flags: a trainer lists the names of the extra flags it reads; it defines them itself
// with ABSL_FLAG (grep `ABSL_FLAG(.*, NAME,` under tools/ and models/ first: a duplicate name
// fails to link). `dpkit train` accepts the union of the common flags and every registered
// trainer's extra flags, and passes each of MODEL's extra flags to it as a string (its current
// value, i.e. the default when not given) in TrainOptions::extra_flags; a flag that belongs to
// another trainer is rejected with exit code 2 before the trainer runs.
//
// Registration order: DPKIT_REGISTER_TRAINER runs with a GCC/Clang init_priority so that all
// trainers are registered before any default-priority static initialiser (in particular
// before the `train` command registers its flag list).
#ifndef DPKIT_MODELS_TRAINER_REGISTRY_H_
#define DPKIT_MODELS_TRAINER_REGISTRY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace dpkit::models {

// Several processes training one model (models/engine/distributed.h): rank 0 of
// world_size > 1 ranks hosts the rendezvous (c10d TCPStore) at master_addr:master_port and
// writes the ledger, metrics and checkpoints; the others only train.
struct DistributedSettings {
  int rank = 0;                           // --rank / $RANK
  int world_size = 1;                     // --world_size / $WORLD_SIZE (1: one process)
  std::string master_addr = "127.0.0.1";  // --master_addr / $MASTER_ADDR
  int master_port = 29500;                // --master_port / $MASTER_PORT
  double timeout_seconds = 300;           // --collective_timeout: a rank silent this long failed
  int64_t checksum_every = 50;            // --checksum_every: parameter check period (steps)
  bool active() const { return world_size > 1; }
  bool writer() const { return rank == 0; }  // the rank that writes files and prints
};

// Common options of `dpkit train`, as given on the command line. Optional values are
// empty when the flag was not given, so each trainer applies its own defaults (e.g. the
// paper's learning rate for its model). Values are range-checked by the train command
// (finite, > 0, delta in (0,1), ...) before a trainer sees them.
struct TrainOptions {
  std::string model;                        // MODEL, e.g. "mnist"
  std::vector<std::string> args;            // positional arguments after MODEL
  std::optional<double> learning_rate;      // --learning_rate
  std::optional<double> clip_norm;          // --clip_norm (C)
  std::optional<double> noise_multiplier;   // --noise_multiplier (sigma); 0 = non-private
  std::optional<double> target_epsilon;     // --target_epsilon (calibrate sigma instead)
  double delta = 1e-5;                      // --delta
  std::optional<int64_t> batch_size;        // --batch_size (expected, Poisson)
  std::optional<double> epochs;             // --epochs
  std::optional<std::string> optimizer;     // --optimizer=sgd|adam|noisy_adam|adagrad
  uint64_t seed = 0;                        // --seed: model initialisation only (sampling,
                                            // data order and noise are always secure)
  std::string device = "cpu";               // --device=cpu|cuda
  std::string output_dir;                   // --output_dir ("" = no files written)
  std::string format = "text";              // --format=text|json
  std::optional<int64_t> max_steps;         // --max_steps: stop after this many steps
  std::optional<int64_t> train_subset;      // --train_subset: first N training examples
  std::optional<int64_t> test_subset;       // --test_subset: first N test examples
  std::string data_dir;                     // --data_dir ("" = the model's default)
  bool resume = false;                      // --resume from output_dir's checkpoint
  bool overwrite = false;                   // --overwrite: replace a run in output_dir
  int threads = 0;                          // --threads (0 = all cores)
  DistributedSettings distributed;          // --rank, --world_size, ... (one process by default)
  // The trainer's extra flags (TrainerInfo::flags): name -> current value as text.
  std::map<std::string, std::string> extra_flags;
  // Names of all flags given on the command line (common and extra).
  std::set<std::string> given_flags;
};

// The paper's settings of one task; every field is overridden by its common flag.
// TrainerInfo::defaults returns them: the engine plans every run with them and
// `dpkit train MODEL --help` states them, from the same function.
struct TaskDefaults {
  double learning_rate = 0.01;
  double clip_norm = 1.0;
  double noise_multiplier = 1.0;  // 0: not private (no ledger, no epsilon)
  int64_t batch_size = 256;       // expected (Poisson) batch size B; q = B / n
  // When the default batch size depends on n: how, for --help (batch_size is then 0 for
  // an unknown n), e.g. "n/80 rounded" for MovieLens.
  std::string batch_size_rule;
  double epochs = 1;
  std::string optimizer = "sgd";
  double delta = 1e-5;  // used when --delta is not given
  // Largest forward/backward slice of a logical batch unless --physical_batch_size is
  // given. Memory only: clipping is per record and the noise is added once per step.
  int64_t physical_batch_size = 2048;
};

// A trainer: returns InvalidArgumentError/NotFoundError for bad input (one line, exit 2),
// another error for a failure during training (exit 1).
using TrainerFunction = absl::Status (*)(const TrainOptions& options);

struct TrainerInfo {
  std::string name;                // MODEL as typed: "mnist", "word2vec", ...
  std::string summary;             // one line for `dpkit train --help`
  std::vector<std::string> flags;  // extra flag names this trainer reads (no dashes)
  TrainerFunction run;
  // The model's defaults for `options` (e.g. the learning rate of --optimizer) and a
  // training set of `train_size` examples (0 when unknown, as for --help). The trainer
  // plans its runs with this same function; nullptr: none stated by --help.
  TaskDefaults (*defaults)(const TrainOptions& options, int64_t train_size) = nullptr;
  // Extra-flag settings under which `defaults` differ, as {flag, value} (e.g. {"model",
  // "transformer"} for `dpkit train imdb --model=transformer`): --help states those too.
  std::vector<std::pair<std::string, std::string>> default_variants = {};
};

// Registers a trainer (called from static initialisers). Returns true. A second
// registration of the same name is a programming error and aborts with a message.
bool RegisterTrainer(TrainerInfo trainer);

// The trainer registered as `name`, or nullptr.
const TrainerInfo* FindTrainer(const std::string& name);

// All trainers, sorted by name.
std::vector<const TrainerInfo*> RegisteredTrainers();

namespace internal {
struct TrainerRegistration {
  explicit TrainerRegistration(TrainerInfo trainer) { RegisterTrainer(std::move(trainer)); }
};
}  // namespace internal

}  // namespace dpkit::models

#define DPKIT_TRAINER_CONCAT_INNER_(a, b) a##b
#define DPKIT_TRAINER_CONCAT_(a, b) DPKIT_TRAINER_CONCAT_INNER_(a, b)
// Usage at namespace scope: DPKIT_REGISTER_TRAINER((dpkit::models::TrainerInfo{...}));
#define DPKIT_REGISTER_TRAINER(trainer_expr)                                      \
  static ::dpkit::models::internal::TrainerRegistration DPKIT_TRAINER_CONCAT_(   \
      kTrainerRegistration_, __LINE__) __attribute__((init_priority(1000)))(     \
      trainer_expr)

#endif  // DPKIT_MODELS_TRAINER_REGISTRY_H_
