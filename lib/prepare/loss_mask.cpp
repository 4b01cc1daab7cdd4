// The mask rule (assistant turns through their end-of-turn token) and spans to per-token masks.
#include "prepare/loss_mask.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/echo.hpp"
#include "prepare/byte_level_bpe.hpp"
#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {
namespace {

constexpr const char* kSpaces = " \t\r\n\f\v";

std::string_view trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpaces);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpaces) + 1 - b);
}

/// Where `content` (as written, or stripped: the first place either is found, the longer on a tie) is in
/// `text` at or after `from`: [begin, end), or npos.
std::pair<size_t, size_t> locate(std::string_view text, std::string_view content, size_t from) {
  std::pair<size_t, size_t> best{std::string_view::npos, std::string_view::npos};
  for (const std::string_view c : {content, trimmed(content)}) {
    const size_t at = text.find(c, from);
    if (at < best.first) best = {at, at + c.size()};
  }
  return best;
}

[[noreturn]] void cannot_mask(const ChatTemplate& chat, size_t i, const std::string& why) {
  throw PrepareError(fmt::format(
      "messages[{}] (assistant): the loss mask rule cannot place this turn in the render of the chat template "
      "{}: {} (fix: --train-on all trains on every token; or use a template with {{% generation %}} blocks "
      "around the assistant text)",
      i, core::echo_label(chat.source().origin), why));
}

}  // namespace

TextSpans assistant_spans(const ChatTemplate& chat, const Conversation& conversation,
                          const jinja::Rendered& full, const std::vector<std::string>& end_markers) {
  if (chat.has_generation_blocks()) {
    TextSpans spans = full.generation;
    std::sort(spans.begin(), spans.end());
    return spans;
  }
  if (conversation.assistant_turns > kMaxPlacedTurns) {
    throw PrepareError(fmt::format(
        "{} assistant messages in one conversation, above the limit of {} for a template without {{% generation "
        "%}} blocks (each turn is placed by rendering the conversation up to it: the time grows with the square "
        "of the turns) (fix: split the conversation into several lines, or --train-on all)",
        conversation.assistant_turns, kMaxPlacedTurns));
  }
  const std::string_view text = full.text;
  const jinja::Json& messages = conversation.messages;
  TextSpans spans;
  size_t cursor = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i]["role"].get_ref<const std::string&>();
    const std::string& content = messages[i]["content"].get_ref<const std::string&>();
    if (role == "user" || role == "tool") {  // step past it, so an answer is not matched inside a question
      // (system text is skipped: some templates move it next to the last user message)
      const auto [begin, end] = locate(text, content, cursor);
      if (begin != std::string_view::npos) cursor = end;
      continue;
    }
    if (role != "assistant") continue;
    // The start: the end of the generation prompt, when the render up to it is where the turn starts.
    const std::string prompt = chat.render(messages, i, true, conversation.tools).text;
    const bool prompt_first = prompt.size() >= cursor && text.substr(0, prompt.size()) == prompt;
    const auto [begin, end] = locate(text, content, prompt_first ? prompt.size() : cursor);
    if (begin == std::string_view::npos) {
      cannot_mask(chat, i, "its content is not in the rendered text (the template changes it)");
    }
    // The end: through the end-of-turn token that follows the content.
    const size_t marker = std::min(text.find_first_not_of(kSpaces, end), text.size());
    size_t marker_end = std::string_view::npos;
    for (const std::string& m : end_markers) {
      if (text.compare(marker, m.size(), m) == 0 && (marker_end == std::string_view::npos || marker + m.size() > marker_end)) {
        marker_end = marker + m.size();
      }
    }
    if (marker_end == std::string_view::npos) {
      cannot_mask(chat, i,
                  marker == text.size()
                      ? std::string("no special token of the tokenizer follows its content (the render ends there)")
                      : fmt::format("no special token of the tokenizer follows its content (the render goes on "
                                    "with \"{}\")",
                                    core::echo_value(std::string(text.substr(marker, 40)))));
    }
    spans.emplace_back(prompt_first ? prompt.size() : begin, marker_end);
    cursor = marker_end;
  }
  return spans;
}

TokenBytes::TokenBytes(const HfTokenizerSpec& spec) {
  int64_t max_id = -1;
  for (const auto& [token, id] : spec.model.vocab) max_id = std::max<int64_t>(max_id, id);
  for (const auto& t : spec.added_tokens) max_id = std::max<int64_t>(max_id, t.id);
  for (const int32_t id : spec.prefix_ids) max_id = std::max<int64_t>(max_id, id);
  for (const int32_t id : spec.suffix_ids) max_id = std::max<int64_t>(max_id, id);
  bytes_.resize(static_cast<size_t>(max_id + 1));
  std::string bytes;
  for (const auto& [token, id] : spec.model.vocab) {
    if (unicode_to_bytes(token, bytes)) bytes_[static_cast<size_t>(id)] = bytes;
  }
  for (const auto& t : spec.added_tokens) {
    bytes_[static_cast<size_t>(t.id)] = t.content;
    if (t.special) specials_.push_back(t.content);
  }
}

void TokenBytes::mask(std::string_view text, const std::vector<int32_t>& ids, const TextSpans& spans,
                      std::vector<int32_t>& mask) const {
  size_t at = 0;
  size_t span = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    const auto id = static_cast<size_t>(ids[k]);
    static const std::string kNone;
    const std::string& piece = id < bytes_.size() ? bytes_[id] : kNone;
    if (piece.empty() || text.compare(at, piece.size(), piece) != 0) {
      throw PrepareError(fmt::format(
          "token {} (id {}) does not spell the rendered text at byte {} ({}): the tokenizer changed the text "
          "(a normalizer, or bytes outside its vocabulary), so its tokens cannot be matched to the assistant "
          "turns (fix: --train-on all, or a tokenizer without a normalizer)",
          k, ids[k], at, core::echo_value(std::string(text.substr(at, 20)))));
    }
    const size_t end = at + piece.size();
    while (span < spans.size() && spans[span].second <= at) ++span;
    mask.push_back(span < spans.size() && spans[span].first < end ? 1 : 0);
    at = end;
  }
  if (at != text.size()) {
    throw PrepareError(fmt::format("the tokens spell {} of the rendered text's {} bytes (fix: --train-on all)", at,
                                   text.size()));
  }
}

}  // namespace ppctl::prepare
