// Byte-level BPE: the byte-to-unicode alphabet, the merge table, merges by rank with a word cache.
#include "prepare/byte_level_bpe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <tuple>

#include "core/echo.hpp"
#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {
namespace {

/// Words longer than this are not cached (tokenizers' MAX_LENGTH), nor more than kCacheWords words.
constexpr size_t kCacheMaxBytes = 256;
constexpr size_t kCacheWords = 1 << 17;

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {  // the alphabet stays below U+0800: two bytes
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::array<std::string, 256> make_alphabet() {
  std::array<std::string, 256> alphabet;
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    append_utf8(alphabet[b], printable ? b : next++);
  }
  return alphabet;
}

}  // namespace

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> alphabet = make_alphabet();
  return alphabet;
}

bool unicode_to_bytes(std::string_view token, std::string& bytes) {
  static const std::unordered_map<std::string, char> inverse = [] {
    std::unordered_map<std::string, char> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_to_unicode()[b], static_cast<char>(b));
    return m;
  }();
  bytes.clear();
  std::string ch;
  for (size_t i = 0; i < token.size();) {
    const auto lead = static_cast<unsigned char>(token[i]);
    const size_t len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : 0;  // the alphabet has 1- and 2-byte characters
    if (len == 0 || i + len > token.size()) return false;
    ch.assign(token.substr(i, len));
    const auto it = inverse.find(ch);
    if (it == inverse.end()) return false;
    bytes += it->second;
    i += len;
  }
  return true;
}

ByteLevelBpe::ByteLevelBpe(const HfTokenizerSpec& spec)
    : fuse_unk_(spec.model.fuse_unk), ignore_merges_(spec.model.ignore_merges) {
  const HfBpeModel& model = spec.model;
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(model.vocab.size());
  std::string bytes;
  for (const auto& [token, id] : model.vocab) {
    vocab[token] = id;
    max_id_ = std::max(max_id_, id);
    if (ignore_merges_ && unicode_to_bytes(token, bytes)) vocab_bytes_[bytes] = id;
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(byte_to_unicode()[b]);
    byte_ids_[b] = it == vocab.end() ? -1 : it->second;
  }
  const auto fail = [&spec](const std::string& field, const std::string& token) {
    throw PrepareError(fmt::format("{}: {}: token {} is not in model.vocab (fix: a merge must join two tokens of the "
                                   "vocabulary into a third; save the tokenizer again with `tokenizers`)",
                                   core::echo_label(spec.path), field, core::echo_value(token)));
  };
  if (model.unk_token) {
    const auto it = vocab.find(*model.unk_token);
    if (it == vocab.end()) fail("model.unk_token", *model.unk_token);
    unk_id_ = it->second;
  }
  merges_.reserve(model.merges.size());
  for (size_t rank = 0; rank < model.merges.size(); ++rank) {
    const auto& [left, right] = model.merges[rank];
    const std::string field = fmt::format("model.merges[{}]", rank);
    const auto l = vocab.find(left);
    if (l == vocab.end()) fail(field, left);
    const auto r = vocab.find(right);
    if (r == vocab.end()) fail(field, right);
    const auto merged = vocab.find(left + right);
    if (merged == vocab.end()) fail(field + " (the merged token)", left + right);
    // A pair listed twice keeps its last rank, as tokenizers' map built from the list does.
    merges_.insert_or_assign(pair_key(l->second, r->second), Merge{static_cast<int32_t>(rank), merged->second});
  }
}

void ByteLevelBpe::encode_word(std::string_view word, std::vector<int32_t>& ids) {
  const bool cacheable = word.size() <= kCacheMaxBytes;
  if (cacheable) {
    key_.assign(word);
    if (const auto hit = cache_.find(key_); hit != cache_.end()) {
      ids.insert(ids.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  std::vector<int32_t> out;
  bool whole = false;
  if (ignore_merges_) {
    key_.assign(word);
    if (const auto it = vocab_bytes_.find(key_); it != vocab_bytes_.end()) {
      out.push_back(it->second);
      whole = true;
    }
  }
  if (!whole) {
    symbols_.clear();
    bool last_unk = false;
    for (const char c : word) {
      const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
      if (id < 0 && (unk_id_ < 0 || (fuse_unk_ && last_unk))) continue;
      last_unk = id < 0;
      const auto n = static_cast<int32_t>(symbols_.size());
      symbols_.push_back(Symbol{id < 0 ? unk_id_ : id, n - 1, n + 1, false});
    }
    if (!symbols_.empty()) symbols_.back().next = -1;
    merge(out);
  }
  ids.insert(ids.end(), out.begin(), out.end());
  if (cacheable) {
    if (cache_.size() >= kCacheWords) cache_.clear();
    key_.assign(word);
    cache_.emplace(key_, std::move(out));
  }
}

void ByteLevelBpe::merge(std::vector<int32_t>& out) {
  // A min-heap of (rank, position, merged id): the lowest rank first, the leftmost of equal rank
  // first; entries made stale by an earlier merge are skipped when popped (tokenizers' word.rs).
  using Entry = std::tuple<int32_t, int32_t, int32_t>;
  std::vector<Entry> heap;
  const auto push = [&](int32_t pos) {
    const int32_t next = symbols_[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(pair_key(symbols_[pos].id, symbols_[next].id));
    if (it == merges_.end()) return;
    heap.emplace_back(it->second.rank, pos, it->second.id);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols_.size()); ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const auto [rank, pos, merged] = heap.back();
    heap.pop_back();
    Symbol& left = symbols_[pos];
    if (left.gone || left.next < 0) continue;
    Symbol& right = symbols_[left.next];
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.id != merged || it->second.rank != rank) continue;
    left.id = merged;
    right.gone = true;
    left.next = right.next;
    if (left.next >= 0) symbols_[left.next].prev = pos;
    if (left.prev >= 0) push(left.prev);
    push(pos);
  }
  for (const Symbol& s : symbols_) {
    if (!s.gone) out.push_back(s.id);
  }
}

}  // namespace ppctl::prepare
