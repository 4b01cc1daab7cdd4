// Logging setup for launcher and workers.
#include "core/log.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace ppctl::core {

void setup_logging(std::optional<int> rank) {
  const std::string name = fmt::format("ppctl-{}", rank ? *rank : -1);
  spdlog::drop(name);
  auto logger = spdlog::stderr_color_mt(name);
  const std::string who = rank ? fmt::format("rank {}", *rank) : std::string("ppctl");
  logger->set_pattern(fmt::format("[%H:%M:%S.%e] [{}] %^%l%$: %v", who));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace ppctl::core
