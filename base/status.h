// Status plumbing for the Abseil layers (tools/, mechanisms/, optim/, models/).
//
// The accounting core (accounting/) compiles to WebAssembly, where Abseil is not
// available, so it reports failures as accounting::Result<T> holding an accounting::Error:
// a one-line message that names the parameter and its range. This header is the ONE place
// where such an error becomes an absl::Status, with ONE mapping:
//
//   accounting::Error  ->  absl::StatusCode::kInvalidArgument
//
// Every error the core returns is a property of its input: a value outside a factory's
// range, an event an accountant does not cover, a bound that does not exist (or cannot be
// computed in double precision) for these parameters. The `dpkit` command line turns
// kInvalidArgument into exit code 2 with the message as its one line (tools/command.h).
// A layer that knows more about a failure of its own (an unwritable file, a broken
// invariant) builds its own absl::Status; it does not re-map core errors case by case.
//
// Macros, for functions returning absl::Status or absl::StatusOr<T>; `expr` may be an
// absl::Status, an absl::StatusOr<T> or an accounting::Result<T>:
//   RETURN_IF_ERROR(expr);             returns the error of `expr`, if any
//   ASSIGN_OR_RETURN(lhs, expr);       `lhs` = the value of `expr`, or returns its error
// `lhs` may declare a variable (ASSIGN_OR_RETURN(double eps, Compute());) or name one.
#ifndef DPKIT_BASE_STATUS_H_
#define DPKIT_BASE_STATUS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dpkit/accounting/result.h"

namespace dpkit::base {

// The mapping above.
inline absl::Status ToStatus(const accounting::Error& error) {
  return absl::InvalidArgumentError(error.message);
}

template <typename T>
absl::Status ToStatus(const accounting::Result<T>& result) {
  if (result.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(result.error());
}

inline absl::Status ToStatus(const absl::Status& status) { return status; }

template <typename T>
absl::Status ToStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// The same error with "context: " before its message (the code is kept); OK stays OK.
inline absl::Status WithContext(const absl::Status& status, const std::string& context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

// The value of an ok StatusOr / Result (moved out); used by ASSIGN_OR_RETURN.
template <typename T>
T&& ValueOf(absl::StatusOr<T>&& status_or) {
  return *std::move(status_or);
}
template <typename T>
T&& ValueOf(accounting::Result<T>&& result) {
  return std::move(result).value();
}

}  // namespace dpkit::base

#define DPKIT_STATUS_CONCAT_INNER_(a, b) a##b
#define DPKIT_STATUS_CONCAT_(a, b) DPKIT_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                                                   \
  do {                                                                          \
    ::absl::Status dpkit_status_ = ::dpkit::base::ToStatus((expr));             \
    if (!dpkit_status_.ok()) return dpkit_status_;                              \
  } while (false)

#define DPKIT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)                           \
  auto tmp = (expr);                                                            \
  if (!tmp.ok()) return ::dpkit::base::ToStatus(tmp);                           \
  lhs = ::dpkit::base::ValueOf(std::move(tmp))

#define ASSIGN_OR_RETURN(lhs, expr) \
  DPKIT_ASSIGN_OR_RETURN_IMPL_(DPKIT_STATUS_CONCAT_(dpkit_or_, __LINE__), lhs, expr)

#endif  // DPKIT_BASE_STATUS_H_
