#include "dpkit/models/engine/training_engine.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/accounting/ledger.h"
#include "dpkit/models/engine/checkpoint.h"
#include "dpkit/models/engine/epoch_report.h"
#include "dpkit/models/engine/progress.h"
#include "dpkit/models/files.h"

namespace dpkit::models {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The resumed run's position: the ledger's entries beyond the checkpoint are steps whose
// updates a crash lost (they were appended before their updates); they stay accounted.
// Returns the step to continue at, the state files' own step, once the ledger is known to
// account every update they hold.
absl::StatusOr<int64_t> CheckResume(const Checkpoint& checkpoint, const std::string& dir,
                                    const std::string& ledger_path, TrainingTask& task,
                                    LedgerSink& sink, bool quiet) {
  const std::string file = Join(dir, kCheckpointFile);
  int64_t lost = 0;
  if (checkpoint.ledger) {
    auto entries = accounting::ReadLedger(ledger_path);
    if (!entries.ok()) return absl::InvalidArgumentError(entries.error());
    const int64_t found = static_cast<int64_t>(entries->size());
    if (found < checkpoint.ledger_entries) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--resume: ", ledger_path, " holds ", found, " entries, fewer than the ",
          checkpoint.ledger_entries, " of ", file,
          ": the ledger does not account the checkpoint's steps; refusing to resume"));
    }
    lost = found - checkpoint.ledger_entries;
    sink.Restore(checkpoint.ledger_steps + lost, found);
  }
  absl::StatusOr<int64_t> saved = task.Load(dir);
  if (!saved.ok()) return saved.status();
  if (*saved < checkpoint.next_step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume: the state files of ", dir, " hold step ", *saved, ", before next_step ",
        checkpoint.next_step, " of ", file, "; refusing to resume"));
  }
  if (checkpoint.ledger && *saved > sink.steps()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume: the model in ", dir, " holds ", *saved, " steps but ", ledger_path,
        " accounts only ", sink.steps(), "; refusing to resume"));
  }
  if (!quiet && (lost > 0 || *saved != checkpoint.next_step)) {
    std::fprintf(stderr,
                 "resume: %lld ledger entries after the checkpoint belong to steps whose "
                 "updates were lost; they stay accounted (over-counting is safe)\n",
                 static_cast<long long>(lost));
  }
  return *saved;
}

}  // namespace

absl::Status LedgerSink::AppendStep(const accounting::SamplingRecord& record) {
  if (ledger_ == nullptr) return absl::OkStatus();
  absl::Status appended = ledger_->AppendStep(record);
  if (!appended.ok()) return appended;
  ++steps_, ++entries_;
  ReachFaultPoint(FaultPoint::kLedgerAppended, record.step);
  return absl::OkStatus();
}

absl::Status LedgerSink::AppendStepEvent(const accounting::Event& event, int64_t step) {
  if (ledger_ == nullptr) return absl::OkStatus();
  absl::Status appended = ledger_->AppendEvent(event);
  if (!appended.ok()) return appended;
  ++steps_, ++entries_;
  ReachFaultPoint(FaultPoint::kLedgerAppended, step);
  return absl::OkStatus();
}

absl::Status LedgerSink::AppendEvent(const accounting::Event& event) {
  if (ledger_ == nullptr) return absl::OkStatus();
  absl::Status appended = ledger_->AppendEvent(event);
  if (!appended.ok()) return appended;
  ++entries_;
  return absl::OkStatus();
}

absl::StatusOr<TrainOptions> WithCheckpointFlags(const TrainOptions& options,
                                                 const std::vector<std::string>& privacy_flags) {
  if (!options.resume || options.output_dir.empty()) return options;
  absl::StatusOr<Checkpoint> checkpoint = ReadCheckpoint(options.output_dir, options.model);
  if (!checkpoint.ok()) return checkpoint.status();
  TrainOptions restored = options;
  absl::Status applied = ApplyCheckpointFlags(checkpoint->privacy, privacy_flags,
                                              Join(options.output_dir, kCheckpointFile), &restored);
  if (!applied.ok()) return applied;
  return restored;
}

