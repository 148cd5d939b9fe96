#include "dpkit/models/idx_reader.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dpkit::models {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<uint8_t> Header(uint32_t magic, std::vector<uint32_t> dims) {
  std::vector<uint8_t> out;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  return out;
}

void WritePlain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

void WriteGzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// Three 2x2 images with pixel values 0..11 and labels 7, 0, 9.
std::vector<uint8_t> Images() {
  auto out = Header(0x803, {3, 2, 2});
  for (int i = 0; i < 12; ++i) out.push_back(static_cast<uint8_t>(i));
  return out;
}
std::vector<uint8_t> Labels() {
  auto out = Header(0x801, {3});
  for (uint8_t l : {7, 0, 9}) out.push_back(l);
  return out;
}

TEST(IdxReaderTest, ReadsPlainFiles) {
  WritePlain(TempPath("i"), Images());
  WritePlain(TempPath("l"), Labels());
  auto data = ReadIdxDataset(TempPath("i"), TempPath("l"));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->count, 3);
  EXPECT_EQ(data->rows, 2);
  EXPECT_EQ(data->cols, 2);
  EXPECT_EQ(data->pixels[5], 5);
  EXPECT_EQ(data->labels, (std::vector<uint8_t>{7, 0, 9}));
}

TEST(IdxReaderTest, ReadsGzippedFiles) {
  WriteGzip(TempPath("i.gz"), Images());
  WriteGzip(TempPath("l.gz"), Labels());
  auto data = ReadIdxDataset(TempPath("i.gz"), TempPath("l.gz"));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->pixels[11], 11);
  EXPECT_EQ(data->labels[2], 9);
}

TEST(IdxReaderTest, RejectsTruncatedImageFile) {
  auto images = Images();
  images.pop_back();
  WritePlain(TempPath("ti"), images);
  WritePlain(TempPath("tl"), Labels());
  auto data = ReadIdxDataset(TempPath("ti"), TempPath("tl"));
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("truncated"), std::string::npos) << data.status();
}

TEST(IdxReaderTest, RejectsTruncatedGzipStream) {
  WriteGzip(TempPath("full.gz"), Images());
  std::FILE* f = std::fopen(TempPath("full.gz").c_str(), "rb");
  std::vector<uint8_t> bytes(4096);
  bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
  std::fclose(f);
  bytes.resize(bytes.size() - 10);  // cut the gzip trailer and some data
  WritePlain(TempPath("cut.gz"), bytes);
  WriteGzip(TempPath("l2.gz"), Labels());
  EXPECT_FALSE(ReadIdxDataset(TempPath("cut.gz"), TempPath("l2.gz")).ok());
}

TEST(IdxReaderTest, RejectsWrongMagicNumber) {
  WritePlain(TempPath("mi"), Labels());  // a label file where images belong
  WritePlain(TempPath("ml"), Labels());
  auto data = ReadIdxDataset(TempPath("mi"), TempPath("ml"));
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("2051"), std::string::npos);
}

TEST(IdxReaderTest, RejectsCountMismatchAndBadLabels) {
  WritePlain(TempPath("ci"), Images());
  auto labels = Header(0x801, {2});
  labels.push_back(1);
  labels.push_back(2);
  WritePlain(TempPath("cl"), labels);
  EXPECT_FALSE(ReadIdxDataset(TempPath("ci"), TempPath("cl")).ok());
  auto bad = Labels();
  bad.back() = 10;
  WritePlain(TempPath("bl"), bad);
  EXPECT_FALSE(ReadIdxDataset(TempPath("ci"), TempPath("bl")).ok());
}

TEST(IdxReaderTest, MissingFileIsNotFound) {
  auto data = ReadIdxDataset(TempPath("does-not-exist"), TempPath("nor-this"));
  ASSERT_FALSE(data.ok());
  EXPECT_TRUE(absl::IsNotFound(data.status()));
}

}  // namespace
}  // namespace dpkit::models
