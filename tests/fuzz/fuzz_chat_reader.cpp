// Fuzz target: the chat JSONL line reader of `ppctl data prepare --input-format chat`
// (prepare::parse_conversation). Input: one line's text. What it accepts must be a non-empty list of
// messages with a known string role and a string content, and its count of assistant turns must be right.
#include <cstdlib>
#include <string>

#include "fuzz_support.hpp"
#include "prepare/chat_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto text = ppctl::fuzz::text_of(data, size);
  ppctl::fuzz::expect_only_documented_errors([&] {
    const auto c = ppctl::prepare::parse_conversation(text, "fuzz.jsonl", 7);
    if (c.line != 7 || !c.messages.is_array() || c.messages.empty()) std::abort();
    int64_t assistant = 0;
    for (const auto& m : c.messages) {
      if (!m.is_object() || !m["role"].is_string() || !m["content"].is_string()) std::abort();
      const std::string& role = m["role"].get_ref<const std::string&>();
      if (role != "system" && role != "user" && role != "assistant" && role != "tool") std::abort();
      assistant += role == "assistant";
    }
    if (assistant != c.assistant_turns) std::abort();
  });
  return 0;
}
