// `dpkit train` in the accounting binary: execs the training binary (//tools:dpkit_train),
// so that `dpkit` itself links no LibTorch (issue 15, item 3). The training binary is found
//   1. at $DPKIT_TRAIN_BINARY, when set;
//   2. beside the running dpkit (the same bazel-bin/tools/ folder, or an install folder);
//   3. in dpkit's Bazel runfiles (dpkit.runfiles/<workspace>/tools/dpkit_train, or under
//      $RUNFILES_DIR / $TEST_SRCDIR).
// Before exec it sets OMP_WAIT_POLICY=PASSIVE (unless set) and, for --threads=N, N > 0,
// OMP_NUM_THREADS=N (unless set): libgomp reads both when it is loaded, before any code of
// the trainer runs; spinning OpenMP threads slow LibTorch badly on a shared machine.
//
// `dpkit train MODEL --nproc=N` (N > 1) starts N local ranks instead, like torchrun
// --nproc_per_node: N children exec the training binary with RANK, WORLD_SIZE,
// MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free port, unless --master_port is given) set,
// and --threads=max(1, cores / N) unless --threads is given (OMP_NUM_THREADS likewise).
// When a rank exits abnormally (non-zero, or a signal), the launcher names it in one line
// if it was killed by a signal, gives the other ranks kFailureGraceSeconds to notice (they
// print the one-line error of models/engine/distributed.h and exit non-zero) and then kills
// the ones left (a hung rank), and exits non-zero itself. SIGINT and SIGTERM are forwarded.
// The ranks' final one-line errors (a refused flag is refused by every rank) are printed by
// the launcher once the ranks have ended, each distinct line once (RankErrors).
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "dpkit/base/free_port.h"
#include "dpkit/tools/command.h"
#include "dpkit/tools/sibling_binary.h"

namespace dpkit::tools {
namespace {

constexpr char kTrainBinary[] = "dpkit_train";

// The value of --NAME in argv (--NAME=V or --NAME V), or "" when absent.
std::string FlagValue(int argc, char** argv, const std::string& name) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    for (const std::string& prefix : {"--" + name + "=", "-" + name + "="}) {
      if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
    }
    if ((arg == "--" + name || arg == "-" + name) && i + 1 < argc) return argv[i + 1];
  }
  return "";
}

std::string ThreadsFlag(int argc, char** argv) { return FlagValue(argc, argv, "threads"); }

// A small positive decimal integer, or -1.
int SmallPositive(const std::string& text) {
  if (text.empty() || text.size() > 5 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  const int value = std::atoi(text.c_str());
  return value > 0 ? value : -1;
}

constexpr int kFailureGraceSeconds = 5;

// The cores this process may run on.
int UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

std::vector<pid_t>* g_children = nullptr;

void ForwardSignal(int signal) {
  if (g_children == nullptr) return;
  for (pid_t pid : *g_children) {
    if (pid > 0) kill(pid, signal);
  }
}

// Waits for every child; returns the launcher's exit code (see the file comment).
int WaitForRanks(std::vector<pid_t>& children) {
  int exit_code = 0, running = static_cast<int>(children.size());
  std::chrono::steady_clock::time_point deadline{};
  bool failed = false;
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, failed ? WNOHANG : 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    if (pid == 0) {  // failed: polling until the deadline
      if (std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      for (size_t r = 0; r < children.size(); ++r) {
        if (children[r] <= 0) continue;
        std::fprintf(stderr, "dpkit train: rank %zu did not stop within %d s of the failure; "
                     "killing it\n", r, kFailureGraceSeconds);
        kill(children[r], SIGKILL);
      }
      failed = false;  // now wait (blocking) for the killed ones
      continue;
    }
    size_t rank = 0;
    while (rank < children.size() && children[rank] != pid) ++rank;
    if (rank == children.size()) continue;
    children[rank] = -1;
    --running;
    const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (clean || exit_code != 0) continue;
    if (WIFSIGNALED(status)) {
      std::fprintf(stderr, "dpkit train: rank %zu was killed by signal %d (%s); stopping the "
                   "other ranks\n", rank, WTERMSIG(status), strsignal(WTERMSIG(status)));
      exit_code = kExitFailure;
    } else {
      exit_code = WEXITSTATUS(status);
    }
    failed = true;
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kFailureGraceSeconds);
  }
  return exit_code;
}

