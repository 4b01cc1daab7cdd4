// Fuzz target support: what counts as a finding. A parser may refuse input only with ppctl::Error (the
// documented, user-facing errors); any other exception, a crash or a sanitizer report is a finding.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace ppctl::fuzz {

/// Runs `parse`; returns normally when it succeeds or throws ppctl::Error. Any other exception
/// (ppctl::InternalError, std::out_of_range, ...) is printed and aborts, which libFuzzer reports.
template <typename F>
void expect_only_documented_errors(F&& parse) {
  try {
    parse();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: undocumented exception: %s\n", e.what());
    std::abort();
  }
}

inline std::string_view text_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ppctl::fuzz

namespace ppctl::fuzz {

/// A folder made once per fuzzing process (mkdtemp under $TMPDIR or /tmp) and removed at exit, for
/// targets whose reader takes files.
const std::string& scratch_dir();

/// Writes `bytes` to `path` (replacing it); aborts when it cannot (a broken harness, not a finding).
void write_bytes(const std::string& path, std::string_view bytes);

}  // namespace ppctl::fuzz
