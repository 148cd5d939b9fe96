#include "dpkit/models/engine/checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpkit/models/files.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {
namespace {

absl::StatusOr<int64_t> NonNegativeInt(const nlohmann::json& j, const char* field,
                                       const std::string& file) {
  if (!j.contains(field) || !j[field].is_number_integer() || j[field].get<int64_t>() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": not a dpkit checkpoint (", field, " missing or not an integer >= 0)"));
  }
  return j[field].get<int64_t>();
}

}  // namespace

std::string TemporaryLedgerPath(const std::string& model) {
  return (std::filesystem::temp_directory_path() /
          absl::StrCat("dpkit-ledger-", ::getpid(), "-", model, ".jsonl"))
      .string();
}

absl::Status PrepareFreshRun(const std::string& dir, bool overwrite,
                             const std::vector<std::string>& state_files,
                             const std::vector<std::string>& other_files) {
  std::vector<std::string> files = {kCheckpointFile, std::string(kCheckpointFile) + ".tmp"};
  for (const std::string& f : state_files) {
    files.push_back(f);
    files.push_back(f + ".tmp");
  }
  files.insert(files.end(), other_files.begin(), other_files.end());
  files.push_back(kLedgerFile);
  files.push_back(kMetricsFile);
  if (!overwrite) {
    for (const std::string& f : files) {
      if (PathExists(Join(dir, f))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--output_dir ", dir, " holds a run (", f,
            "): give --resume to continue it or --overwrite to replace it"));
      }
    }
    return absl::OkStatus();
  }
  // checkpoint.json first: from here on nothing of the old run can be resumed.
  for (const std::string& f : files) {
    absl::Status removed = RemoveIfExists(Join(dir, f));
    if (!removed.ok()) return removed;
  }
  return SyncPath(dir);
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& dir, const std::string& model) {
  const std::string file = Join(dir, kCheckpointFile);
  std::ifstream in(file);
  if (!in) return absl::NotFoundError(absl::StrCat("--resume: no checkpoint at ", file));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not a dpkit checkpoint (not JSON)"));
  }
  Checkpoint c;
  if (!j.contains("model") || !j["model"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not a dpkit checkpoint (model missing)"));
  }
  c.model = j["model"].get<std::string>();
  if (c.model != model) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, " is a checkpoint of model ", c.model, ", not ", model));
  }
  for (auto [field, target] : {std::pair<const char*, int64_t*>{"next_step", &c.next_step},
                               {"ledger_steps", &c.ledger_steps},
                               {"ledger_entries", &c.ledger_entries}}) {
    absl::StatusOr<int64_t> value = NonNegativeInt(j, field, file);
    if (!value.ok()) return value.status();
    *target = *value;
  }
  if (!j.contains("ledger") || !j["ledger"].is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not a dpkit checkpoint (ledger missing)"));
  }
  c.ledger = j["ledger"].get<bool>();
  if (c.ledger && (c.ledger_steps < c.next_step || c.ledger_entries < c.ledger_steps)) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": ledger_steps ", c.ledger_steps, " / ledger_entries ", c.ledger_entries,
        " do not cover next_step ", c.next_step, "; refusing to resume"));
  }
  if (!j.contains("state_files") || !j["state_files"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not a dpkit checkpoint (state_files missing)"));
  }
  for (const nlohmann::json& f : j["state_files"]) {
    if (!f.is_string() || f.get<std::string>().find('/') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": not a dpkit checkpoint (bad state_files)"));
    }
    c.state_files.push_back(f.get<std::string>());
    if (!PathExists(Join(dir, c.state_files.back()))) {
      return absl::NotFoundError(absl::StrCat("--resume: ", Join(dir, c.state_files.back()),
                                              " is missing (", file, " needs it)"));
    }
  }
  absl::StatusOr<PrivacySettings> privacy =
      PrivacySettingsFromJson(j.contains("privacy") ? j["privacy"] : nlohmann::json(), file);
  if (!privacy.ok()) return privacy.status();
  c.privacy = *std::move(privacy);
  return c;
}

absl::Status SaveCheckpoint(const std::string& dir, const Checkpoint& c,
                            const std::function<absl::Status(const std::string& suffix)>& write_state) {
  absl::Status written = write_state(".tmp");
  if (!written.ok()) return written;
  for (const std::string& f : c.state_files) {
    absl::Status synced = SyncPath(Join(dir, f + ".tmp"));
    if (!synced.ok()) return synced;
  }
  ReachFaultPoint(FaultPoint::kStateWritten, c.next_step);
  for (const std::string& f : c.state_files) {
    absl::Status renamed = RenameDurably(Join(dir, f + ".tmp"), Join(dir, f));
    if (!renamed.ok()) return renamed;
  }
  ReachFaultPoint(FaultPoint::kStateRenamed, c.next_step);
  const nlohmann::json j = {{"model", c.model},
                            {"next_step", c.next_step},
                            {"ledger_steps", c.ledger_steps},
                            {"ledger_entries", c.ledger_entries},
                            {"ledger", c.ledger},
                            {"state_files", c.state_files},
                            {"privacy", PrivacySettingsToJson(c.privacy)}};
  absl::Status saved = WriteFileAtomically(Join(dir, kCheckpointFile), j.dump() + "\n");
  if (!saved.ok()) return saved;
  ReachFaultPoint(FaultPoint::kCheckpointWritten, c.next_step);
  return absl::OkStatus();
}

namespace internal {
FaultHook& TrainingFaultHook() {
  static auto* hook = new FaultHook();
  return *hook;
}
}  // namespace internal

void ReachFaultPoint(FaultPoint point, int64_t step) {
  const internal::FaultHook& hook = internal::TrainingFaultHook();
  if (hook) hook(point, step);
}

}  // namespace dpkit::models
