#include "dpkit/models/trainer_registry.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dpkit::models {
namespace {

std::map<std::string, TrainerInfo>& Registry() {
  static auto* registry = new std::map<std::string, TrainerInfo>();
  return *registry;
}

}  // namespace

bool RegisterTrainer(TrainerInfo trainer) {
  std::string name = trainer.name;
  if (!Registry().emplace(name, std::move(trainer)).second) {
    std::fprintf(stderr, "dpkit: trainer '%s' registered twice\n", name.c_str());
    std::abort();
  }
  return true;
}

const TrainerInfo* FindTrainer(const std::string& name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : &it->second;
}

std::vector<const TrainerInfo*> RegisteredTrainers() {
  std::vector<const TrainerInfo*> out;
  for (const auto& [name, trainer] : Registry()) out.push_back(&trainer);
  return out;
}

}  // namespace dpkit::models
