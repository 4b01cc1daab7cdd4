// Loss masks of chat data: which bytes of a rendered conversation the model must learn to generate (the
// mask rule), and which tokens of its tokenization that makes targets. No torch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prepare/chat_reader.hpp"
#include "prepare/chat_template.hpp"
#include "prepare/hf_tokenizer_json.hpp"

namespace ppctl::prepare {

/// The most assistant messages one conversation may hold where the mask rule places turns by prefix renders
/// (templates without `{% generation %}` blocks): one render per turn, each as long as the conversation up
/// to it, so the time grows with the square of the turns (about 1 s at this limit with short turns).
inline constexpr int64_t kMaxPlacedTurns = 1024;

/// Byte ranges [begin, end) of a rendered text, in order, not overlapping.
using TextSpans = std::vector<std::pair<size_t, size_t>>;

/// The target text of `conversation`, whose whole render (add_generation_prompt false) is `full`:
/// - a template with `{% generation %}` blocks: exactly their spans (full.generation), as transformers'
///   return_assistant_tokens_mask takes them;
/// - any other template, for each assistant message i: from the end of the generation prompt, i.e. the
///   length of render(messages[:i], add_generation_prompt=true) when the full render starts with it (else
///   from where the message's content is found in the render), through the content, to the end of the
///   first of `end_markers` (the tokenizer's special tokens) that follows the content with nothing but
///   white space between (the end-of-turn token the model must learn to stop with). The content is
///   looked for as written, then with white space stripped (templates that `trim`), after everything
///   matched before (the previous turns' content).
/// Throws prepare::PrepareError naming the template, the message and the fix (--train-on all) when a
/// turn's content or its end marker cannot be found, and (without generation blocks) when the
/// conversation holds more than kMaxPlacedTurns assistant messages. Throws jinja::TemplateError from prefix renders.
TextSpans assistant_spans(const ChatTemplate& chat, const Conversation& conversation,
                          const jinja::Rendered& full, const std::vector<std::string>& end_markers);

/// The bytes each id of a tokenizer.json stands for (the vocabulary through the byte-level alphabet;
/// added tokens by their content), to place tokens in the text they were made from.
class TokenBytes {
 public:
  explicit TokenBytes(const HfTokenizerSpec& spec);
  /// The special added tokens' contents (end-of-turn markers for assistant_spans).
  const std::vector<std::string>& special_tokens() const { return specials_; }

  /// Appends to `mask` one value per id of `ids`: 1 when the token's bytes overlap a span of `spans`,
  /// else 0 (a token across a span's edge is a target: transformers' char_to_token rule). `ids` must spell
  /// `text` byte for byte; throws prepare::PrepareError saying where they part (a normalizer changed the
  /// text, or bytes unknown to the vocabulary were dropped) with the fix (--train-on all).
  void mask(std::string_view text, const std::vector<int32_t>& ids, const TextSpans& spans,
            std::vector<int32_t>& mask) const;

 private:
  std::vector<std::string> bytes_;  ///< by id
  std::vector<std::string> specials_;
};

}  // namespace ppctl::prepare
