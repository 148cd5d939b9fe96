#include "dpkit/tools/reproduce/figure.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dpkit::tools::reproduce {
namespace {

// Plot area inside a 720 x 450 canvas; the legend sits in a corner of it.
constexpr double kWidth = 720, kHeight = 450;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 55;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                               "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

// The shortest decimal that reads back as the same double.
std::string Shortest(double value) {
  for (int precision = 1; precision <= 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, value);
    if (std::strtod(text.c_str(), nullptr) == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

struct Axis {
  bool log;
  double lo, hi;  // in plot units (log10 of the value on a log axis)
  double Map(double value) const { return log ? std::log10(value) : value; }
  double min_value = -INFINITY;  // values below are not drawn
  bool Valid(double value) const {
    return std::isfinite(value) && (!log || value > 0) && value >= min_value;
  }
};

// The range of the valid values of one coordinate over all series, padded when flat.
Axis MakeAxis(const Figure& figure, bool log, bool is_x) {
  Axis axis{log, INFINITY, -INFINITY};
  if (!is_x && !std::isnan(figure.y_min)) axis.min_value = figure.y_min;
  for (const Series& s : figure.series) {
    for (double v : is_x ? s.x : s.y) {
      if (!axis.Valid(v)) continue;
      axis.lo = std::min(axis.lo, axis.Map(v));
      axis.hi = std::max(axis.hi, axis.Map(v));
    }
  }
  if (!(axis.lo <= axis.hi)) axis.lo = 0, axis.hi = 1;
  if (axis.hi - axis.lo < 1e-12) axis.lo -= 0.5, axis.hi += 0.5;
  if (log) axis.lo = std::floor(axis.lo), axis.hi = std::ceil(axis.hi);
  return axis;
}

// About six "nice" ticks (1, 2 or 5 times a power of ten) on a linear axis; every power
// of ten (thinned to at most eight) on a log axis. Returns plot-unit positions.
std::vector<double> Ticks(const Axis& axis) {
  std::vector<double> ticks;
  if (axis.log) {
    const int span = static_cast<int>(axis.hi - axis.lo);
    const int step = std::max(1, (span + 7) / 8);
    for (int e = static_cast<int>(axis.lo); e <= axis.hi; e += step) ticks.push_back(e);
    return ticks;
  }
  const double raw = (axis.hi - axis.lo) / 6;
  const double power = std::pow(10, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  }
  // Integer multiples of the step (no accumulated rounding in the labels).
  for (double k = std::ceil(axis.lo / step - 1e-9); k * step <= axis.hi + 1e-9 * step; ++k) {
    ticks.push_back(k * step + 0.0);  // + 0.0: -0 prints as "-0"
  }
  return ticks;
}

std::string TickLabel(const Axis& axis, double t) {
  return axis.log ? absl::StrCat("1e", static_cast<int>(std::lround(t)))
                  : absl::StrFormat("%.6g", t);
}

}  // namespace

std::string EscapeXml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string FigureSvg(const Figure& figure) {
  const Axis x = MakeAxis(figure, figure.log_x, true);
  const Axis y = MakeAxis(figure, figure.log_y, false);
  const double w = kWidth - kLeft - kRight, h = kHeight - kTop - kBottom;
  auto px = [&](double v) { return kLeft + (x.Map(v) - x.lo) / (x.hi - x.lo) * w; };
  auto py = [&](double v) { return kTop + h - (y.Map(v) - y.lo) / (y.hi - y.lo) * h; };
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g "
      "%g\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" "
      "height=\"100%%\" fill=\"white\"/>\n<text x=\"%g\" y=\"22\" text-anchor=\"middle\" "
      "font-size=\"14\">%s</text>\n",
      kWidth, kHeight, kWidth, kHeight, kWidth / 2, EscapeXml(figure.title));
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
                        "stroke=\"black\"/>\n",
                        kLeft, kTop, w, h);
  for (double t : Ticks(x)) {
    const double p = kLeft + (t - x.lo) / (x.hi - x.lo) * w;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" stroke=\"#ddd\"/>"
                          "<text x=\"%.2f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                          p, kTop, p, kTop + h, p, kTop + h + 16, TickLabel(x, t));
  }
  for (double t : Ticks(y)) {
    const double p = kTop + h - (t - y.lo) / (y.hi - y.lo) * h;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%g\" y1=\"%.2f\" x2=\"%g\" y2=\"%.2f\" stroke=\"#ddd\"/>"
                          "<text x=\"%g\" y=\"%.2f\" text-anchor=\"end\">%s</text>\n",
                          kLeft, p, kLeft + w, p, kLeft - 6, p + 4, TickLabel(y, t));
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s</text>\n<text "
                        "transform=\"translate(16 %g) rotate(-90)\" "
                        "text-anchor=\"middle\">%s</text>\n",
                        kLeft + w / 2, kHeight - 14, EscapeXml(figure.x_label), kTop + h / 2,
                        EscapeXml(figure.y_label));
  for (size_t i = 0; i < figure.series.size(); ++i) {
    const Series& s = figure.series[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string points;
    for (size_t j = 0; j < s.x.size() && j < s.y.size(); ++j) {
      if (!x.Valid(s.x[j]) || !y.Valid(s.y[j])) continue;
      absl::StrAppendFormat(&points, "%s%.2f,%.2f", points.empty() ? "" : " ", px(s.x[j]),
                            py(s.y[j]));
      if (s.markers) {
        absl::StrAppendFormat(&svg, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n",
                              px(s.x[j]), py(s.y[j]), color);
      }
    }
    if (!s.markers || s.x.size() > 1) {
      absl::StrAppendFormat(&svg,
                            "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s "
                            "points=\"%s\"/>\n",
                            color, s.dashed ? " stroke-dasharray=\"6 4\"" : "", points);
    }
  }
  // The legend, on a white box so that curves under it stay readable around it.
  const double n = static_cast<double>(figure.series.size());
  const double box_x = figure.legend == LegendCorner::kTopRight ? kLeft + w - 258 : kLeft + 8;
  const double box_y =
      figure.legend == LegendCorner::kBottomLeft ? kTop + h - 8 - 16 * n - 6 : kTop + 6;
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%g\" y=\"%g\" width=\"250\" height=\"%g\" fill=\"white\" "
                        "fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n",
                        box_x, box_y, 16 * n + 6);
  for (size_t i = 0; i < figure.series.size(); ++i) {
    const Series& s = figure.series[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    const double ly = box_y + 16 + 16 * static_cast<double>(i);
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" "
                          "stroke-width=\"2\"%s/><text x=\"%g\" y=\"%g\">%s</text>\n",
                          box_x + 6, ly - 4, box_x + 30, ly - 4, color,
                          s.dashed ? " stroke-dasharray=\"6 4\"" : "", box_x + 36, ly,
                          EscapeXml(s.name));
  }
  svg += "</svg>\n";
  return svg;
}

std::string FigureCsv(const Figure& figure) {
  std::string csv = "series,x,y\n";
  for (const Series& s : figure.series) {
    std::string name = s.name;
    std::replace(name.begin(), name.end(), '"', '\'');
    for (size_t j = 0; j < s.x.size() && j < s.y.size(); ++j) {
      absl::StrAppend(&csv, "\"", name, "\",", Shortest(s.x[j]), ",", Shortest(s.y[j]), "\n");
    }
  }
  return csv;
}

}  // namespace dpkit::tools::reproduce
