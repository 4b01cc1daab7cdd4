// Split pre-tokenizer: PCRE2 matching and tokenizers' split behaviours.
#include "prepare/pre_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <algorithm>
#include <tuple>

#include "core/echo.hpp"
#include "core/error.hpp"
#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {

namespace {

/// Oniguruma's \s in Unicode mode (what tokenizers runs): U+0009-U+000D, U+0085 and the separators
/// (Zs, Zl, Zp). PCRE2's \s with UCP also takes U+180E (MONGOLIAN VOWEL SEPARATOR, no longer a space
/// since Unicode 6.3); spelling the set out keeps the two the same.
constexpr const char* kOnigSpaces = "\\t-\\r\\x{85}\\p{Z}";

/// `pattern` with \s and \S written as kOnigSpaces sets (\S inside a class, which a set cannot say,
/// stays PCRE2's). Escapes, classes and \Q...\E quoting are followed so that only real \s and \S change.
std::string onig_spaces(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 'Q') {  // quoted up to \E: copied as it is
        const size_t end = pattern.find("\\E", i + 1);
        const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
        out.append(pattern, i - 1, stop - (i - 1));
        i = stop - 1;
      } else if (e == 's') {
        out += in_class ? kOnigSpaces : std::string("[") + kOnigSpaces + "]";
      } else if (e == 'S' && !in_class) {
        out += std::string("[^") + kOnigSpaces + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' first in the class (after an optional '^') is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // [:alpha:]
      const size_t end = pattern.find(":]", i + 2);
      if (end != std::string::npos) {
        out.append(pattern, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct Pcre2Pattern::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  std::string field;
  std::string file;
};

Pcre2Pattern::Pcre2Pattern(const std::string& pattern, bool literal, const std::string& file, const std::string& field)
    : impl_(std::make_unique<Impl>()) {
  impl_->field = field;
  impl_->file = file;
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);  // UCP is not allowed with LITERAL
  const std::string source = literal ? pattern : onig_spaces(pattern);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options, &error, &offset,
                              nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw PrepareError(fmt::format("{}: {}: the pattern {} does not compile with PCRE2: {} at offset {} (fix: write a "
                                   "regex that Oniguruma and PCRE2 both read)",
                                   core::echo_label(file), field, core::echo_value(source),
                                   reinterpret_cast<const char*>(message), offset));
  }
  // JIT makes matching several times faster; where it is not available the interpreter runs the same pattern.
  if (pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0) {
    impl_->context = pcre2_match_context_create(nullptr);
    impl_->jit_stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(impl_->context, nullptr, impl_->jit_stack);
  }
  impl_->match = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
}

Pcre2Pattern::~Pcre2Pattern() {
  pcre2_match_data_free(impl_->match);
  pcre2_match_context_free(impl_->context);
  pcre2_jit_stack_free(impl_->jit_stack);
  pcre2_code_free(impl_->code);
}

void Pcre2Pattern::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
  matches.clear();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  bool any = false;
  size_t last_end = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, impl_->match, impl_->context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      // Bad input, not a failure of the machine: a pattern that backtracks catastrophically on this text
      // runs into PCRE2's match limit (or the JIT stack's), which ends the run (the caller adds the
      // input file and document).
      throw PrepareError(fmt::format("{}: {}: PCRE2 gave up running the pattern on this text: {} (the pattern "
                                     "backtracks too much, e.g. nested repeats like (a+)+; fix: rewrite the "
                                     "pattern without nested or overlapping repeats)",
                                     core::echo_label(impl_->file), impl_->field,
                                     reinterpret_cast<const char*>(message)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(impl_->match);
    const size_t s = ovector[0];
    const size_t e = ovector[1];
    if (e > s) {
      matches.emplace_back(s, e);
      start = e;
    } else {
      // An empty match: kept unless it touches the previous match (Oniguruma's find_iter), then one
      // character further.
      if (!(any && s == last_end)) matches.emplace_back(s, e);
      start = s + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    }
    any = true;
    last_end = e;
  }
}

void split_pieces(const Pcre2Pattern& pattern, HfSplitBehavior behavior, bool invert,
                  std::vector<std::string_view>& pieces, std::vector<std::string_view>& scratch) {
  scratch.clear();
  std::vector<std::pair<size_t, size_t>> matches;
  std::vector<std::tuple<size_t, size_t, bool>> segments;  // [start, end), is a match
  for (const std::string_view piece : pieces) {
    segments.clear();
    pattern.find_all(piece, matches);
    size_t prev = 0;
    for (const auto& [s, e] : matches) {
      if (prev != s) segments.emplace_back(prev, s, invert);
      segments.emplace_back(s, e, !invert);
      prev = e;
    }
    if (prev != piece.size()) segments.emplace_back(prev, piece.size(), invert);
    // tokenizers' SplitDelimiterBehavior over the segments.
    std::vector<std::pair<size_t, size_t>> kept;
    bool previous_match = false;
    switch (behavior) {
      case HfSplitBehavior::kIsolated:
        for (const auto& [s, e, m] : segments) kept.emplace_back(s, e);
        break;
      case HfSplitBehavior::kRemoved:
        for (const auto& [s, e, m] : segments) {
          if (!m) kept.emplace_back(s, e);
        }
        break;
      case HfSplitBehavior::kMergedWithPrevious:
        for (const auto& [s, e, m] : segments) {
          if (m && !previous_match && !kept.empty()) {
            kept.back().second = e;
          } else {
            kept.emplace_back(s, e);
          }
          previous_match = m;
        }
        break;
      case HfSplitBehavior::kMergedWithNext:
        for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
          const auto& [s, e, m] = *it;
          if (m && !previous_match && !kept.empty()) {
            kept.back().first = s;
          } else {
            kept.emplace_back(s, e);
          }
          previous_match = m;
        }
        std::reverse(kept.begin(), kept.end());
        break;
      case HfSplitBehavior::kContiguous:
        for (const auto& [s, e, m] : segments) {
          if (m == previous_match && !kept.empty()) {
            kept.back().second = e;
          } else {
            kept.emplace_back(s, e);
          }
          previous_match = m;
        }
        break;
    }
    for (const auto& [s, e] : kept) {
      if (e > s) scratch.push_back(piece.substr(s, e - s));
    }
  }
  pieces.swap(scratch);
}

}  // namespace ppctl::prepare
