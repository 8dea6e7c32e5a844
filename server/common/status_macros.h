// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status (Debian's Abseil 20220623 has none).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GS_CONCAT_INNER(a, b) a##b
#define GS_CONCAT(a, b) GS_CONCAT_INNER(a, b)

#define GS_RETURN_IF_ERROR(expr)            \
  do {                                      \
    const absl::Status gs_status_ = (expr); \
    if (!gs_status_.ok()) return gs_status_; \
  } while (0)

#define GS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define GS_ASSIGN_OR_RETURN(lhs, expr) \
  GS_ASSIGN_OR_RETURN_IMPL(GS_CONCAT(gs_statusor_, __LINE__), lhs, expr)
