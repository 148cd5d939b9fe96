// Helpers for the tests of models/wide: small files in the real formats.
#ifndef DPKIT_MODELS_WIDE_WIDE_TESTING_H_
#define DPKIT_MODELS_WIDE_WIDE_TESTING_H_

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>

namespace dpkit::models::wide {

// A fresh path under the test's temporary directory.
inline std::string TestPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

inline std::string WriteTestFile(const std::string& name, const std::string& contents) {
  const std::string path = TestPath(name);
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

inline void MakeTestDirectory(const std::string& path) { mkdir(path.c_str(), 0755); }

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_WIDE_TESTING_H_
