// Balanced shard ranges and the runs of one tensor-parallel shard held by the shards of another size.
#include "plan/shard_pieces.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace ppctl::plan {

std::pair<int64_t, int64_t> shard_range(int64_t n, int64_t size, int64_t rank) {
  PPCTL_ASSERT(size >= 1 && rank >= 0 && rank < size && n >= size,
               fmt::format("shard {} of {} over {} rows", rank, size, n));
  // The first n mod size ranks hold one row more: every rank holds at least one (n >= size), none differ by two.
  const int64_t base = n / size, extra = n % size;
  const int64_t begin = rank * base + std::min(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

int64_t shard_rows(int64_t extent, int64_t parts, int64_t size, int64_t rank) {
  PPCTL_ASSERT(parts >= 1 && extent % parts == 0, fmt::format("{} rows in {} parts", extent, parts));
  const auto [begin, end] = shard_range(extent / parts, size, rank);
  return parts * (end - begin);
}

std::vector<ShardPiece> shard_pieces(int64_t extent, int64_t parts, int64_t saved_size, int64_t size, int64_t rank) {
  PPCTL_ASSERT(parts >= 1 && extent % parts == 0 && saved_size >= 1,
               fmt::format("{} rows in {} parts saved at {}", extent, parts, saved_size));
  const int64_t n = extent / parts;  // rows of one component
  const auto [begin, end] = shard_range(n, size, rank);
  std::vector<ShardPiece> pieces;
  for (int64_t part = 0; part < parts; ++part) {
    for (int64_t source = 0; source < saved_size; ++source) {
      const auto [saved_begin, saved_end] = shard_range(n, saved_size, source);
      const int64_t low = std::max(begin, saved_begin), high = std::min(end, saved_end);
      if (low >= high) continue;
      // Within a shard, component `part` starts after `part` pieces of the shard's own length.
      pieces.push_back({source, part * (saved_end - saved_begin) + (low - saved_begin),
                        part * (end - begin) + (low - begin), high - low});
    }
  }
  return pieces;
}

}  // namespace ppctl::plan
