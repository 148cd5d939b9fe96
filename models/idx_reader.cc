#include "dpkit/models/idx_reader.h"

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dpkit::models {
namespace {

// Whole file, decompressed when it starts with the gzip magic bytes.
absl::StatusOr<std::vector<uint8_t>> ReadMaybeGzipped(const std::string& path) {
  std::FILE* probe = std::fopen(path.c_str(), "rb");
  if (probe == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  unsigned char magic[2] = {0, 0};
  size_t got = std::fread(magic, 1, 2, probe);
  std::fclose(probe);
  bool gzipped = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<uint8_t> data;
  std::vector<uint8_t> chunk(1 << 20);
  while (true) {
    int n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int err = 0;
      std::string message = gzerror(file, &err);
      gzclose(file);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": corrupt or truncated gzip data (", message, ")"));
    }
    if (n == 0) break;
    data.insert(data.end(), chunk.begin(), chunk.begin() + n);
  }
  int err = 0;
  gzerror(file, &err);
  // zlib reports a gzip stream that ends early as Z_BUF_ERROR on the final read.
  bool truncated = gzipped && err == Z_BUF_ERROR;
  gzclose(file);
  if (truncated) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated gzip stream"));
  }
  return data;
}

uint32_t BigEndian32(const std::vector<uint8_t>& data, size_t offset) {
  return (uint32_t{data[offset]} << 24) | (uint32_t{data[offset + 1]} << 16) |
         (uint32_t{data[offset + 2]} << 8) | uint32_t{data[offset + 3]};
}

}  // namespace

absl::StatusOr<ImageDataset> ReadIdxDataset(const std::string& images_path,
                                            const std::string& labels_path) {
  absl::StatusOr<std::vector<uint8_t>> images = ReadMaybeGzipped(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<std::vector<uint8_t>> labels = ReadMaybeGzipped(labels_path);
  if (!labels.ok()) return labels.status();
  if (images->size() < 16 || BigEndian32(*images, 0) != 0x00000803) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, ": not an idx image file (expected magic number 2051 and a 16-byte header)"));
  }
  if (labels->size() < 8 || BigEndian32(*labels, 0) != 0x00000801) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_path, ": not an idx label file (expected magic number 2049 and an 8-byte header)"));
  }
  ImageDataset out;
  out.count = BigEndian32(*images, 4);
  out.rows = BigEndian32(*images, 8);
  out.cols = BigEndian32(*images, 12);
  if (out.rows < 1 || out.cols < 1 || out.rows > 4096 || out.cols > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": bad image size ", out.rows,
                                                   "x", out.cols));
  }
  uint64_t want_images = 16 + static_cast<uint64_t>(out.count) * out.rows * out.cols;
  if (images->size() != want_images) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, ": ", images->size(), " bytes but the header (", out.count, " images of ",
        out.rows, "x", out.cols, ") needs ", want_images,
        images->size() < want_images ? " (truncated file?)" : ""));
  }
  int64_t label_count = BigEndian32(*labels, 4);
  if (labels->size() != 8 + static_cast<uint64_t>(label_count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_path, ": ", labels->size(), " bytes but the header (", label_count,
        " labels) needs ", 8 + label_count,
        labels->size() < 8 + static_cast<uint64_t>(label_count) ? " (truncated file?)" : ""));
  }
  if (label_count != out.count) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, " has ", out.count,
                                                   " images but ", labels_path, " has ",
                                                   label_count, " labels"));
  }
  out.pixels.assign(images->begin() + 16, images->end());
  out.labels.assign(labels->begin() + 8, labels->end());
  for (int64_t i = 0; i < out.count; ++i) {
    if (out.labels[i] > 9) {
      return absl::InvalidArgumentError(absl::StrCat(labels_path, ": label ", int{out.labels[i]},
                                                     " of example ", i, " is not in [0, 10)"));
    }
  }
  return out;
}

IdxPaths MnistPaths(const std::string& data_dir, const std::string& split) {
  return {absl::StrCat(data_dir, "/", split, "-images-idx3-ubyte"),
          absl::StrCat(data_dir, "/", split, "-labels-idx1-ubyte")};
}

IdxPaths FashionMnistPaths(const std::string& data_dir, const std::string& split) {
  return {absl::StrCat(data_dir, "/", split, "-images-idx3-ubyte.gz"),
          absl::StrCat(data_dir, "/", split, "-labels-idx1-ubyte.gz")};
}

}  // namespace dpkit::models
