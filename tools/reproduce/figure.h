// Line figures of `dpkit reproduce all`: one value type, written as a standalone SVG
// and as the CSV behind it (so a reader can redraw it with any tool).
#ifndef DPKIT_TOOLS_REPRODUCE_FIGURE_H_
#define DPKIT_TOOLS_REPRODUCE_FIGURE_H_

#include <limits>
#include <string>
#include <vector>

namespace dpkit::tools::reproduce {

struct Series {
  std::string name;  // legend text; says "approximate" where the curve is not a bound
  std::vector<double> x, y;  // same length; non-finite points are skipped
  bool dashed = false;       // approximations are drawn dashed
  bool markers = false;      // points instead of (or as well as) a line
};

enum class LegendCorner { kTopRight, kTopLeft, kBottomLeft };

struct Figure {
  std::string title;
  std::string x_label, y_label;
  bool log_x = false, log_y = false;  // base-10 axes (non-positive values are skipped)
  std::vector<Series> series;
  // Lower limit of the y axis (NaN: from the data); points below it are not drawn.
  double y_min = std::numeric_limits<double>::quiet_NaN();
  LegendCorner legend = LegendCorner::kTopRight;
};

// A self-contained SVG (no scripts, no external fonts): axes with ticks, one polyline per
// series, a legend. Deterministic: the same figure gives the same bytes.
std::string FigureSvg(const Figure& figure);

// "series,x,y" rows with a header line; values in shortest round-trip form.
std::string FigureCsv(const Figure& figure);

// `text` with &, <, >, " escaped for XML/HTML.
std::string EscapeXml(const std::string& text);

}  // namespace dpkit::tools::reproduce

#endif  // DPKIT_TOOLS_REPRODUCE_FIGURE_H_
