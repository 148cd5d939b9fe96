#include <Eigen/Dense>
#include <boost/math/distributions/normal.hpp>
#include <nlohmann/json.hpp>
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
TEST(Smoke, Works) {
  Eigen::VectorXd v(2); v << 1, 2;
  boost::math::normal n;
  nlohmann::json j = {{"a", 1}};
  absl::StatusOr<int> s = absl::InvalidArgumentError(absl::StrCat("x", 1));
  EXPECT_FALSE(s.ok());
  EXPECT_NEAR(boost::math::cdf(n, 0.0), 0.5, 1e-15);
  EXPECT_EQ(v.sum(), 3);
}
