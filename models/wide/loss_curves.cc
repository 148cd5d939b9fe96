#include "dpkit/models/wide/loss_curves.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/models/files.h"

namespace dpkit::models::wide {

absl::Status WriteLossCsv(const std::string& path, const std::vector<LossCurve>& curves) {
  std::string text = "epoch";
  size_t epochs = 0;
  for (const LossCurve& c : curves) {
    absl::StrAppend(&text, ",", c.name);
    epochs = std::max(epochs, c.values.size());
  }
  text += "\n";
  for (size_t e = 0; e < epochs; ++e) {
    absl::StrAppend(&text, e + 1);
    for (const LossCurve& c : curves) {
      if (e < c.values.size()) {
        absl::StrAppend(&text, ",", absl::StrFormat("%.6g", c.values[e]));
      } else {
        text += ",";
      }
    }
    text += "\n";
  }
  return WriteFileAtomically(path, text);
}

absl::Status WriteLossSvg(const std::string& path, const std::string& title,
                          const std::vector<LossCurve>& curves) {
  const double width = 640, height = 400, left = 70, right = 20, top = 40, bottom = 50;
  double lo = INFINITY, hi = -INFINITY;
  size_t epochs = 1;
  for (const LossCurve& c : curves) {
    for (double v : c.values) {
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    epochs = std::max(epochs, c.values.size());
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi - lo < 1e-9) hi = lo + 1;
  const double pad = 0.05 * (hi - lo);
  lo -= pad;
  hi += pad;
  auto x = [&](double epoch) {
    return left + (epochs == 1 ? 0.5 : (epoch - 1) / static_cast<double>(epochs - 1)) *
                      (width - left - right);
  };
  auto y = [&](double v) { return top + (hi - v) / (hi - lo) * (height - top - bottom); };
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%g\" y=\"22\" font-size=\"15\">%s</text>\n",
      width, height, left, title);
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n"
                        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n",
                        left, height - bottom, width - right, height - bottom, left, top, left,
                        height - bottom);
  for (int t = 0; t <= 4; ++t) {
    const double v = lo + (hi - lo) * t / 4;
    absl::StrAppendFormat(&svg, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.3g</text>\n",
                          left - 6, y(v) + 4, v);
  }
  for (size_t e = 1; e <= epochs; e += std::max<size_t>(1, epochs / 10)) {
    absl::StrAppendFormat(&svg, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%d</text>\n",
                          x(static_cast<double>(e)), height - bottom + 18, e);
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">epoch</text>\n"
                        "<text x=\"16\" y=\"%g\" transform=\"rotate(-90 16 %g)\" "
                        "text-anchor=\"middle\">loss</text>\n",
                        (left + width - right) / 2, height - 12, (top + height - bottom) / 2,
                        (top + height - bottom) / 2);
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  for (size_t i = 0; i < curves.size(); ++i) {
    const char* color = colors[i % 6];
    std::string points;
    for (size_t e = 0; e < curves[i].values.size(); ++e) {
      if (!std::isfinite(curves[i].values[e])) continue;
      absl::StrAppendFormat(&points, "%.2f,%.2f ", x(static_cast<double>(e + 1)),
                            y(curves[i].values[e]));
    }
    absl::StrAppendFormat(&svg,
                          "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                          "points=\"%s\"/>\n<text x=\"%g\" y=\"%g\" fill=\"%s\">%s</text>\n",
                          color, points, width - right - 120, top + 16 + 16 * i, color,
                          curves[i].name);
  }
  svg += "</svg>\n";
  return WriteFileAtomically(path, svg);
}

}  // namespace dpkit::models::wide
