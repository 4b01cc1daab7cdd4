// The seeded order in which one dataset's training windows are visited, a new order every epoch,
// computed per index in bounded memory.
#pragma once

#include <cstdint>
#include <vector>

namespace ppctl::data {

/// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014):
/// advances `state` and returns the next output. A fixed definition, so orders are the same with
/// every standard library and machine.
uint64_t splitmix64(uint64_t& state);

/// A permutation of the windows 0 .. n-1 for every epoch e >= 0, seeded by (seed, dataset, e).
/// For n <= kFisherYatesLimit it is a Fisher-Yates shuffle (Knuth, TAOCP vol. 2, 3.4.2 P) driven by
/// splitmix64 from state seed x 0x100000001B3 + e + 1 + dataset x 0x9E3779B97F4A7C15 — for dataset
/// 0 exactly the order ppctl used before token formats existed — cached one epoch at a time
/// (8 n bytes). Larger n use a 4-round Feistel network (Luby & Rackoff 1988) over the next power of
/// four >= n with cycle walking (Black & Rogaway, "Ciphers with arbitrary finite domains", 2002),
/// keyed by the same splitmix64 stream: a bijection computed per index in O(1) memory.
class WindowOrder {
 public:
  /// Largest window count shuffled with a cached Fisher-Yates table (2 MiB of int64).
  static constexpr int64_t kFisherYatesLimit = int64_t{1} << 18;

  /// `windows` >= 1 training windows of dataset number `dataset` (its index in data.blend, 0 for
  /// data.path) under train.seed `seed`.
  WindowOrder(int64_t windows, uint64_t seed, int64_t dataset);

  /// The window visited at position `index` >= 0 of the dataset's stream: window perm_e(index mod
  /// n) of epoch e = index / n. Not thread-safe (caches the current epoch).
  int64_t at(int64_t index) const;

 private:
  uint64_t epoch_state(int64_t epoch) const;
  int64_t feistel(int64_t position) const;

  int64_t windows_;
  uint64_t seed_;
  int64_t dataset_;
  int half_bits_ = 0;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_perm_;    ///< Fisher-Yates: the epoch's permutation
  mutable uint64_t cached_keys_[4] = {0, 0, 0, 0};  ///< Feistel: the epoch's round keys
};

}  // namespace ppctl::data
