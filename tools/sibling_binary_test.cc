#include "dpkit/tools/sibling_binary.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace dpkit::tools {
namespace {

TEST(FindSiblingBinaryTest, EnvironmentVariableWinsAsGiven) {
  setenv("DPKIT_SIBLING_TEST_BINARY", "/no/such/file", 1);
  EXPECT_EQ(FindSiblingBinary("dpkit_accounting", "DPKIT_SIBLING_TEST_BINARY", nullptr),
            "/no/such/file");
  unsetenv("DPKIT_SIBLING_TEST_BINARY");
}

TEST(FindSiblingBinaryTest, FindsTheAccountingBinaryBesideOrInRunfiles) {
  const std::string found =
      FindSiblingBinary("dpkit_accounting", "DPKIT_SIBLING_TEST_UNSET", "sibling_binary_test");
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.substr(found.size() - std::string("/tools/dpkit_accounting").size()),
            "/tools/dpkit_accounting");
  EXPECT_EQ(access(found.c_str(), X_OK), 0);
}

TEST(FindSiblingBinaryTest, FindsAnExecutableBesideArgv0) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  const std::string dir = std::string(tmp) + "/install";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const std::string tool = dir + "/dpkit_sibling_probe";
  std::ofstream(tool) << "#!/bin/sh\n";
  ASSERT_EQ(chmod(tool.c_str(), 0755), 0);
  EXPECT_EQ(FindSiblingBinary("dpkit_sibling_probe", "DPKIT_SIBLING_TEST_UNSET",
                              (dir + "/dpkit").c_str()),
            tool);
  // Not executable: not found.
  ASSERT_EQ(chmod(tool.c_str(), 0644), 0);
  EXPECT_EQ(FindSiblingBinary("dpkit_sibling_probe", "DPKIT_SIBLING_TEST_UNSET",
                              (dir + "/dpkit").c_str()),
            "");
}

TEST(FindSiblingBinaryTest, UnknownNameIsEmpty) {
  EXPECT_EQ(FindSiblingBinary("dpkit_no_such_binary", "DPKIT_SIBLING_TEST_UNSET", "dpkit"), "");
}

}  // namespace
}  // namespace dpkit::tools
