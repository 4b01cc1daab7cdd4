// Packing whole conversations into fixed-size windows: best-fit decreasing bin packing, the overlong rule, and
// what a packing costs in padding. No torch, no files: data/packed_corpus.hpp applies it to a chat dataset.
#pragma once

#include <cstdint>
#include <vector>

#include "config/job_spec.hpp"

namespace ppctl::data {

/// One conversation's place in a window.
struct PackedPiece {
  int64_t document = 0;  ///< index of the conversation in the list given to pack_documents
  int64_t length = 0;    ///< tokens of it in the window (its whole length, or seq_len when truncated)
};

/// A window: conversations back to back from position 0, padding after them.
struct Pack {
  std::vector<PackedPiece> pieces;  ///< in placement order (longest first)
  int64_t tokens = 0;               ///< sum of the pieces' lengths, <= capacity
};

/// The result of pack_documents.
struct Packing {
  std::vector<Pack> packs;     ///< in the order the bins were opened (deterministic for given lengths)
  int64_t documents = 0;       ///< conversations offered (empty ones included)
  int64_t packed_tokens = 0;   ///< tokens placed in windows
  int64_t dropped = 0;         ///< conversations left out by Overlong::Drop
  int64_t truncated = 0;       ///< conversations cut to the capacity by Overlong::Truncate
  int64_t empty = 0;           ///< conversations of 0 tokens (skipped: nothing to attend or predict)
  /// Share of window positions that hold a conversation's token: packed_tokens / (packs x capacity); 0 without packs.
  double efficiency(int64_t capacity) const;
};

/// Packs conversations of `lengths` tokens into windows of `capacity` positions, each conversation whole
/// in one window: best-fit decreasing (longest first, each into the fullest window it still fits, else a new
/// one), which never opens more windows than first-fit decreasing and stays within 11/9 OPT + 6/9 of the optimum
/// (Johnson 1973; Dósa 2007). O(n log n): the open windows sit in a multimap keyed by free space. Ties go to the
/// lower index (and the window that reached a free space first), so the packing depends only on `lengths` and
/// `capacity`.
/// A conversation longer than `capacity` is handled by `overlong`: Drop leaves it out, Truncate keeps its first
/// `capacity` tokens (the piece's length is then `capacity`), Error is the caller's business and is treated as
/// Drop here (data/packed_corpus.hpp refuses the dataset before packing). capacity >= 1.
Packing pack_documents(const std::vector<int64_t>& lengths, int64_t capacity, config::Overlong overlong);

}  // namespace ppctl::data
