// Added and special tokens: leftmost-longest matching with lstrip and rstrip.
#include "prepare/added_tokens.hpp"

#include <algorithm>
#include <string>
#include <unordered_set>

namespace ppctl::prepare {
namespace {

/// Unicode White_Space (Rust's char::is_whitespace, which tokenizers' lstrip and rstrip use).
bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

/// The code point of the valid UTF-8 character starting at text[i], and its length.
uint32_t decode(std::string_view text, size_t i, size_t& len) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(text[i + k])); };
  const uint32_t lead = b(0);
  if (lead < 0x80) return len = 1, lead;
  if (lead < 0xE0) return len = 2, ((lead & 0x1F) << 6) | (b(1) & 0x3F);
  if (lead < 0xF0) return len = 3, ((lead & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return len = 4, ((lead & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<HfAddedToken> tokens) {
  std::unordered_set<std::string> seen;
  for (auto& t : tokens) {
    if (seen.insert(t.content).second) tokens_.push_back(std::move(t));
  }
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const HfAddedToken& a, const HfAddedToken& b) { return a.content.size() > b.content.size(); });
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    by_first_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextPiece>& out) const {
  size_t piece_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const auto& candidates = by_first_[static_cast<unsigned char>(text[i])];
    const HfAddedToken* found = nullptr;
    for (const uint32_t k : candidates) {
      const std::string& c = tokens_[k].content;
      if (text.compare(i, c.size(), c) == 0) {
        found = &tokens_[k];
        break;
      }
    }
    if (found == nullptr) {
      ++i;
      continue;
    }
    size_t start = i;
    size_t stop = i + found->content.size();
    if (found->lstrip) {
      while (start > piece_start) {
        size_t back = start - 1;
        while (back > piece_start && (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80) --back;
        size_t len = 0;
        if (!is_white_space(decode(text, back, len))) break;
        start = back;
      }
    }
    if (found->rstrip) {
      size_t len = 0;
      while (stop < text.size() && is_white_space(decode(text, stop, len))) stop += len;
    }
    if (start > piece_start) out.push_back({text.substr(piece_start, start - piece_start), -1});
    out.push_back({text.substr(start, stop - start), found->id});
    piece_start = i = stop;
  }
  if (piece_start < text.size()) out.push_back({text.substr(piece_start), -1});
}

}  // namespace ppctl::prepare
