// Best-fit decreasing packing of conversations into windows.
#include "data/packing.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/check.hpp"

namespace ppctl::data {

double Packing::efficiency(int64_t capacity) const {
  if (packs.empty()) return 0.0;
  return static_cast<double>(packed_tokens) / (static_cast<double>(packs.size()) * static_cast<double>(capacity));
}

Packing pack_documents(const std::vector<int64_t>& lengths, int64_t capacity, config::Overlong overlong) {
  PPCTL_ASSERT(capacity >= 1, "pack_documents: a window of no positions");
  Packing out;
  out.documents = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  // free space -> window; equal free space: the window that reached it first (multimap keeps insertion order)
  std::multimap<int64_t, int64_t> open;
  for (const int64_t doc : order) {
    int64_t length = lengths[static_cast<size_t>(doc)];
    if (length == 0) {
      ++out.empty;
      continue;
    }
    if (length > capacity) {
      if (overlong != config::Overlong::Truncate) {
        ++out.dropped;
        continue;
      }
      ++out.truncated;
      length = capacity;
    }
    int64_t window = -1;
    auto fit = open.lower_bound(length);  // the fullest window with room
    if (fit != open.end()) {
      window = fit->second;
      open.erase(fit);
    } else {
      window = static_cast<int64_t>(out.packs.size());
      out.packs.emplace_back();
    }
    Pack& pack = out.packs[static_cast<size_t>(window)];
    pack.pieces.push_back({doc, length});
    pack.tokens += length;
    out.packed_tokens += length;
    if (pack.tokens < capacity) open.emplace(capacity - pack.tokens, window);
  }
  return out;
}

}  // namespace ppctl::data
