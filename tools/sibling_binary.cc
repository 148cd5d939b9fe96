#include "dpkit/tools/sibling_binary.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace dpkit::tools {
namespace {

bool IsExecutable(const std::string& path) {
  return !path.empty() && access(path.c_str(), X_OK) == 0;
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The folder of the running executable (symlinks resolved), or "" when unknown.
std::string SelfDirectory() {
  std::vector<char> buffer(4096);
  const ssize_t n = readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0) return "";
  return Dirname(std::string(buffer.data(), static_cast<size_t>(n)));
}

}  // namespace

std::string FindSiblingBinary(const char* name, const char* env_var, const char* argv0) {
  if (const char* env = std::getenv(env_var); env != nullptr && *env != '\0') return env;
  std::vector<std::string> candidates;
  if (std::string self = SelfDirectory(); !self.empty()) {
    candidates.push_back(self + "/" + name);
  }
  const std::string invoked = argv0 != nullptr ? argv0 : "";
  if (invoked.find('/') != std::string::npos) {
    candidates.push_back(Dirname(invoked) + "/" + name);
  }
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string ws = workspace != nullptr ? workspace : "dpkit";
  if (!invoked.empty()) {
    candidates.push_back(invoked + ".runfiles/" + ws + "/tools/" + name);
  }
  for (const char* root : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = std::getenv(root); dir != nullptr && *dir != '\0') {
      candidates.push_back(std::string(dir) + "/" + ws + "/tools/" + name);
    }
  }
  for (const std::string& path : candidates) {
    if (IsExecutable(path)) return path;
  }
  return "";
}

}  // namespace dpkit::tools
