// Byte-level text dataset: reading, windowing and the per-epoch shuffle.
#include "data/text_dataset.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "config/job_spec.hpp"
#include "core/check.hpp"
#include "core/error.hpp"

namespace ppctl::data {
namespace {

/// splitmix64 (Steele, Lea, Flood 2014): a small, well-mixed generator with a fixed definition, so
/// the data order is the same with every standard library.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

TextDataset::TextDataset(const std::vector<std::string>& files, int64_t seq_len, uint64_t seed,
                         double eval_fraction)
    : seq_len_(seq_len), seed_(seed) {
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("data file {}: cannot be read: {}", path, std::strerror(errno)));
    bytes_.insert(bytes_.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (static_cast<int64_t>(bytes_.size()) < seq_len + 1) {
    throw Error(fmt::format(
        "data: the {} file(s) hold {} bytes, fewer than model.seq_len + 1 = {} (fix: add text or "
        "lower model.seq_len)",
        files.size(), bytes_.size(), seq_len + 1));
  }
  const int64_t windows = (static_cast<int64_t>(bytes_.size()) - 1) / seq_len;
  num_eval_windows_ = config::held_out_sequences(windows, eval_fraction);
  num_windows_ = windows - num_eval_windows_;
  if (num_windows_ < 1) {
    throw Error(fmt::format("data: the text holds {} sequence(s) of model.seq_len + 1 bytes and "
                            "data.eval_fraction {:g} holds out {}, leaving none to train on (fix: add "
                            "text or lower data.eval_fraction)",
                            windows, eval_fraction, num_eval_windows_));
  }
}

const std::vector<int64_t>& TextDataset::permutation(int64_t epoch) const {
  if (epoch != cached_epoch_) {
    cached_perm_.resize(static_cast<size_t>(num_windows_));
    for (int64_t k = 0; k < num_windows_; ++k) cached_perm_[static_cast<size_t>(k)] = k;
    uint64_t state = seed_ * 0x100000001B3ULL + static_cast<uint64_t>(epoch) + 1;
    for (int64_t k = num_windows_ - 1; k > 0; --k) {
      const auto j = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(k + 1));
      std::swap(cached_perm_[static_cast<size_t>(k)], cached_perm_[static_cast<size_t>(j)]);
    }
    cached_epoch_ = epoch;
  }
  return cached_perm_;
}

void TextDataset::sample(int64_t index, int64_t* tokens, int64_t* targets) const {
  copy_window(permutation(index / num_windows_)[static_cast<size_t>(index % num_windows_)], tokens,
              targets);
}

void TextDataset::eval_sample(int64_t index, int64_t* tokens, int64_t* targets) const {
  PPCTL_ASSERT(num_eval_windows_ > 0, "eval_sample: no held-out text (data.eval_fraction is 0)");
  copy_window(num_windows_ + index % num_eval_windows_, tokens, targets);
}

void TextDataset::copy_window(int64_t window, int64_t* tokens, int64_t* targets) const {
  const uint8_t* start = bytes_.data() + window * seq_len_;
  for (int64_t t = 0; t < seq_len_; ++t) {
    tokens[t] = start[t];
    targets[t] = start[t + 1];
  }
}

int64_t TextDataset::stream_index(int64_t step, int64_t microbatch, int64_t i, int64_t microbatches,
                                  int64_t micro_batch_size) {
  return (step * microbatches + microbatch) * micro_batch_size + i;
}

}  // namespace ppctl::data
