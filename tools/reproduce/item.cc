#include "dpkit/tools/reproduce/item.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/accounting/report_rounding.h"
#include "dpkit/base/files.h"

namespace dpkit::tools::reproduce {

using nlohmann::json;

std::string MarkdownTable(const Table& table) {
  auto line = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const std::string& cell : cells) absl::StrAppend(&out, " ", cell, " |");
    return out + "\n";
  };
  std::string md = line(table.columns);
  md += "|";
  for (size_t i = 0; i < table.columns.size(); ++i) md += "---|";
  md += "\n";
  for (const auto& row : table.rows) md += line(row);
  return md;
}

json ItemJson(const Item& item, const ItemResult& result) {
  return json{{"item", item.name},
              {"paper", item.paper},
              {"look_at", item.look_at},
              {"agrees", result.agrees},
              {"columns", result.table.columns},
              {"rows", result.table.json_rows},
              {"notes", result.notes},
              {"figure", {{"svg", absl::StrCat(item.name, ".svg")},
                          {"csv", absl::StrCat(item.name, ".csv")}}}};
}

absl::Status WriteItem(const std::string& dir, const Item& item, const ItemResult& result) {
  const std::string base = base::Join(dir, item.name);
  std::string md = absl::StrCat("# ", item.paper, "\n\n", item.look_at, "\n\n",
                                MarkdownTable(result.table), "\n", result.notes, "\n\n",
                                result.agrees ? "Every printed number agrees with dpkit's.\n"
                                              : "SOME PRINTED NUMBERS DISAGREE (see the table).\n",
                                "\n![", item.name, "](", item.name, ".svg)\n\nData: [",
                                item.name, ".csv](", item.name, ".csv)\n");
  if (absl::Status s = base::WriteFileAtomically(base + ".md", md); !s.ok()) return s;
  if (absl::Status s = base::WriteFileAtomically(base + ".json",
                                                 ItemJson(item, result).dump(2) + "\n");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = base::WriteFileAtomically(base + ".svg", FigureSvg(result.figure));
      !s.ok()) {
    return s;
  }
  return base::WriteFileAtomically(base + ".csv", FigureCsv(result.figure));
}

std::string IndexHtml(const std::vector<const Item*>& items, const std::vector<bool>& agrees,
                      const std::vector<std::pair<std::string, std::string>>& tables) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"
      "<title>dpkit reproduce all</title>\n<style>body{font-family:sans-serif;max-width:"
      "760px;margin:2em auto}figure{margin:0 0 2.5em}img{max-width:100%}"
      ".bad{color:#b00}</style></head>\n<body>\n<h1>dpkit reproduce all</h1>\n<p>Each "
      "figure is recomputed by dpkit from the paper's settings. Its table (Markdown and "
      "JSON) prints the paper's number beside dpkit's; approximations are labelled and "
      "drawn dashed, with the certified value beside them.</p>\n";
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = *items[i];
    const bool ok = i < agrees.size() && agrees[i];
    absl::StrAppendFormat(
        &html,
        "<figure id=\"%s\">\n<h2>%s <small>(%s)</small></h2>\n<p>%s</p>\n"
        "<img src=\"%s.svg\" alt=\"%s\">\n<figcaption>Table: <a href=\"%s.md\">Markdown</a>, "
        "<a href=\"%s.json\">JSON</a>; figure data: <a href=\"%s.csv\">CSV</a>. "
        "<span class=\"%s\">%s</span></figcaption>\n</figure>\n",
        item.name, EscapeXml(item.paper), item.name, EscapeXml(item.look_at), item.name,
        item.name, item.name, item.name, item.name, ok ? "" : "bad",
        ok ? "Agrees with the paper." : "Disagrees with the paper: see the table.");
  }
  if (!tables.empty()) {
    html += "<h2>Tables</h2>\n<ul>\n";
    for (const auto& [name, summary] : tables) {
      absl::StrAppendFormat(&html,
                            "<li>%s: <a href=\"%s.md\">Markdown</a>, <a href=\"%s.json\">JSON"
                            "</a> (the paper's value beside dpkit's in every cell)</li>\n",
                            EscapeXml(summary), name, name);
    }
    html += "</ul>\n";
  }
  html += "</body>\n</html>\n";
  return html;
}

std::string Fixed(double value, int decimals) {
  if (std::isnan(value)) return "-";
  return accounting::FormatFixed(value, decimals, accounting::Rounding::kNearest);
}
std::string FixedUp(double value, int decimals) {
  if (std::isnan(value)) return "-";
  return accounting::FormatFixed(value, decimals, accounting::Rounding::kUp);
}
std::string FixedDown(double value, int decimals) {
  if (std::isnan(value)) return "-";
  return accounting::FormatFixed(value, decimals, accounting::Rounding::kDown);
}

}  // namespace dpkit::tools::reproduce
