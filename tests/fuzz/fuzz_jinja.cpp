// Fuzz target: the chat-template engine (jinja::Template). Input: a template's text, parsed and rendered with
// small limits over a fixed conversation; only TemplateError (a ppctl::Error) may come out.
#include "fuzz_support.hpp"
#include "jinja/template.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ppctl::jinja::Json;
  static const Json context = Json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Hi \u00e9\ud83d\ude00 \"q\"\nline"},
                 {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello", "tool_calls": null},
                 {"role": "user", "content": ["a", {"type": "text", "text": "b"}]}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false,
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "documents": null})");
  ppctl::jinja::Limits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_steps = 20000;
  limits.max_depth = 60;
  ppctl::jinja::RenderOptions options;
  options.limits = limits;
  options.now = 1752148800;
  ppctl::fuzz::expect_only_documented_errors([&] {
    const ppctl::jinja::Template t(ppctl::fuzz::text_of(data, size), "fuzz.jinja", limits);
    t.render(context, options);
  });
  return 0;
}
