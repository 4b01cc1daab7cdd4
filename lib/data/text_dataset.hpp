// Training text as bytes: concatenated files cut into fixed-length sequences, shuffled per epoch
// from the seed. No torch: callers copy the token ids into tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppctl::data {

/// Byte-level corpus (vocabulary 256). The files' bytes are concatenated in the given order and cut
/// into non-overlapping windows of seq_len + 1 bytes (stride seq_len): window k holds the input
/// tokens bytes[k*seq_len, k*seq_len + seq_len) and the targets shifted by one byte.
/// The last E windows (config::held_out_sequences of data.eval_fraction) are held out for
/// evaluation; the N windows before them are the training set.
/// Training sample i of the stream (i >= 0) is window perm_e(i mod N) of epoch e = i / N, where perm_e is a
/// Fisher-Yates shuffle driven by a splitmix64 stream seeded from (seed, e): deterministic across
/// machines and independent of how samples are grouped into microbatches or ranks.
class TextDataset {
 public:
  /// Reads every file. Throws ppctl::Error naming the file if one cannot be read, or naming the
  /// total size when the text is shorter than seq_len + 1 bytes, or when `eval_fraction` (in
  /// [0, 0.5], data.eval_fraction) would leave no training window.
  TextDataset(const std::vector<std::string>& files, int64_t seq_len, uint64_t seed,
              double eval_fraction = 0.0);

  /// Number of training windows N in one epoch.
  int64_t num_sequences() const { return num_windows_; }
  /// Number of held-out windows E (0 without data.eval_fraction).
  int64_t num_eval_sequences() const { return num_eval_windows_; }
  /// Bytes of text read.
  int64_t num_bytes() const { return static_cast<int64_t>(bytes_.size()); }
  int64_t seq_len() const { return seq_len_; }

  /// Writes sample `index` (>= 0): seq_len input token ids to `tokens`, the next-byte targets to
  /// `targets` (each a buffer of seq_len int64).
  void sample(int64_t index, int64_t* tokens, int64_t* targets) const;

  /// Writes held-out sample `index` (>= 0): window N + (index mod E), in text order (no shuffle:
  /// every evaluation sees the same sequences). Throws ppctl::InternalError when E is 0.
  void eval_sample(int64_t index, int64_t* tokens, int64_t* targets) const;

  /// The stream index of sequence `i` of microbatch `microbatch` at optimizer step `step`, for a
  /// global batch of `microbatches` x `micro_batch_size` sequences: consecutive, so every step sees
  /// fresh data and the same global batch whatever the pipeline layout.
  static int64_t stream_index(int64_t step, int64_t microbatch, int64_t i, int64_t microbatches,
                              int64_t micro_batch_size);

 private:
  const std::vector<int64_t>& permutation(int64_t epoch) const;
  void copy_window(int64_t window, int64_t* tokens, int64_t* targets) const;

  std::vector<uint8_t> bytes_;
  int64_t seq_len_;
  uint64_t seed_;
  int64_t num_windows_ = 0;
  int64_t num_eval_windows_ = 0;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_perm_;
};

}  // namespace ppctl::data
