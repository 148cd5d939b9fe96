#include "models/files.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace dpkit::models {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(FilesTest, JoinKeepsANameAloneWithoutADirectory) {
  EXPECT_EQ(Join("", "ledger.jsonl"), "ledger.jsonl");
  EXPECT_EQ(Join("out/run", "ledger.jsonl"), "out/run/ledger.jsonl");
}

TEST(FilesTest, MakeDirsCreatesParentsAndRefusesAFile) {
  const std::string dir = TempDir() + "/a/b/c";
  ASSERT_TRUE(MakeDirs(dir).ok());
  EXPECT_TRUE(PathExists(dir));
  EXPECT_TRUE(MakeDirs(dir).ok());  // again: nothing to do
  ASSERT_TRUE(WriteFileAtomically(TempDir() + "/plain", "x").ok());
  EXPECT_EQ(MakeDirs(TempDir() + "/plain").code(), absl::StatusCode::kNotFound);
}

TEST(FilesTest, WriteFileAtomicallyReplacesTheFileAndLeavesNoTemporary) {
  const std::string path = TempDir() + "/state.json";
  ASSERT_TRUE(WriteFileAtomically(path, "first\n").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second\n").ok());
  EXPECT_EQ(Read(path), "second\n");
  EXPECT_FALSE(PathExists(path + ".tmp"));
  EXPECT_EQ(WriteFileAtomically(TempDir() + "/no/such/dir/x", "y").code(),
            absl::StatusCode::kInternal);
}

TEST(FilesTest, RemoveIfExistsIgnoresMissingFiles) {
  const std::string path = TempDir() + "/gone";
  ASSERT_TRUE(WriteFileAtomically(path, "x").ok());
  EXPECT_TRUE(RemoveIfExists(path).ok());
  EXPECT_FALSE(PathExists(path));
  EXPECT_TRUE(RemoveIfExists(path).ok());
}

}  // namespace
}  // namespace dpkit::models
