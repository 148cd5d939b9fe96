// LIBSVM / SVMlight text format, as used by the a9a version of Adult
// (https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a):
//   <label> <index>:<value> <index>:<value> ...
// one example per line; label +1/-1 (or 1/0); indices 1-based and increasing; absent
// features are 0. a9a has 123 binary features (train 32,561 lines, test `a9a.t`
// 16,281 lines).
#ifndef DPKIT_MODELS_WIDE_LIBSVM_H_
#define DPKIT_MODELS_WIDE_LIBSVM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dpkit::models::wide {

struct LibsvmData {
  int num_features = 0;
  std::vector<int> labels;             // 1 for +1, 0 for -1 / 0
  std::vector<float> features;         // dense, labels.size() x num_features, row-major
};

// Reads a LIBSVM file with features 1..num_features. Errors name the file and line:
// a bad label, a token not of the form index:value, an index outside
// [1, num_features] or not increasing, a non-finite value. NotFound if unreadable.
absl::StatusOr<LibsvmData> ReadLibsvm(const std::string& path, int num_features);

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_LIBSVM_H_