// The ranks' final error lines (tools/command.cc, PrintFinalError): each rank writes its
// one line to DIR/rank<R> instead of stderr; once the ranks have ended, each distinct line is
// printed once, in rank order, and the folder is removed.
class RankErrors {
 public:
  RankErrors() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                          "/dpkit-train-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
  }
  // The file of `rank` ("" when no folder could be made: the ranks print to stderr).
  std::string FileOf(int rank) const {
    return dir_.empty() ? "" : dir_ + "/rank" + std::to_string(rank);
  }
  void PrintAndRemove(int nproc) {
    if (dir_.empty()) return;
    std::set<std::string> printed;
    for (int rank = 0; rank < nproc; ++rank) {
      const std::string file = FileOf(rank);
      std::ifstream in(file);
      for (std::string line; std::getline(in, line);) {
        if (!line.empty() && printed.insert(line).second) {
          std::fprintf(stderr, "%s\n", line.c_str());
        }
      }
      std::remove(file.c_str());
    }
    rmdir(dir_.c_str());
  }

 private:
  std::string dir_;
};

// `dpkit train MODEL --nproc=N ...`: N ranks of the training binary on this machine.
int LaunchRanks(const std::string& binary, int argc, char** argv, int nproc) {
  std::vector<std::string> args{binary};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--nproc=", 0) == 0 || arg.rfind("-nproc=", 0) == 0) continue;
    if (arg == "--nproc" || arg == "-nproc") {
      ++i;
      continue;
    }
    args.push_back(arg);
  }
  std::string threads = ThreadsFlag(argc, argv);
  if (threads.empty()) {
    threads = std::to_string(std::max(1, UsableCores() / nproc));
    args.push_back("--threads=" + threads);
  }
  if (SmallPositive(threads) > 0) setenv("OMP_NUM_THREADS", threads.c_str(), /*overwrite=*/0);
  std::string port = FlagValue(argc, argv, "master_port");
  if (port.empty()) {
    const int free_port = base::FreeLoopbackPort();
    if (free_port == 0) {
      std::fprintf(stderr, "dpkit train: no free TCP port on 127.0.0.1 for the rendezvous\n");
      return kExitFailure;
    }
    port = std::to_string(free_port);
  }
  setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", port.c_str(), 1);
  std::vector<char*> exec_args;
  for (std::string& a : args) exec_args.push_back(a.data());
  exec_args.push_back(nullptr);
  std::vector<pid_t> children(static_cast<size_t>(nproc), -1);
  g_children = &children;
  signal(SIGINT, ForwardSignal);
  signal(SIGTERM, ForwardSignal);
  RankErrors errors;
  std::fflush(nullptr);
  for (int rank = 0; rank < nproc; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("DPKIT_ERROR_FILE", errors.FileOf(rank).c_str(), 1);
      execv(binary.c_str(), exec_args.data());
      std::fprintf(stderr, "dpkit train: cannot run %s: %s\n", binary.c_str(),
                   std::strerror(errno));
      _exit(kExitFailure);
    }
    if (pid < 0) {
      std::fprintf(stderr, "dpkit train: cannot start rank %d: %s\n", rank, std::strerror(errno));
      ForwardSignal(SIGKILL);
      WaitForRanks(children);
      errors.PrintAndRemove(nproc);
      return kExitFailure;
    }
    children[static_cast<size_t>(rank)] = pid;
  }
  const int exit_code = WaitForRanks(children);
  errors.PrintAndRemove(nproc);
  return exit_code;
}

int ExecTrain(int argc, char** argv) {
  const std::string binary =
      FindSiblingBinary(kTrainBinary, "DPKIT_TRAIN_BINARY", argc > 0 ? argv[0] : nullptr);
  if (binary.empty()) {
    std::fprintf(stderr,
                 "dpkit train: cannot find the training binary %s (looked beside dpkit and "
                 "in its runfiles; build //tools:dpkit_train or set DPKIT_TRAIN_BINARY)\n",
                 kTrainBinary);
    return kExitFailure;
  }
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  if (const std::string nproc = FlagValue(argc, argv, "nproc"); !nproc.empty()) {
    const int n = SmallPositive(nproc);
    if (n < 1 || n > 1024) {
      std::fprintf(stderr, "dpkit train: --nproc must be an integer in [1, 1024], got '%s'\n",
                   nproc.c_str());
      return kExitUsage;
    }
    if (n > 1) return LaunchRanks(binary, argc, argv, n);
  }
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
