// Test-only fault injection into the training engine: while a ScopedTrainingFault lives,
// the engine calls `hook` at every FaultPoint of engine/checkpoint.h (e.g. to raise SIGKILL
// between a step's ledger append and its update, or between the state-file renames and
// checkpoint.json's).
#ifndef DPKIT_MODELS_ENGINE_ENGINE_TESTING_H_
#define DPKIT_MODELS_ENGINE_ENGINE_TESTING_H_

#include <cstdint>
#include <functional>
#include <utility>

#include "dpkit/models/engine/checkpoint.h"

namespace dpkit::models {

class ScopedTrainingFault {
 public:
  explicit ScopedTrainingFault(std::function<void(FaultPoint, int64_t)> hook) {
    internal::TrainingFaultHook() = std::move(hook);
  }
  ~ScopedTrainingFault() { internal::TrainingFaultHook() = nullptr; }
  ScopedTrainingFault(const ScopedTrainingFault&) = delete;
  ScopedTrainingFault& operator=(const ScopedTrainingFault&) = delete;
};

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_ENGINE_ENGINE_TESTING_H_
