// Test-only checks shared by the end-to-end tests of the LibTorch trainers of models/wide
// (IMDb, MovieLens): read a run's metrics.jsonl and ledger.jsonl, and check that the ledger
// holds one Poisson-sampled Gaussian step per training step and that the reported epsilon is
// that of those steps, computed independently of the ledger file.
#ifndef DPKIT_MODELS_WIDE_TRAINER_TESTING_H_
#define DPKIT_MODELS_WIDE_TRAINER_TESTING_H_

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/rdp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dpkit::models::wide {

// The JSON objects of a .jsonl file, one per line.
inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// `ledger` has `steps` sample lines with rate q and one query {C, sigma C}, and the last
// metrics line's RDP epsilon equals that of DpSgdEvent(q, sigma, steps) computed here
// directly (improved conversion, the same orders): relative tolerance 1e-9, since both are
// the same certified RDP computation of the same event (the ledger path merges identical
// steps into SelfComposed, which RDP composes exactly by multiplication).
inline void ExpectLedgerAccounted(const std::vector<nlohmann::json>& ledger,
                                  const nlohmann::json& last_metrics, double q, double sigma,
                                  double clip_norm, double delta) {
  const int64_t steps = last_metrics.at("step").get<int64_t>();
  int64_t samples = 0;
  for (const nlohmann::json& line : ledger) {
    if (line.value("type", std::string()) != "sample") continue;
    ++samples;
    EXPECT_DOUBLE_EQ(line.at("sampling_rate").get<double>(), q);
    ASSERT_EQ(line.at("queries").size(), 1u);
    EXPECT_DOUBLE_EQ(line["queries"][0].at("clip_norm").get<double>(), clip_norm);
    EXPECT_NEAR(line["queries"][0].at("noise_stddev").get<double>(), sigma * clip_norm,
                1e-12 * sigma * clip_norm);
  }
  EXPECT_EQ(samples, steps);
  auto event = accounting::DpSgdEvent(q, sigma, steps);
  ASSERT_TRUE(event.ok());
  const std::vector<double> orders = accounting::DefaultRdpOrders();
  auto rdp = accounting::ComputeRdp(*event, orders);
  ASSERT_TRUE(rdp.ok());
  auto eps = accounting::RdpToEpsilonOptimal(orders, *rdp, delta);
  ASSERT_TRUE(eps.ok());
  EXPECT_DOUBLE_EQ(last_metrics.at("delta").get<double>(), delta);
  EXPECT_NEAR(last_metrics.at("epsilon").at("rdp").at("epsilon").get<double>(), eps->epsilon,
              1e-9 * eps->epsilon);
}

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_TRAINER_TESTING_H_
