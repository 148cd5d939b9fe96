// `dpkit train` in the accounting binary: execs the training binary (//tools:dpkit_train),
// so that `dpkit` itself links no LibTorch (issue 15, item 3). The training binary is found
//   1. at $DPKIT_TRAIN_BINARY, when set;
//   2. beside the running dpkit (the same bazel-bin/tools/ folder, or an install folder);
//   3. in dpkit's Bazel runfiles (dpkit.runfiles/<workspace>/tools/dpkit_train, or under
//      $RUNFILES_DIR / $TEST_SRCDIR).
// Before exec it sets OMP_WAIT_POLICY=PASSIVE (unless set) and, for --threads=N, N > 0,
// OMP_NUM_THREADS=N (unless set): libgomp reads both when it is loaded, before any code of
// the trainer runs; spinning OpenMP threads slow LibTorch badly on a shared machine.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dpkit/tools/command.h"

namespace dpkit::tools {
namespace {

constexpr char kTrainBinary[] = "dpkit_train";

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

std::string FindTrainBinary(const char* argv0) {
  if (const char* env = std::getenv("DPKIT_TRAIN_BINARY"); env != nullptr && *env != '\0') {
    return env;  // used as given; exec reports a bad path
  }
  std::vector<std::string> candidates;
  if (std::string self = SelfDirectory(); !self.empty()) {
    candidates.push_back(self + "/" + kTrainBinary);
  }
  const std::string invoked = argv0 != nullptr ? argv0 : "";
  if (invoked.find('/') != std::string::npos) {
    candidates.push_back(Dirname(invoked) + "/" + kTrainBinary);
  }
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string ws = workspace != nullptr ? workspace : "dpkit";
  if (!invoked.empty()) {
    candidates.push_back(invoked + ".runfiles/" + ws + "/tools/" + kTrainBinary);
  }
  for (const char* root : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = std::getenv(root); dir != nullptr && *dir != '\0') {
      candidates.push_back(std::string(dir) + "/" + ws + "/tools/" + kTrainBinary);
    }
  }
  for (const std::string& path : candidates) {
    if (IsExecutable(path)) return path;
  }
  return "";
}

// The value of --threads in argv (--threads=N or --threads N), or "" when absent.
std::string ThreadsFlag(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    for (const std::string prefix : {"--threads=", "-threads="}) {
      if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
    }
    if ((arg == "--threads" || arg == "-threads") && i + 1 < argc) return argv[i + 1];
  }
  return "";
}

int ExecTrain(int argc, char** argv) {
  const std::string binary = FindTrainBinary(argc > 0 ? argv[0] : nullptr);
  if (binary.empty()) {
    std::fprintf(stderr,
                 "dpkit train: cannot find the training binary %s (looked beside dpkit and "
                 "in its runfiles; build //tools:dpkit_train or set DPKIT_TRAIN_BINARY)\n",
                 kTrainBinary);
    return kExitFailure;
  }
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  const std::string threads = ThreadsFlag(argc, argv);
  if (!threads.empty() && threads.find_first_not_of("0123456789") == std::string::npos &&
      threads.size() < 6 && std::atoi(threads.c_str()) > 0) {
    setenv("OMP_NUM_THREADS", threads.c_str(), /*overwrite=*/0);
  }
  // argv of the training binary: its own path, then "train" and the arguments as given.
  std::vector<char*> args;
  args.push_back(const_cast<char*>(binary.c_str()));
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(binary.c_str(), args.data());
  std::fprintf(stderr, "dpkit train: cannot run %s: %s\n", binary.c_str(), std::strerror(errno));
  return kExitFailure;
}

[[maybe_unused]] const bool kRegistered = RegisterRawCommand(
    "train", "train a model with DP-SGD / DP-Adam / DP-AdaGrad (runs dpkit_train)", &ExecTrain);

}  // namespace
}  // namespace dpkit::tools
