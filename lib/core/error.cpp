// Error types: message assembly for ConfigError.
#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ppctl {

ConfigError::ConfigError(std::vector<std::string> problems)
    : Error(fmt::format("{}", fmt::join(problems, "\n"))), problems_(std::move(problems)) {}

}  // namespace ppctl
