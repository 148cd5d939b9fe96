#include "dpkit/base/status.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/accounting/result.h"
#include "gtest/gtest.h"

namespace dpkit::base {
namespace {

accounting::Result<double> CoreHalf(double x) {
  if (x < 0) return accounting::Error{"x must be >= 0, got -1"};
  return x / 2;
}

absl::StatusOr<double> LayerHalf(double x) { return x / 2; }

absl::StatusOr<double> Quarter(double x) {
  ASSIGN_OR_RETURN(const double half, CoreHalf(x));
  ASSIGN_OR_RETURN(double quarter, LayerHalf(half));
  return quarter;
}

absl::Status Check(double x) {
  RETURN_IF_ERROR(CoreHalf(x));
  RETURN_IF_ERROR(absl::OkStatus());
  return absl::OkStatus();
}

TEST(StatusTest, AccountingErrorsAreInvalidArgumentWithTheirMessage) {
  absl::Status status = ToStatus(accounting::Error{"delta must be in (0, 1), got 2"});
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(), "delta must be in (0, 1), got 2");
  EXPECT_TRUE(ToStatus(CoreHalf(1)).ok());
}

TEST(StatusTest, AssignOrReturnPassesValuesAndErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  absl::StatusOr<double> bad = Quarter(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_EQ(bad.status().message(), "x must be >= 0, got -1");
}

TEST(StatusTest, ReturnIfErrorReturnsTheFirstError) {
  EXPECT_TRUE(Check(1).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(Check(-1)));
}

TEST(StatusTest, WithContextKeepsTheCode) {
  absl::Status status = WithContext(absl::NotFoundError("no such file"), "ledger.jsonl");
  EXPECT_TRUE(absl::IsNotFound(status));
  EXPECT_EQ(status.message(), "ledger.jsonl: no such file");
  EXPECT_TRUE(WithContext(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace dpkit::base
