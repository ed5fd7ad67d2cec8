// Project-local Status helpers: abseil 20220623 ships no RETURN_IF_ERROR / ASSIGN_OR_RETURN.
#ifndef FEDSCHED_COMMON_STATUS_MACROS_H_
#define FEDSCHED_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define FEDSCHED_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::absl::Status _fedsched_status = (expr);            \
    if (!_fedsched_status.ok()) return _fedsched_status; \
  } while (0)

#define FEDSCHED_STATUS_CONCAT_INNER_(a, b) a##b
#define FEDSCHED_STATUS_CONCAT_(a, b) FEDSCHED_STATUS_CONCAT_INNER_(a, b)

// `lhs` = value of `rexpr` (an absl::StatusOr<T>); returns its status from the enclosing
// function if not OK. `lhs` may be a declaration, e.g. `auto x` or `std::string s`.
#define FEDSCHED_ASSIGN_OR_RETURN(lhs, rexpr) \
  FEDSCHED_ASSIGN_OR_RETURN_IMPL_(FEDSCHED_STATUS_CONCAT_(_fedsched_or_, __LINE__), lhs, rexpr)

#define FEDSCHED_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                    \
  if (!tmp.ok()) return std::move(tmp).status();         \
  lhs = std::move(tmp).value()

#endif  // FEDSCHED_COMMON_STATUS_MACROS_H_
