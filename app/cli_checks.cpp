// CLI11 validators shared by ppctl's commands (see cli_checks.hpp).
#include "cli_checks.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <system_error>

#include "core/echo.hpp"
#include "core/integer_text.hpp"

namespace ppctl::app {

CLI::Validator number_check(double min, bool strict, double max) {
  return CLI::Validator(
      [min, strict, max](std::string& text) -> std::string {
        // Plain decimal only: strtod alone also takes hexadecimal (`0x5` = 5), `inf`, and leading spaces.
        static const std::regex decimal(R"([+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?)");
        const bool is_decimal = std::regex_match(text, decimal);
        const double value = is_decimal ? std::strtod(text.c_str(), nullptr) : std::nan("");
        if (is_decimal && std::isinf(value)) {
          return fmt::format("value {}: out of range (fix: a number of at most {:g})", ppctl::core::echo_value(text),
                             max);
        }
        if (!std::isfinite(value)) {
          return fmt::format("value {}: must be a number written in decimal, e.g. 5, 0.25 or 1e-3",
                             ppctl::core::echo_value(text));
        }
        if (strict ? value <= min : value < min) {
          return fmt::format("{} must be {} {:g}", text, strict ? "greater than" : "at least", min);
        }
        if (value > max) return fmt::format("{} must be at most {:g}", text, max);
        return "";
      },
      fmt::format("NUMBER {} {:g}{}", strict ? ">" : ">=", min,
                  max < std::numeric_limits<double>::max() ? fmt::format(" and <= {:g}", max) : ""));
}

CLI::Validator integer_check(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        const std::string shown = ppctl::core::echo_value(text);
        if (!ppctl::core::is_plain_integer_text(text)) {
          // `010` and `+3` are meant as 10 and 3 (not octal 8): say so in the fix.
          const std::string digits = !text.empty() && text[0] == '+' ? text.substr(1) : text;
          int64_t meant = 0;
          const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), meant);
          const bool decimal = !digits.empty() && error == std::errc() && end == digits.data() + digits.size();
          return fmt::format("value {}: must be an integer written in plain decimal digits, without a '+' sign "
                             "or leading zeros (fix: {})",
                             shown, decimal ? fmt::format("write {}", meant)
                                            : fmt::format("write a whole number such as {}", lo));
        }
        const auto value = ppctl::core::parse_plain_integer(text);
        if (!value || *value < lo || *value > hi) {
          return fmt::format("value {}: must be in [{}, {}] (fix: use a value in that range)", shown, lo, hi);
        }
        return "";
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator writable_file_check(const std::string& example) {
  return CLI::Validator(
      [example](std::string& path) -> std::string {
        std::error_code ignored;
        if (path.empty()) return "the file name is empty";
        const std::string shown = core::echo_label(path);
        if (std::filesystem::is_directory(path, ignored) || path.back() == '/') {
          std::string inside = path;
          while (inside.size() > 1 && inside.back() == '/') inside.pop_back();
          return shown + " is a folder (fix: name a file, e.g. " + core::echo_label(inside + "/" + example) + ")";
        }
        const auto status = std::filesystem::symlink_status(path, ignored);
        if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status) &&
            !std::filesystem::is_symlink(status)) {
          return shown + " is a device, FIFO or socket, which writing the file would replace (fix: name a regular "
                 "file)";
        }
        const auto folder = std::filesystem::path(path).parent_path();
        if (!folder.empty() && !std::filesystem::is_directory(folder, ignored)) {
          return "folder " + core::echo_label(folder.string()) + " does not exist (fix: create it, or name a file "
                 "in a folder that exists)";
        }
        // The write itself comes after the work (a plan, a search): refuse a folder it cannot write now.
        const std::string where = folder.empty() ? std::string(".") : folder.string();
        if (::access(where.c_str(), W_OK | X_OK) != 0) {
          return "cannot write into folder " + core::echo_label(where) + ": " + std::strerror(errno) +
                 " (fix: name a file in a folder you may write)";
        }
        return "";
      },
      "FILE");
}

}  // namespace ppctl::app
