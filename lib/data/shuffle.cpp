// WindowOrder: Fisher-Yates for small datasets, a cycle-walking Feistel permutation for large ones.
#include "data/shuffle.hpp"

#include "core/check.hpp"

namespace ppctl::data {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

WindowOrder::WindowOrder(int64_t windows, uint64_t seed, int64_t dataset)
    : windows_(windows), seed_(seed), dataset_(dataset) {
  PPCTL_ASSERT(windows >= 1, "WindowOrder needs at least one window");
  while ((int64_t{1} << (2 * half_bits_)) < windows) ++half_bits_;
}

uint64_t WindowOrder::epoch_state(int64_t epoch) const {
  return seed_ * 0x100000001B3ULL + static_cast<uint64_t>(epoch) + 1 +
         static_cast<uint64_t>(dataset_) * 0x9E3779B97F4A7C15ULL;
}

int64_t WindowOrder::feistel(int64_t position) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  auto x = static_cast<uint64_t>(position);
  do {  // cycle walking: re-encrypt until the value falls inside [0, windows)
    uint64_t left = x >> half_bits_;
    uint64_t right = x & mask;
    for (uint64_t key : cached_keys_) {
      uint64_t state = key ^ right;
      const uint64_t f = splitmix64(state) & mask;
      const uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<uint64_t>(windows_));
  return static_cast<int64_t>(x);
}

int64_t WindowOrder::at(int64_t index) const {
  PPCTL_ASSERT(index >= 0, "negative window position");
  const int64_t epoch = index / windows_;
  const int64_t position = index % windows_;
  if (epoch != cached_epoch_) {
    uint64_t state = epoch_state(epoch);
    if (windows_ <= kFisherYatesLimit) {
      cached_perm_.resize(static_cast<size_t>(windows_));
      for (int64_t k = 0; k < windows_; ++k) cached_perm_[static_cast<size_t>(k)] = k;
      for (int64_t k = windows_ - 1; k > 0; --k) {
        const auto j = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(k + 1));
        std::swap(cached_perm_[static_cast<size_t>(k)], cached_perm_[static_cast<size_t>(j)]);
      }
    } else {
      for (auto& key : cached_keys_) key = splitmix64(state);
    }
    cached_epoch_ = epoch;
  }
  return windows_ <= kFisherYatesLimit ? cached_perm_[static_cast<size_t>(position)] : feistel(position);
}

}  // namespace ppctl::data
