// Which elements of a tensor-parallel shard lie where: the balanced row ranges of model/tensor_parallel.hpp's
// splits and, for a shard wanted at one tensor-parallel size, the runs of it held by the shards saved at another
// (a checkpoint written at t read at t', a whole tensor of a Hugging Face file read as one rank's slice). Pure; no
// torch, so the torch-free safetensors reader and the checkpoint reader share it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ppctl::plan {

/// Rows [begin, end) of `n` that tensor-parallel rank `rank` of `size` holds, contiguous and in rank order: n / size
/// rows each, and one more on the first n mod size ranks (the vocabulary: no padding rows; every rank holds at least
/// one). Throws ppctl::InternalError unless 0 <= rank < size <= n.
std::pair<int64_t, int64_t> shard_range(int64_t n, int64_t size, int64_t rank);

/// One contiguous run, along the split dimension, of a wanted shard: `length` rows (indices along the split
/// dimension) at `offset` in the wanted shard, found at `source_offset` in the shard of saved rank `source`.
struct ShardPiece {
  int64_t source = 0;
  int64_t source_offset = 0;
  int64_t offset = 0;
  int64_t length = 0;
  bool operator==(const ShardPiece& o) const {
    return source == o.source && source_offset == o.source_offset && offset == o.offset && length == o.length;
  }
};

/// The runs that make up rank `rank` of `size`'s shard of a dimension of `extent` rows split as `parts` equal fused
/// components (model::Split: GPT-2's qkv has 3; each component cut by shard_range, a shard holding its piece of
/// every component in component order), out of the shards the same split gives at `saved_size`: ordered by offset,
/// covering the wanted shard exactly once, each inside one saved shard. saved_size 1 reads a shard out of the
/// whole tensor (source 0, source_offset its row); size 1 assembles the whole tensor from saved shards. Equal sizes
/// give one run per part, from the rank's own shard. Throws ppctl::InternalError unless parts >= 1 divides
/// `extent` and both sizes lie in [1, extent / parts] with 0 <= rank < size.
std::vector<ShardPiece> shard_pieces(int64_t extent, int64_t parts, int64_t saved_size, int64_t size, int64_t rank);

/// The rows a shard of `extent` split into `parts` holds at rank `rank` of `size`: parts x shard_range's length.
int64_t shard_rows(int64_t extent, int64_t parts, int64_t size, int64_t rank);

}  // namespace ppctl::plan
