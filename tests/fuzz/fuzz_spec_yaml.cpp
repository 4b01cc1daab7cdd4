// Fuzz target: the YAML job spec loader (config::parse_job_spec) on arbitrary text.
#include "config/load.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(ppctl::fuzz::text_of(data, size));
  // Relative data paths resolve against a folder that does not exist: no file is read or written.
  ppctl::fuzz::expect_only_documented_errors(
      [&] { ppctl::config::parse_job_spec(text, "fuzz.yaml", "/nonexistent-ppctl-fuzz"); });
  return 0;
}
