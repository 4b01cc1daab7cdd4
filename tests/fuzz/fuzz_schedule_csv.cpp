// Fuzz target: the custom schedule CSV reader (schedule::parse_csv) on arbitrary text; what it accepts
// must also survive writing it back (to_csv) and reading that again.
#include "fuzz_support.hpp"
#include "schedule/csv.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(ppctl::fuzz::text_of(data, size));
  ppctl::fuzz::expect_only_documented_errors([&] {
    const auto program = ppctl::schedule::parse_csv(text, "fuzz.csv");
    ppctl::schedule::parse_csv(ppctl::schedule::to_csv(program), "fuzz.csv (written back)");
  });
  return 0;
}
