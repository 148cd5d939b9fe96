#include "models/training_ledger.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "accounting/gdp.h"
#include "accounting/rdp.h"

namespace dpkit::models {
namespace {

absl::Status FromResult(const std::string& what, const std::string& error) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", error));
}

// Collapsed noise multiplier of several sum queries on one sample (McMahan et al. 2018,
// eq. (1)): z = (sum_g (C_g / s_g)^2)^(-1/2).
absl::StatusOr<double> Collapse(const std::vector<LedgerQuery>& queries) {
  double sum = 0;
  for (const LedgerQuery& q : queries) {
    if (!(q.clip_norm > 0 && std::isfinite(q.clip_norm)) ||
        !(q.noise_stddev > 0 && std::isfinite(q.noise_stddev))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "clip_norm and noise_stddev must be finite and > 0, got ", q.clip_norm, ", ",
          q.noise_stddev));
    }
    double r = q.clip_norm / q.noise_stddev;
    sum += r * r;
  }
  if (queries.empty()) return absl::InvalidArgumentError("a sample line needs queries");
  return 1.0 / std::sqrt(sum);
}

}  // namespace

absl::StatusOr<TrainingLedger> TrainingLedger::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot open ledger ", path, ": ", std::strerror(errno)));
  }
  return TrainingLedger(fd);
}

TrainingLedger::TrainingLedger(TrainingLedger&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}
TrainingLedger& TrainingLedger::operator=(TrainingLedger&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}
TrainingLedger::~TrainingLedger() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status TrainingLedger::AppendLine(const std::string& line) {
  std::string data = line + "\n";
  ssize_t written = ::write(fd_, data.data(), data.size());
  if (written != static_cast<ssize_t>(data.size()) || ::fsync(fd_) != 0) {
    return absl::InternalError(absl::StrCat("ledger write failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status TrainingLedger::AppendStep(int64_t step, double sampling_rate,
                                        const std::vector<LedgerQuery>& queries) {
  nlohmann::json line = {{"type", "sample"}, {"step", step}, {"sampling_rate", sampling_rate}};
  nlohmann::json qs = nlohmann::json::array();
  for (const LedgerQuery& q : queries) {
    qs.push_back({{"clip_norm", q.clip_norm}, {"noise_stddev", q.noise_stddev}});
  }
  line["queries"] = qs;
  return AppendLine(line.dump());
}

absl::Status TrainingLedger::AppendEvent(const accounting::Event& event) {
  return AppendLine(nlohmann::json{{"type", "event"}, {"event", event.ToJson()}}.dump());
}

absl::StatusOr<accounting::Event> LedgerFileToEvent(const std::string& path, int64_t* steps) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ledger ", path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // A crash mid-append leaves a last line without its newline: ignore it.
  bool complete_last = true;
  {
    std::ifstream raw(path, std::ios::binary | std::ios::ate);
    std::streamoff size = raw.tellg();
    if (size > 0) {
      raw.seekg(size - 1);
      complete_last = raw.get() == '\n';
    }
  }
  if (!complete_last && !lines.empty()) lines.pop_back();

  std::vector<accounting::Event> parts;
  double run_q = 0, run_z = 0;
  int64_t run_count = 0;
  *steps = 0;
  auto flush = [&]() -> absl::Status {
    if (run_count == 0) return absl::OkStatus();
    auto e = accounting::DpSgdEvent(run_q, run_z, run_count);
    if (!e.ok()) return FromResult("ledger", e.error());
    parts.push_back(*e);
    run_count = 0;
    return absl::OkStatus();
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string where = absl::StrCat(path, " line ", i + 1);
    if (lines[i].empty()) continue;
    nlohmann::json j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not a ledger line"));
    }
    if (j["type"] == "sample") {
      if (!j.contains("sampling_rate") || !j["sampling_rate"].is_number() ||
          !j.contains("queries") || !j["queries"].is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": sample lines need sampling_rate and queries"));
      }
      std::vector<LedgerQuery> queries;
      for (const auto& q : j["queries"]) {
        if (!q.is_object() || !q.contains("clip_norm") || !q["clip_norm"].is_number() ||
            !q.contains("noise_stddev") || !q["noise_stddev"].is_number()) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": queries need clip_norm and noise_stddev"));
        }
        queries.push_back({q["clip_norm"].get<double>(), q["noise_stddev"].get<double>()});
      }
      absl::StatusOr<double> z = Collapse(queries);
      if (!z.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", z.status().message()));
      double q = j["sampling_rate"].get<double>();
      if (!(q > 0 && q <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": sampling_rate must be in (0, 1], got ", q));
      }
      if (run_count > 0 && (q != run_q || *z != run_z)) {
        absl::Status s = flush();
        if (!s.ok()) return s;
      }
      run_q = q;
      run_z = *z;
      ++run_count;
      ++*steps;
    } else if (j["type"] == "event") {
      absl::Status s = flush();
      if (!s.ok()) return s;
      if (!j.contains("event")) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": event line without event"));
      }
      auto e = accounting::Event::FromJson(j["event"]);
      if (!e.ok()) return FromResult(where, e.error());
      parts.push_back(*e);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown type '", j["type"].get<std::string>(), "'"));
    }
  }
  absl::Status s = flush();
  if (!s.ok()) return s;
  if (parts.empty()) return absl::NotFoundError("empty ledger");
  if (parts.size() == 1) return parts[0];
  auto composed = accounting::Event::Composed(parts);
  if (!composed.ok()) return FromResult("ledger", composed.error());
  return *composed;
}

