// Fuzz target: the Hugging Face tokenizer.json reader and the byte-level BPE tokenizer it builds
// (prepare::parse_hf_tokenizer_json, prepare::HfBpeTokenizer). Input: the file's text. What loads must
// encode a fixed multilingual text, and the input itself, into ids below its vocab_size.
#include <cstdlib>
#include <vector>

#include "fuzz_support.hpp"
#include "prepare/hf_bpe_tokenizer.hpp"

namespace {

constexpr const char* kSample =
    "Hello  world!\n\n I'm 12345 <|endoftext|> 日本語 مرحبا नमस्ते 🙂 e\xcc\x81 def f(x):\n\treturn x ";

void check_ids(const std::vector<int32_t>& ids, int64_t vocab_size) {
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size) std::abort();  // an id outside the vocabulary it reports
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto text = ppctl::fuzz::text_of(data, size);
  ppctl::fuzz::expect_only_documented_errors([&] {
    const ppctl::prepare::HfBpeTokenizer tokenizer(
        ppctl::prepare::parse_hf_tokenizer_json(text, ppctl::fuzz::scratch_dir() + "/tokenizer.json"));
    std::vector<int32_t> ids;
    tokenizer.encode(kSample, ids);
    check_ids(ids, tokenizer.vocab_size());
    ids.clear();
    tokenizer.encode(text, ids);  // not UTF-8: a documented PrepareError
    check_ids(ids, tokenizer.vocab_size());
  });
  return 0;
}
