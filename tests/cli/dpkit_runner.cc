#include "dpkit/tests/cli/dpkit_runner.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dpkit::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string DpkitPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/" +
         (workspace != nullptr ? workspace : "dpkit") + "/tools/dpkit";
}

CliRun Dpkit(const std::string& args, const std::string& environment) {
  const std::string out = TempDir() + "/stdout.txt";
  const std::string err = TempDir() + "/stderr.txt";
  const std::string command = (environment.empty() ? "" : "env " + environment + " ") +
                              DpkitPath() + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(command.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReadFile(out);
  run.err = ReadFile(err);
  return run;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

int CountLines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

void ExpectUsageError(const std::string& args, const std::string& message_part) {
  SCOPED_TRACE("dpkit " + args);
  CliRun run = Dpkit(args);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(CountLines(run.err), 1) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_NE(run.err.find(message_part), std::string::npos) << run.err;
}

}  // namespace dpkit::testing
