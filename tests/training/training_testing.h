// Test helpers of tests/training: small synthetic MNIST-format files, JSON-lines files,
// and trainer runs in a forked child (so that a run can be killed with SIGKILL at a chosen
// point of the engine's checkpoint protocol while the test process survives).
#ifndef DPKIT_TESTS_TRAINING_TRAINING_TESTING_H_
#define DPKIT_TESTS_TRAINING_TRAINING_TESTING_H_

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dpkit/models/engine/engine_testing.h"
#include "dpkit/models/trainer_registry.h"
#include "nlohmann/json.hpp"

namespace dpkit::training_testing {

inline std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// Lines of `path` that are complete JSON objects (a crash may leave a partial last line,
// which the ledger writer cuts off when the file is next opened).
inline int64_t CompleteJsonLines(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && !nlohmann::json::parse(line, nullptr, false).is_discarded()) ++n;
  }
  return n;
}

inline void WriteIdx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
                     const std::vector<uint8_t>& body) {
  std::ofstream out(path, std::ios::binary);
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.put(static_cast<char>(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
}

// MNIST-format files where class k lights up rows 2k+3..2k+5 (learnable, deterministic).
inline std::string MakeMnistData(const std::string& name, int train, int test) {
  const std::string dir = TempDir() + "/" + name;
  mkdir(dir.c_str(), 0755);
  for (auto [split, n] : {std::pair<std::string, int>{"train", train}, {"t10k", test}}) {
    std::vector<uint8_t> pixels(static_cast<size_t>(n) * 784, 0), labels(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(i % 10);
      for (int r = 2 * labels[i] + 3; r < 2 * labels[i] + 6; ++r) {
        for (int c = 4; c < 24; ++c) pixels[static_cast<size_t>(i) * 784 + r * 28 + c] = 255;
      }
    }
    WriteIdx(dir + "/" + split + "-images-idx3-ubyte", 0x803, {static_cast<uint32_t>(n), 28, 28},
             pixels);
    WriteIdx(dir + "/" + split + "-labels-idx1-ubyte", 0x801, {static_cast<uint32_t>(n)}, labels);
  }
  return dir;
}

// The same files named as Fashion-MNIST's (Debian's dataset-fashion-mnist: *-ubyte.gz). They
// stay uncompressed: zlib's gzread reads a file without the gzip magic as it is.
inline std::string MakeFashionMnistData(const std::string& name, int train, int test) {
  const std::string dir = MakeMnistData(name, train, test);
  for (const char* split : {"train", "t10k"}) {
    for (const char* kind : {"-images-idx3-ubyte", "-labels-idx1-ubyte"}) {
      const std::string path = dir + "/" + split + kind;
      std::rename(path.c_str(), (path + ".gz").c_str());
    }
  }
  return dir;
}

// Runs trainer `o.model` in a forked child with `hook` as the engine's fault hook (may be
// empty) and its output discarded. Returns the exit code (0 ok, 2 an error status), or
// -signal when the child was killed.
inline int RunInChild(const models::TrainOptions& o,
                      std::function<void(models::FaultPoint, int64_t)> hook = nullptr) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr ||
        std::freopen("/dev/null", "w", stderr) == nullptr) {
      _exit(3);
    }
    models::ScopedTrainingFault fault(std::move(hook));
    const models::TrainerInfo* trainer = models::FindTrainer(o.model);
    const bool ok = trainer != nullptr && trainer->run(o).ok();
    std::fflush(nullptr);
    _exit(ok ? 0 : 2);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1000;
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1000;
}

// A hook that kills the process with SIGKILL at (`point`, `step`).
inline std::function<void(models::FaultPoint, int64_t)> KillAt(models::FaultPoint point,
                                                               int64_t step) {
  return [point, step](models::FaultPoint p, int64_t s) {
    if (p == point && s == step) raise(SIGKILL);
  };
}

}  // namespace dpkit::training_testing

#endif  // DPKIT_TESTS_TRAINING_TRAINING_TESTING_H_
