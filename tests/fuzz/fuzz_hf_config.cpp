// Fuzz target: a Hugging Face config.json (config::parse_hf_model_config) and model.init_from merging it
// into a job spec (config::parse_job_spec over a folder holding it). Input: the file's text. A spec that
// loads must export (config::hf_config_json) a config.json that loads into a spec exporting the same text.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "config/hf_config.hpp"
#include "config/load.hpp"
#include "fuzz_support.hpp"

namespace {

/// The job spec of a run from the folder DIR/NAME (which holds config.json).
ppctl::config::JobSpec spec_from(const std::string& dir, const std::string& name) {
  return ppctl::config::parse_job_spec("model:\n  init_from: " + name + "\ndata: {path: corpus.txt}\n", "fuzz.yaml",
                                       dir);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto text = ppctl::fuzz::text_of(data, size);
  ppctl::fuzz::expect_only_documented_errors([&] { ppctl::config::parse_hf_model_config(text, "config.json"); });
  static const bool made = [] {
    std::filesystem::create_directories(ppctl::fuzz::scratch_dir() + "/hf");
    std::filesystem::create_directories(ppctl::fuzz::scratch_dir() + "/back");
    return true;
  }();
  (void)made;
  const std::string& dir = ppctl::fuzz::scratch_dir();
  ppctl::fuzz::write_bytes(dir + "/hf/config.json", text);
  ppctl::fuzz::expect_only_documented_errors([&] {
    const std::string once = ppctl::config::hf_config_json(spec_from(dir, "hf").model);
    ppctl::fuzz::write_bytes(dir + "/back/config.json", once);
    if (ppctl::config::hf_config_json(spec_from(dir, "back").model) != once) {
      std::abort();  // the exported config.json does not load back into the same model
    }
  });
  return 0;
}
