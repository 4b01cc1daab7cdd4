// Which dataset of a weighted blend supplies each sample: Megatron's greedy largest-error rule,
// computed incrementally from a resumable position.
#pragma once

#include <cstdint>
#include <vector>

namespace ppctl::data {

/// Where a blend stands: after `next_sample` samples, dataset d has supplied counts[d] of them.
struct BlendPosition {
  int64_t next_sample = 0;
  std::vector<int64_t> counts;
};

/// The blending rule of Megatron-Core's BlendedDataset (build_blending_indices in
/// megatron/core/datasets/helpers.cpp), with weights w_d normalised to sum 1: sample i (i = 0, 1, ...)
/// goes to the dataset d with the largest error w_d x (i + 1) - c_d(i), where c_d(i) counts the samples
/// 0 .. i-1 given to d; ties go to the lowest d. After any N samples every |c_d - w_d N| < 1 (+ rounding).
/// (Megatron uses max(i, 1) in place of i + 1; the two differ only in the order of the first picks.)
/// The cursor walks forward from an anchor (0, or a checkpoint's position) in O(datasets) memory;
/// asking for an index before the current one walks again from the anchor.
class BlendCursor {
 public:
  /// `weights` > 0 (normalised here). Throws InternalError when empty or one is not positive.
  explicit BlendCursor(std::vector<double> weights);

  /// The dataset of sample `index` and how many samples that dataset supplied before it (the
  /// sample's position in that dataset's own stream). `index` >= the anchor's next_sample.
  struct Pick {
    int64_t dataset = 0;
    int64_t position = 0;
  };
  Pick at(int64_t index);

  /// The counts after `next_sample` samples (walks there).
  BlendPosition position(int64_t next_sample);

  /// Continues from `position` (a checkpoint's): later at() and position() calls need index >=
  /// position.next_sample. Throws InternalError when the counts do not sum to next_sample or their
  /// number differs from the weights'.
  void seek(const BlendPosition& position);

  const std::vector<double>& weights() const { return weights_; }

 private:
  Pick step();
  void rewind_if_past(int64_t index);

  std::vector<double> weights_;
  BlendPosition anchor_;
  BlendPosition current_;
  Pick last_;  ///< the pick of sample current_.next_sample - 1
};

}  // namespace ppctl::data
