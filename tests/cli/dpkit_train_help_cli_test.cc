// Per-model help versus behaviour: for MNIST (its paper's SGD settings) and MovieLens
// (Adam, delta 1e-6, B = n/80), every default that `dpkit train MODEL --help` states for the
// model's privacy and schedule flags behaves exactly as if --flag=VALUE were given: the
// run's header line (n, q, sigma, C, optimizer, learning rate, steps per epoch, epochs,
// delta) is the same. One DP step each, on small files written here.
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/tests/cli/dpkit_runner.h"

namespace dpkit::testing {
namespace {

void WriteIdx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
              const std::string& body) {
  std::ofstream out(path, std::ios::binary);
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.put(static_cast<char>(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out << body;
}

// MNIST-format files of `train` and `test` blank images with labels i % 10.
std::string MakeMnist(int train, int test) {
  const std::string dir = TempDir() + "/help_mnist";
  mkdir(dir.c_str(), 0755);
  for (auto [split, n] : {std::pair<std::string, int>{"train", train}, {"t10k", test}}) {
    std::string labels;
    for (int i = 0; i < n; ++i) labels.push_back(static_cast<char>(i % 10));
    WriteIdx(dir + "/" + split + "-images-idx3-ubyte", 0x803,
             {static_cast<uint32_t>(n), 28, 28}, std::string(static_cast<size_t>(n) * 784, '\0'));
    WriteIdx(dir + "/" + split + "-labels-idx1-ubyte", 0x801, {static_cast<uint32_t>(n)}, labels);
  }
  return dir;
}

// A ratings.dat of 60 users x 40 movies.
std::string MakeMovieLens() {
  const std::string dir = TempDir() + "/help_movielens";
  mkdir(dir.c_str(), 0755);
  std::ofstream out(dir + "/ratings.dat");
  for (int u = 1; u <= 60; ++u) {
    for (int m = 1; m <= 40; ++m) out << u << "::" << m << "::" << 1 + (u + m) % 5 << "::97830000\n";
  }
  return dir;
}

// The flags of `dpkit train MODEL --help` with a stated default: name -> default.
std::map<std::string, std::string> StatedDefaults(const std::string& model) {
  std::map<std::string, std::string> out;
  std::stringstream help(Dpkit("train " + model + " --help").out);
  for (std::string line; std::getline(help, line);) {
    if (line.rfind("  --", 0) != 0) continue;
    const size_t at = line.find("default: ");
    if (at == std::string::npos) continue;
    const size_t end = line.find_first_of(";)", at);
    out[line.substr(4, line.find(' ', 4) - 4)] = line.substr(at + 9, end - at - 9);
  }
  return out;
}

std::string Header(const std::string& out) { return out.substr(0, out.find('\n')); }

void ExpectStatedDefaultsAreTheBehaviour(const std::string& model, const std::string& args) {
  const std::map<std::string, std::string> stated = StatedDefaults(model);
  const CliRun base = Dpkit("train " + model + " " + args);
  ASSERT_EQ(base.exit_code, 0) << base.err;
  ASSERT_EQ(Header(base.out).rfind("dpkit train " + model + ": ", 0), 0u) << base.out;
  int checked = 0;
  for (const char* name : {"learning_rate", "clip_norm", "noise_multiplier", "batch_size",
                           "epochs", "optimizer", "delta"}) {
    const auto value = stated.find(name);
    if (value == stated.end()) continue;  // e.g. MovieLens's batch size, n/80
    SCOPED_TRACE(model + " --" + name + "=" + value->second);
    const CliRun given = Dpkit("train " + model + " " + args + " --" + name + "=" + value->second);
    ASSERT_EQ(given.exit_code, 0) << given.err;
    EXPECT_EQ(Header(given.out), Header(base.out));
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

constexpr char kRunArgs[] = " --max_steps=1 --threads=1 --test_subset=10";

TEST(DpkitTrainHelpTest, MnistStatedDefaultsAreTheBehaviour) {
  ExpectStatedDefaultsAreTheBehaviour("mnist", "--data_dir=" + MakeMnist(512, 10) + kRunArgs);
}

TEST(DpkitTrainHelpTest, MovieLensStatedDefaultsAreTheBehaviour) {
  ExpectStatedDefaultsAreTheBehaviour("movielens", "--data_dir=" + MakeMovieLens() + kRunArgs);
}

}  // namespace
}  // namespace dpkit::testing
