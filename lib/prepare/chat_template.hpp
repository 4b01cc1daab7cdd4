// The chat template of the model being fine-tuned: found beside its tokenizer.json (tokenizer_config.json's
// `chat_template`, or chat_template.jinja) or named with --chat-template, and rendered over one conversation
// exactly as transformers' apply_chat_template renders it (through ppctl::jinja). No torch.
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include "jinja/template.hpp"

namespace ppctl::prepare {

/// A template's text and the variables transformers passes with the messages.
struct ChatTemplateSource {
  std::string text;    ///< the Jinja source
  std::string origin;  ///< what errors name: "PATH" (a .jinja file) or "PATH: chat_template" (a config)
  std::string path;    ///< the file it came from (absolute)
  /// The named special tokens of tokenizer_config.json (bos_token, eos_token, unk_token, sep_token,
  /// pad_token, cls_token, mask_token: strings, or AddedToken objects whose `content` is taken), as
  /// transformers' special_tokens_map passes them; those the file does not set are not passed.
  jinja::Json special_tokens = jinja::Json::object();
};

/// Finds the template. `chat_template` given: a .jinja file, a tokenizer_config.json, or a folder holding
/// one of them (chat_template.jinja first, as transformers 5 saves it). Else the folder of the tokenizer
/// (`tokenizer` is a tokenizer.json or its folder): chat_template.jinja, then tokenizer_config.json's
/// `chat_template`. A `chat_template` that is a list of {name, template} uses the one named "default".
/// The special tokens always come from the tokenizer_config.json beside the tokenizer (or the one given).
/// Throws prepare::PrepareError naming the file and the fix when none is found, the config is not JSON,
/// `chat_template` is not a string or a list holding "default", or a file cannot be read.
ChatTemplateSource find_chat_template(const std::string& tokenizer, const std::string& chat_template);

/// The date option of templates that print today's date (`strftime_now`): "YYYY-MM-DD" to the clock value
/// at local noon of that day (so formatting it in local time gives that date). "" = today. Throws
/// prepare::PrepareError naming --chat-date when it is not a real date in that form.
std::time_t chat_clock(const std::string& date);

/// The date of `clock` in local time as YYYY-MM-DD (what the sidecar records).
std::string chat_date_text(std::time_t clock);

/// A parsed template and its fixed context. The context of each render is: `messages`, `tools` and
/// `documents` (None, as transformers passes them), `add_generation_prompt`, the special tokens, then the
/// keys of `extra` (--chat-context; they may override `tools`, `documents` and the special tokens, as
/// apply_chat_template's keyword arguments do; `messages` and `add_generation_prompt` are refused).
class ChatTemplate {
 public:
  /// Parses the template. Throws prepare::PrepareError (the engine's message, naming the file and line)
  /// when it does not parse, and when `extra` is not an object or sets `messages` or
  /// `add_generation_prompt`.
  ChatTemplate(ChatTemplateSource source, jinja::Json extra, jinja::RenderOptions options);

  /// Renders messages[0, count) of `messages`, with `tools` (a conversation's own; null: the context's).
  /// Throws jinja::TemplateError (the template raised, or crossed a limit of `options`).
  jinja::Rendered render(const jinja::Json& messages, size_t count, bool add_generation_prompt,
                         const jinja::Json& tools = nullptr) const;

  /// True when the source holds `{% generation %}` blocks (transformers' test, the same regex).
  bool has_generation_blocks() const { return generation_; }
  const ChatTemplateSource& source() const { return source_; }

 private:
  ChatTemplateSource source_;
  jinja::Template template_;
  jinja::Json context_;
  jinja::RenderOptions options_;
  bool generation_ = false;
};

}  // namespace ppctl::prepare