absl::StatusOr<nlohmann::json> LedgerEpsilon(const std::string& path, double delta,
                                             double* epsilon_upper) {
  int64_t steps = 0;
  absl::StatusOr<accounting::Event> event = LedgerFileToEvent(path, &steps);
  if (absl::IsNotFound(event.status()) && event.status().message() == "empty ledger") {
    *epsilon_upper = 0;
    return nlohmann::json{{"rdp", {{"epsilon", 0.0}, {"order", nullptr}, {"conversion", "improved"}}}};
  }
  if (!event.ok()) return event.status();
  std::vector<double> orders = accounting::DefaultRdpOrders();
  auto rdp = accounting::ComputeRdp(*event, orders);
  if (!rdp.ok()) return FromResult("rdp", rdp.error());
  auto eps = accounting::RdpToEpsilon(orders, *rdp, delta, accounting::RdpConversion::kImproved);
  if (!eps.ok()) return FromResult("rdp", eps.error());
  *epsilon_upper = eps->epsilon;
  nlohmann::json out;
  out["rdp"] = {{"epsilon", eps->epsilon}, {"order", eps->order}, {"conversion", "improved"}};
  // mu_CLT only for one homogeneous DP-SGD run (Bu et al. 2020, eq. (3.1)).
  const accounting::Event& e = *event;
  if (e.kind() == accounting::EventKind::kSelfComposed &&
      e.inner().kind() == accounting::EventKind::kPoissonSampled &&
      e.inner().inner().kind() == accounting::EventKind::kGaussian) {
    auto mu = accounting::CltMu(e.inner().sampling_rate(), e.inner().inner().noise_multiplier(),
                                e.count());
    if (mu.ok()) {
      auto gdp_eps = accounting::GdpEpsilon(*mu, delta);
      if (gdp_eps.ok()) {
        out["gdp"] = {{"mu", *mu}, {"epsilon", *gdp_eps}, {"approximate", true}};
      }
    }
  }
  return out;
}

absl::StatusOr<double> CalibrateNoiseMultiplierRdp(double target_epsilon, double delta,
                                                   double sampling_rate, int64_t steps) {
  if (!(std::isfinite(target_epsilon) && target_epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target_epsilon must be finite and > 0, got ", target_epsilon));
  }
  std::vector<double> orders = accounting::DefaultRdpOrders();
  auto epsilon_at = [&](double sigma) -> absl::StatusOr<double> {
    auto event = accounting::DpSgdEvent(sampling_rate, sigma, steps);
    if (!event.ok()) return FromResult("calibration", event.error());
    auto rdp = accounting::ComputeRdp(*event, orders);
    if (!rdp.ok()) return FromResult("calibration", rdp.error());
    auto eps = accounting::RdpToEpsilon(orders, *rdp, delta, accounting::RdpConversion::kImproved);
    if (!eps.ok()) return FromResult("calibration", eps.error());
    return eps->epsilon;
  };
  double lo = 0.05, hi = 1.0;
  for (int i = 0;; ++i) {
    absl::StatusOr<double> e = epsilon_at(hi);
    if (!e.ok()) return e.status();
    if (*e <= target_epsilon) break;
    lo = hi;
    hi *= 2;
    if (i > 20) {
      return absl::OutOfRangeError(absl::StrCat("no noise multiplier up to ", hi,
                                                " reaches target_epsilon ", target_epsilon));
    }
  }
  // Invariant: epsilon(hi) <= target. epsilon decreases in sigma.
  for (int i = 0; i < 40 && hi - lo > 1e-4 * hi; ++i) {
    double mid = 0.5 * (lo + hi);
    absl::StatusOr<double> e = epsilon_at(mid);
    if (!e.ok()) return e.status();
    (*e <= target_epsilon ? hi : lo) = mid;
  }
  absl::StatusOr<double> check = epsilon_at(hi);  // re-verification of the returned sigma
  if (!check.ok()) return check.status();
  if (!(*check <= target_epsilon)) {
    return absl::InternalError("calibrated noise multiplier failed re-verification");
  }
  return hi;
}

}  // namespace dpkit::models