namespace {

// A run whose plan is made and whose directory and ledger are ready.
struct OpenedRun {
  RunPlan plan;
  std::optional<Checkpoint> checkpoint;
  std::string ledger_path;  // empty: no ledger
  std::optional<TrainingLedger> ledger;
};

// Reads the checkpoint (--resume), plans the run, checks it against the task, prepares the
// output directory (a fresh run: refusal or --overwrite) and opens the ledger.
absl::StatusOr<OpenedRun> OpenRun(const TrainOptions& o, TrainingTask& task) {
  const bool files = !o.output_dir.empty();
  const std::string& dir = o.output_dir;
  if (o.resume && !files) return absl::InvalidArgumentError("--resume needs --output_dir");
  if (o.resume && o.overwrite) {
    return absl::InvalidArgumentError("give --resume or --overwrite, not both");
  }
  if (o.distributed.active() && !task.TrainsOnSeveralProcesses()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dpkit train ", o.model, " trains in one process only (--nproc / --world_size must be 1)"));
  }
  OpenedRun run;
  if (o.resume) {
    absl::StatusOr<Checkpoint> read = ReadCheckpoint(dir, o.model);
    if (!read.ok()) return read.status();
    run.checkpoint = *std::move(read);
  }
  absl::StatusOr<RunPlan> plan =
      PlanRun(o, task.defaults(), task.train_size(), task.privacy_flags(),
              run.checkpoint ? &run.checkpoint->privacy : nullptr, Join(dir, kCheckpointFile));
  if (!plan.ok()) return plan.status();
  run.plan = *std::move(plan);
  absl::Status valid = task.Validate(run.plan);
  if (!valid.ok()) return valid;
  if (run.plan.metrics.released_privately() && !task.ReleasesPrivateTrainMetrics()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--train_metrics=private is not available for ", o.model, " (nonprivate or none)"));
  }
  if (run.checkpoint && run.checkpoint->ledger != run.plan.certified()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Join(dir, kCheckpointFile), ": the checkpoint's run ",
        run.checkpoint->ledger ? "wrote" : "did not write", " a ledger; refusing to resume"));
  }
  // Several processes: only rank 0 prepares the directory and writes the ledger; the other
  // ranks only read a checkpoint (--resume) and train (engine/distributed.h).
  if (!o.distributed.writer()) return run;
  if (files) {
    absl::Status made = MakeDirs(dir);
    if (!made.ok()) return made;
    if (!o.resume) {
      absl::Status prepared =
          PrepareFreshRun(dir, o.overwrite, task.state_files(), task.other_files());
      if (!prepared.ok()) return prepared;
    }
  }
  // The ledger: only Poisson-sampled private steps are certified by the accountants.
  run.ledger_path = !run.plan.certified() ? ""
                    : files               ? Join(dir, kLedgerFile)
                                          : TemporaryLedgerPath(o.model);
  if (!files && !run.ledger_path.empty()) {
    absl::Status removed = RemoveIfExists(run.ledger_path);
    if (!removed.ok()) return removed;
  }
  if (!run.ledger_path.empty()) {
    absl::StatusOr<TrainingLedger> opened = TrainingLedger::Open(run.ledger_path);
    if (!opened.ok()) return opened.status();
    run.ledger.emplace(*std::move(opened));
  }
  return run;
}

// The training-set figures of an epoch end as --train_metrics asks (models/train_metrics.h):
// the JSON fields and the text before the test metrics. nonprivate: the epoch's exact mean
// loss (and accuracy, correct >= 0) over its steps' batches, labelled not private; private:
// the nested query's release, whose event the task appends to the ledger first (so the
// epoch's epsilon, computed next, covers it); none: nothing.
absl::StatusOr<std::pair<nlohmann::json, std::string>> TrainMetrics(
    const TrainMetricsOptions& options, int64_t step, double loss_sum, int64_t seen,
    int64_t correct, TrainingTask& task, LedgerSink& sink) {
  nlohmann::json json = nlohmann::json::object();
  std::string text;
  if (options.nonprivate()) {
    json["train_loss"] = seen ? loss_sum / static_cast<double>(seen) : 0.0;
    text = absl::StrFormat("train loss %.4f", json["train_loss"].get<double>());
    if (correct >= 0) {
      json["train_accuracy"] = seen ? static_cast<double>(correct) / seen : 0.0;
      absl::StrAppendFormat(&text, ", train accuracy %.2f%%",
                            100 * json["train_accuracy"].get<double>());
    }
    json["train_metrics"] = "nonprivate";
    absl::StrAppend(&text, " (not private), ");
  } else if (options.released_privately()) {
    absl::StatusOr<TrainMetricsRelease> release = task.PrivateTrainMetrics(step, options, sink);
    if (!release.ok()) return release.status();
    json["train_loss_dp"] = release->loss;
    json["train_loss_dp_stddev"] = release->loss_stddev;
    text = absl::StrFormat("DP train loss %.4f (noise sd %.4f)", release->loss,
                           release->loss_stddev);
    if (release->accuracy) {
      json["train_accuracy_dp"] = *release->accuracy;
      json["train_accuracy_dp_stddev"] = release->accuracy_stddev;
      absl::StrAppendFormat(&text, ", DP train accuracy %.2f%% (sd %.2f)",
                            100 * *release->accuracy, 100 * release->accuracy_stddev);
    }
    json["train_metrics"] = "private";
    absl::StrAppend(&text, ", ");
  }
  return std::make_pair(std::move(json), std::move(text));
}

