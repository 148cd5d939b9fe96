// Items of `dpkit reproduce all`: a published figure or table recomputed by dpkit.
//
// Each item returns its table (JSON and Markdown, with the paper's printed number beside
// dpkit's where the paper prints one, and the certified value beside every approximate
// one) and its figure; WriteItem writes them to DIR/<name>.{json,md,svg,csv} atomically,
// and IndexHtml lists them all. The numbers are checked by one Bazel test per item
// (tools/reproduce/*_test.cc), against the paper and against independent computations.
#ifndef DPKIT_TOOLS_REPRODUCE_ITEM_H_
#define DPKIT_TOOLS_REPRODUCE_ITEM_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "dpkit/tools/reproduce/figure.h"

namespace dpkit::tools::reproduce {

// A table as strings (Markdown) with its JSON rows beside it.
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // each as long as columns
  nlohmann::json json_rows = nlohmann::json::array();
};

// The Markdown form of a table ("| a | b |" lines).
std::string MarkdownTable(const Table& table);

struct ItemResult {
  Table table;
  std::string notes;  // Markdown paragraphs after the table: sources, labels, tolerances
  Figure figure;
  // Every number the paper prints agrees with dpkit's within the stated tolerance
  // (true when the item has no printed number to compare).
  bool agrees = true;
};

struct Item {
  const char* name;     // "bu-fig3": the file names in DIR
  const char* paper;    // "Bu, Dong, Long, Su 2020, Fig. 3"
  const char* look_at;  // one line for index.html: what the figure shows
  absl::StatusOr<ItemResult> (*run)();
};

// Every accounting-only item, in the order of index.html.
const std::vector<Item>& Items();

// The JSON document of one item: name, paper, look_at, agrees, columns, rows, notes.
nlohmann::json ItemJson(const Item& item, const ItemResult& result);

// Writes DIR/<name>.json, .md, .svg and .csv (each with base::WriteFileAtomically).
absl::Status WriteItem(const std::string& dir, const Item& item, const ItemResult& result);

// DIR/index.html: every item's figure, its line on what to look at, and links to its
// table and data (`agrees[i]` belongs to items[i]); then the table-only reproductions
// (name, summary), linked to DIR/<name>.md and .json.
std::string IndexHtml(const std::vector<const Item*>& items, const std::vector<bool>& agrees,
                      const std::vector<std::pair<std::string, std::string>>& tables);

// Number formatting shared by the items: fixed decimals, "-" for a missing value.
std::string Fixed(double value, int decimals);
// A value rounded up (a certified upper bound stays one when printed) or down.
std::string FixedUp(double value, int decimals);
std::string FixedDown(double value, int decimals);

}  // namespace dpkit::tools::reproduce

#endif  // DPKIT_TOOLS_REPRODUCE_ITEM_H_
