#include "dpkit/base/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace dpkit::base {
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

// Issue 21: `--output=/dev/full` exited 0 and replaced /dev/full with a regular file. A
// special file is written into (the error reported), never replaced.
TEST(FilesTest, WriteFileAtomicallyWritesIntoSpecialFilesAndReportsTheirErrors) {
  const absl::Status full = WriteFileAtomically("/dev/full", "x\n");
  EXPECT_EQ(full.code(), absl::StatusCode::kInternal);
  EXPECT_NE(full.message().find("No space left on device"), std::string::npos) << full;
  struct stat info;
  ASSERT_EQ(::stat("/dev/full", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  EXPECT_TRUE(WriteFileAtomically("/dev/null", "discarded\n").ok());
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  EXPECT_FALSE(PathExists("/dev/null.tmp"));
}

// A FIFO without a reader is refused at once instead of blocking in open().
TEST(FilesTest, WriteFileAtomicallyDoesNotBlockOnAFifoWithoutReader) {
  const std::string fifo = TempDir() + "/fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(WriteFileAtomically(fifo, "x").code(), absl::StatusCode::kInternal);
  struct stat info;
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
}

// A symlink given as the output keeps being a link; the file it points to is replaced.
TEST(FilesTest, WriteFileAtomicallyKeepsASymlinkAndReplacesItsTarget) {
  const std::string target = TempDir() + "/target.svg";
  const std::string link = TempDir() + "/link.svg";
  ASSERT_TRUE(WriteFileAtomically(target, "old\n").ok());
  std::remove(link.c_str());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(link, "new\n").ok());
  struct stat info;
  ASSERT_EQ(::lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  EXPECT_EQ(Read(target), "new\n");
  EXPECT_EQ(WriteFileAtomically(TempDir(), "x").code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace dpkit::base
