// BlendCursor: the greedy largest-error assignment of samples to datasets.
#include "data/blend.hpp"

#include <numeric>

#include "core/check.hpp"

namespace ppctl::data {

BlendCursor::BlendCursor(std::vector<double> weights) : weights_(std::move(weights)) {
  PPCTL_ASSERT(!weights_.empty(), "a blend needs a dataset");
  double total = 0;
  for (double w : weights_) {
    PPCTL_ASSERT(w > 0, "blend weights must be positive");
    total += w;
  }
  for (double& w : weights_) w /= total;
  anchor_.counts.assign(weights_.size(), 0);
  current_ = anchor_;
}

void BlendCursor::seek(const BlendPosition& position) {
  PPCTL_ASSERT(position.counts.size() == weights_.size(), "blend position for another number of datasets");
  PPCTL_ASSERT(std::accumulate(position.counts.begin(), position.counts.end(), int64_t{0}) == position.next_sample,
               "blend counts do not sum to the sample index");
  anchor_ = position;
  current_ = position;
}

BlendCursor::Pick BlendCursor::step() {
  const size_t n = weights_.size();
  const double next = static_cast<double>(current_.next_sample + 1);
  size_t best = 0;
  double best_error = weights_[0] * next - static_cast<double>(current_.counts[0]);
  for (size_t d = 1; d < n; ++d) {
    const double error = weights_[d] * next - static_cast<double>(current_.counts[d]);
    if (error > best_error) {
      best_error = error;
      best = d;
    }
  }
  ++current_.next_sample;
  last_ = {static_cast<int64_t>(best), current_.counts[best]++};
  return last_;
}

void BlendCursor::rewind_if_past(int64_t index) {
  PPCTL_ASSERT(index >= anchor_.next_sample, "blend index before the resume position");
  if (index < current_.next_sample) current_ = anchor_;
}

BlendCursor::Pick BlendCursor::at(int64_t index) {
  if (current_.next_sample == index + 1 && index >= anchor_.next_sample) return last_;
  rewind_if_past(index);
  while (current_.next_sample <= index) step();
  return last_;
}

BlendPosition BlendCursor::position(int64_t next_sample) {
  if (next_sample != current_.next_sample) rewind_if_past(next_sample);
  while (current_.next_sample < next_sample) step();
  return current_;
}

}  // namespace ppctl::data
