// Two check macros: PPCTL_CHECK for user errors (with a hint), PPCTL_ASSERT for ppctl bugs.
#pragma once

#include <fmt/format.h>

#include "core/error.hpp"

/// Throws `ErrorType` with "MESSAGE (fix: HINT)" when `cond` is false. For bad user input only.
#define PPCTL_CHECK(cond, ErrorType, message, hint)                              \
  do {                                                                           \
    if (!(cond)) throw ErrorType(fmt::format("{} (fix: {})", (message), (hint))); \
  } while (0)

/// Throws ppctl::InternalError naming the file and line when `cond` is false: a broken invariant.
#define PPCTL_ASSERT(cond, message)                                                          \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw ::ppctl::InternalError(fmt::format("internal error at {}:{}: {} [{}]", __FILE__, \
                                               __LINE__, (message), #cond));                 \
  } while (0)
