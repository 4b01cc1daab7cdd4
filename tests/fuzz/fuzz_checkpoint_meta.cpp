// Fuzz target: a checkpoint's meta.json (checkpoint::parse_checkpoint_meta) on arbitrary text; what it
// accepts must read back the same after writing it (checkpoint_meta_text).
#include <cstdlib>

#include "checkpoint/checkpoint_meta.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ppctl::fuzz::expect_only_documented_errors([&] {
    const auto meta = ppctl::checkpoint::parse_checkpoint_meta(ppctl::fuzz::text_of(data, size), "meta.json");
    const auto text = ppctl::checkpoint::checkpoint_meta_text(meta);
    if (ppctl::checkpoint::checkpoint_meta_text(ppctl::checkpoint::parse_checkpoint_meta(text, "meta.json")) != text) {
      std::abort();  // the written form does not read back to itself
    }
  });
  return 0;
}
