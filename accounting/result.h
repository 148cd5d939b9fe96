// Value-or-error type of the accounting core.
//
// accounting/ compiles to WebAssembly, where Abseil is unavailable, so the core
// reports errors with this small type instead of absl::StatusOr. Every validating
// factory and every computation that can fail returns Result<T>; the layers above
// (tools/, mechanisms/, optim/) translate an error into absl::InvalidArgumentError
// (absl::InvalidArgumentError(result.error())). Messages name the parameter and its
// allowed range: "noise_multiplier must be finite and > 0, got -1".
#ifndef DPKIT_ACCOUNTING_RESULT_H_
#define DPKIT_ACCOUNTING_RESULT_H_

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace dpkit::accounting {

// What kind of failure an Error is, for callers that react to one kind (the message is
// for the user). kGridLimit: the PLD accountant's privacy loss grid would exceed its
// limits (grid_points says how many points it would need; a coarser grid may fit).
enum class ErrorCode { kUnspecified, kGridLimit };

// The error half of a Result: a one-line message for the user, and its kind.
struct Error {
  std::string message;
  ErrorCode code = ErrorCode::kUnspecified;
  int64_t grid_points = 0;  // kGridLimit: the number of grid points needed
};

// Holds either a T or an Error. Invariant: exactly one of the two is present.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}    // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  // The error message; empty when ok().
  const std::string& error() const {
    static const std::string* const kEmpty = new std::string();
    return ok() ? *kEmpty : std::get<1>(state_).message;
  }
  // The whole error (message and kind); an empty kUnspecified one when ok().
  const Error& error_value() const {
    static const Error* const kNone = new Error();
    return ok() ? *kNone : std::get<1>(state_);
  }

 private:
  std::variant<T, Error> state_;
};

// Result of an operation that produces no value.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  const std::string& error() const { return error_.message; }
  const Error& error_value() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

inline Result<void> OkResult() { return Result<void>(); }

}  // namespace dpkit::accounting

// Returns the error of `expr` (a Result) from the enclosing function if it failed (its
// message and its kind).
#define DPKIT_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    const auto& dpkit_result_ = (expr);              \
    if (!dpkit_result_.ok()) {                       \
      return dpkit_result_.error_value();            \
    }                                                \
  } while (false)

#endif  // DPKIT_ACCOUNTING_RESULT_H_
