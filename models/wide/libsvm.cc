#include "dpkit/models/wide/libsvm.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dpkit::models::wide {

absl::StatusOr<LibsvmData> ReadLibsvm(const std::string& path, int num_features) {
  if (num_features < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_features must be >= 1, got ", num_features));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read LIBSVM file ", path));
  LibsvmData data;
  data.num_features = num_features;
  std::string line, token;
  int64_t line_number = 0;
  auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", what));
  };
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream tokens(line);
    if (!(tokens >> token)) continue;  // blank line
    double label;
    if (!absl::SimpleAtod(token, &label) || !(label == 1 || label == -1 || label == 0)) {
      return error(absl::StrCat("label must be +1, -1 or 0, got '", token.substr(0, 20), "'"));
    }
    data.labels.push_back(label > 0 ? 1 : 0);
    data.features.resize(data.features.size() + static_cast<size_t>(num_features), 0.0f);
    float* row = data.features.data() + data.features.size() - static_cast<size_t>(num_features);
    int previous = 0;
    while (tokens >> token) {
      const size_t colon = token.find(':');
      int index;
      double value;
      if (colon == std::string::npos || !absl::SimpleAtoi(token.substr(0, colon), &index) ||
          !absl::SimpleAtod(token.substr(colon + 1), &value)) {
        return error(absl::StrCat("expected index:value, got '", token.substr(0, 30), "'"));
      }
      if (index < 1 || index > num_features) {
        return error(absl::StrCat("feature index must be in [1, ", num_features, "], got ", index));
      }
      if (index <= previous) return error("feature indices must be increasing");
      if (!std::isfinite(value)) return error("feature values must be finite");
      previous = index;
      row[index - 1] = static_cast<float>(value);
    }
  }
  if (data.labels.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no examples"));
  return data;
}

}  // namespace dpkit::models::wide