// Steps [start_step, total), with the epoch reports and checkpoints.
absl::Status RunSteps(const TrainOptions& o, const RunPlan& plan, int64_t start_step,
                      TrainingTask& task, LedgerSink& sink, EpochReport& report) {
  const bool json = o.format == "json";
  const bool writer = o.distributed.writer();  // other ranks neither print nor evaluate
  double loss_sum = 0;
  int64_t seen = 0, correct = 0;
  bool classifier = false;
  auto epoch_start = std::chrono::steady_clock::now();
  const int64_t total = plan.total_steps;
  std::optional<ProgressMeter> progress;
  if (!json && writer) {
    progress.emplace(start_step, total, isatty(fileno(stderr)) != 0, stderr,
                     plan.metrics.nonprivate());
  }
  for (int64_t step = start_step; step < total; ++step) {
    const int64_t accounted = sink.steps();
    absl::StatusOr<StepOutcome> outcome = task.Step(step, sink);
    if (!outcome.ok()) return outcome.status();
    if (sink.active() && sink.steps() != accounted + 1) {
      return absl::InternalError(absl::StrCat("step ", step, " appended ",
                                              sink.steps() - accounted, " ledger entries, not 1"));
    }
    ReachFaultPoint(FaultPoint::kUpdateApplied, step);
    loss_sum += outcome->loss_sum;
    seen += outcome->examples;
    if (outcome->correct >= 0) correct += outcome->correct, classifier = true;
    const bool epoch_end = (step + 1) % plan.steps_per_epoch == 0 || step + 1 == total;
    if (progress) {
      progress->Update(step + 1, outcome->examples,
                       seen ? loss_sum / static_cast<double>(seen) : 0.0,
                       classifier ? std::optional<double>(
                                        seen ? static_cast<double>(correct) / seen : 0.0)
                                  : std::nullopt,
                       epoch_end);
    }
    if (!epoch_end) continue;
    if (!writer) {
      loss_sum = 0, seen = correct = 0;
      continue;
    }
    absl::StatusOr<std::pair<nlohmann::json, std::string>> train =
        TrainMetrics(plan.metrics, step + 1, loss_sum, seen, classifier ? correct : -1, task,
                     sink);
    if (!train.ok()) return train.status();
    nlohmann::json metrics = train->first;
    absl::StatusOr<nlohmann::json> tested = task.Evaluate();
    if (!tested.ok()) return tested.status();
    for (const auto& [key, value] : tested->items()) metrics[key] = value;
    const std::string text = absl::StrCat(train->second, task.Describe(*tested));
    absl::Status reported = report.Report(step + 1, metrics, text, SecondsSince(epoch_start));
    if (!reported.ok()) return reported;
    if (!o.output_dir.empty()) {
      Checkpoint saved{o.model,          step + 1,           sink.steps(), sink.entries(),
                       plan.certified(), task.state_files(), plan.privacy};
      absl::Status written = SaveCheckpoint(o.output_dir, saved, [&](const std::string& suffix) {
        return task.Save(o.output_dir, suffix, step + 1);
      });
      if (!written.ok()) return written;
    }
    loss_sum = 0;
    seen = correct = 0;
    epoch_start = std::chrono::steady_clock::now();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTraining(const TrainOptions& o, TrainingTask& task) {
  const auto wall_start = std::chrono::steady_clock::now();
  absl::StatusOr<OpenedRun> run = OpenRun(o, task);
  if (!run.ok()) return run.status();
  const RunPlan& plan = run->plan;
  LedgerSink sink(run->ledger ? &*run->ledger : nullptr);
  const bool json = o.format == "json";
  absl::Status started = task.Start(plan, sink, o.resume, o.output_dir);
  if (!started.ok()) return started;
  int64_t start_step = 0;
  const bool writer = o.distributed.writer();
  if (run->checkpoint) {
    // Rank 0 checks the ledger; the other ranks load the same state (the distributed step
    // then checks that every rank starts at rank 0's step).
    absl::StatusOr<int64_t> resumed_at =
        writer ? CheckResume(*run->checkpoint, o.output_dir, run->ledger_path, task, sink, json)
               : task.Load(o.output_dir);
    if (!resumed_at.ok()) return resumed_at.status();
    start_step = *resumed_at;
  }
  EpochReport report(plan, json, run->ledger_path,
                     o.output_dir.empty() ? "" : Join(o.output_dir, kMetricsFile));
  if (writer) {
    report.PrintHeader(task.DescribeThreads(), o.output_dir.empty()
                                                   ? "no --output_dir"
                                                   : absl::StrCat("output in ", o.output_dir));
  }
  absl::Status trained = RunSteps(o, plan, start_step, task, sink, report);
  absl::Status finished = trained.ok() ? task.Finish(plan, plan.total_steps, run->ledger_path)
                                       : trained;
  if (o.output_dir.empty() && !run->ledger_path.empty()) {
    run->ledger.reset();
    std::remove(run->ledger_path.c_str());
  }
  if (!finished.ok()) return finished;
  if (!json && writer) std::printf("done in %.1f s\n", SecondsSince(wall_start));
  return absl::OkStatus();
}

}  // namespace dpkit::models
