// Fuzz target: the id-scan cache beside a token file (FILE.ppctl-ids.json, read by data::scan_ids).
// Input: the cache's text, in which the words MTIME and SOURCE are replaced with the token file's
// modification time and the source's description, so that the fuzzer can reach the path where the
// cache's key matches and its values are used.
#include <string>
#include <utility>

#include "data/check_data.hpp"
#include "data/flat_token_source.hpp"
#include "data/mapped_file.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string tokens = [] {
    const std::string path = ppctl::fuzz::scratch_dir() + "/train.bin";
    ppctl::fuzz::write_bytes(path, std::string("\x01\x00\x07\x00\x03\x00\x02\x00", 8));  // uint16 ids 1 7 3 2
    return path;
  }();
  static const ppctl::data::FlatTokenSource source(tokens, ppctl::config::TokenDType::Uint16);
  std::string text(ppctl::fuzz::text_of(data, size));
  static const std::pair<std::string, std::string> words[] = {
      {"MTIME", std::to_string(ppctl::data::MappedFile(tokens).mtime_ns())}, {"SOURCE", source.describe()}};
  for (const auto& [word, value] : words) {
    for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + value.size())) {
      text.replace(at, word.size(), value);
    }
  }
  ppctl::fuzz::write_bytes(tokens + ".ppctl-ids.json", text);
  ppctl::fuzz::expect_only_documented_errors([&] {
    const auto range = ppctl::data::scan_ids(source, tokens);
    if (range.tokens != 4) std::abort();  // a cache that does not fit the file must not be used
  });
  return 0;
}
