// Per-layer times: stage sums, the min-max split of blocks of any cost, the fastest candidate split, and
// the fit of per-layer times from per-stage measurements.
#include "plan/layer_times.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/check.hpp"

namespace ppctl::plan {
namespace {

/// Block counts of the split that fills stages from the first as far as `bound` allows (total F + B per
/// stage), leaving one block for each stage still to come; nothing when no split stays within `bound`.
std::optional<std::vector<int64_t>> fill_from_first(const std::vector<double>& block, double first, double last,
                                                    int64_t stages, double bound) {
  const auto layers = static_cast<int64_t>(block.size());
  std::vector<int64_t> counts;
  int64_t next = 0;
  for (int64_t s = 0; s + 1 < stages; ++s) {
    double cost = s == 0 ? first : 0.0;
    const int64_t start = next;
    while (next < layers - (stages - 1 - s) && cost + block[static_cast<size_t>(next)] <= bound) {
      cost += block[static_cast<size_t>(next)];
      ++next;
    }
    if (next == start) return std::nullopt;
    counts.push_back(next - start);
  }
  double cost = last + (stages == 1 ? first : 0.0);
  for (int64_t i = next; i < layers; ++i) cost += block[static_cast<size_t>(i)];
  if (cost > bound) return std::nullopt;
  counts.push_back(layers - next);
  return counts;
}

/// The least bound within which fill_from_first finds a split, by bisection, to 1e-12 relative.
double least_bound(const std::vector<double>& block, double first, double last, int64_t stages) {
  double low = 0.0;
  double high = first + last;
  for (const double b : block) high += b;
  while (high - low > 1e-12 * high) {  // about 40 halvings
    const double mid = low + (high - low) / 2;
    (fill_from_first(block, first, last, stages, mid) ? high : low) = mid;
  }
  return high;
}

/// Block counts of a min-max split of `block` over `stages` (embedding `first`, head `last`), balanced
/// beyond its slowest stage: fill_from_first at the least bound leaves every spare block on the early
/// stages, so the stages before and after the first one at that bound are split again the same way
/// (each part's own least bound), recursively.
std::vector<int64_t> balanced_fill(const std::vector<double>& block, double first, double last, int64_t stages) {
  const double bound = least_bound(block, first, last, stages);
  auto counts = *fill_from_first(block, first, last, stages, bound);
  size_t begin = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    double cost = (s == 0 ? first : 0.0) + (s + 1 == counts.size() ? last : 0.0);
    for (int64_t i = 0; i < counts[s]; ++i) cost += block[begin + static_cast<size_t>(i)];
    if (cost >= bound * (1 - 1e-11)) {  // the first stage at the bound: split what is on either side again
      std::vector<int64_t> out;
      if (s > 0) {
        out = balanced_fill({block.begin(), block.begin() + static_cast<std::ptrdiff_t>(begin)}, first, 0.0,
                            static_cast<int64_t>(s));
      }
      out.push_back(counts[s]);
      if (s + 1 < counts.size()) {
        const auto rest = balanced_fill({block.begin() + static_cast<std::ptrdiff_t>(begin) + counts[s], block.end()},
                                        0.0, last, static_cast<int64_t>(counts.size() - s - 1));
        out.insert(out.end(), rest.begin(), rest.end());
      }
      return out;
    }
    begin += static_cast<size_t>(counts[s]);
  }
  return counts;
}

}  // namespace

std::vector<PieceTime> stage_times(const std::vector<LayerRange>& split, const LayerTimes& times) {
  std::vector<PieceTime> out;
  for (size_t s = 0; s < split.size(); ++s) {
    PieceTime t;
    for (int64_t b = split[s].begin; b < split[s].end; ++b) {
      t.forward_ms += times.blocks[static_cast<size_t>(b)].forward_ms;
      t.backward_ms += times.blocks[static_cast<size_t>(b)].backward_ms;
    }
    if (s == 0) {
      t.forward_ms += times.embedding.forward_ms;
      t.backward_ms += times.embedding.backward_ms;
    }
    if (s + 1 == split.size()) {
      t.forward_ms += times.head.forward_ms;
      t.backward_ms += times.head.backward_ms;
    }
    out.push_back(t);
  }
  return out;
}

std::vector<LayerRange> partition_min_max(const LayerTimes& times, int64_t stages, TieBreak tie) {
  const auto layers = static_cast<int64_t>(times.blocks.size());
  partition_uniform(layers, stages);  // the same checks and messages (stages >= 1, layers >= stages)
  // From the last stage = from the first of the reversed blocks, embedding and head swapped.
  std::vector<double> block;
  for (const auto& b : times.blocks) block.push_back(b.total());
  double first = times.embedding.total();
  double last = times.head.total();
  if (tie == TieBreak::LastStage) {
    std::reverse(block.begin(), block.end());
    std::swap(first, last);
  }
  auto counts = balanced_fill(block, first, last, stages);
  if (tie == TieBreak::LastStage) std::reverse(counts.begin(), counts.end());
  return split_from_counts(counts);
}

std::vector<LayerRange> fastest_split(std::vector<std::vector<LayerRange>> candidates, const StepTimeOf& step_time) {
  PPCTL_ASSERT(!candidates.empty(), "fastest_split needs a candidate");
  size_t best = 0;
  double best_time = step_time(candidates[0]);
  for (size_t i = 1; i < candidates.size(); ++i) {
    const double t = step_time(candidates[i]);
    if (t < best_time) {
      best = i;
      best_time = t;
    }
  }
  return std::move(candidates[best]);
}

LayerTimes layer_times(const LayerCosts& costs, int64_t layers) {
  const auto of = [&](double forward) {
    const double f = forward / costs.block;
    return PieceTime{f, 2.0 * f};
  };
  return {std::vector<PieceTime>(static_cast<size_t>(layers), of(costs.block)), of(costs.embedding), of(costs.head)};
}

LayerTimes fit_layer_times(const std::vector<StageMeasurement>& stages, int64_t layers, double embedding_per_block,
                           std::vector<std::string>& notes) {
  PPCTL_CHECK(stages.size() >= 2, PlanError,
              fmt::format("{} stage measured: with one stage a block's time cannot be told from the head's",
                          stages.size()),
              "take the costs from a run with pipeline.stages >= 2 (3 or more separate the embedding too)");
  for (size_t s = 0; s < stages.size(); ++s) {
    PPCTL_CHECK(stages[s].blocks >= 1, PlanError, fmt::format("stage {} held {} blocks", s, stages[s].blocks),
                "measure a layout in which every stage holds at least one block");
  }
  const auto& head_stage = stages.back();
  const auto& embedding_stage = stages.front();
  PieceTime block;
  if (stages.size() >= 3) {
    int64_t middle_blocks = 0;
    for (size_t s = 1; s + 1 < stages.size(); ++s) {
      block.forward_ms += stages[s].time.forward_ms;
      block.backward_ms += stages[s].time.backward_ms;
      middle_blocks += stages[s].blocks;
    }
    block.forward_ms /= static_cast<double>(middle_blocks);
    block.backward_ms /= static_cast<double>(middle_blocks);
  } else {
    const double share = static_cast<double>(embedding_stage.blocks) + embedding_per_block;
    block = {embedding_stage.time.forward_ms / share, embedding_stage.time.backward_ms / share};
    notes.push_back(fmt::format("2 stages, none with blocks only: the embedding taken as {:.3g} blocks (the FLOP "
                                "model's ratio), which sets a block's time from stage 0",
                                embedding_per_block));
  }
  // What an end stage took beyond its blocks, F and B each floored at 0 (noise can make it negative).
  const auto excess = [&](const StageMeasurement& stage, const char* what) {
    const double f = stage.time.forward_ms - static_cast<double>(stage.blocks) * block.forward_ms;
    const double b = stage.time.backward_ms - static_cast<double>(stage.blocks) * block.backward_ms;
    if (f < 0 || b < 0) {
      notes.push_back(fmt::format("the {} came out at F {:.3g}, B {:.3g} ms (less than its stage's blocks): "
                                  "negative parts taken as 0",
                                  what, f, b));
    }
    return PieceTime{std::max(f, 0.0), std::max(b, 0.0)};
  };
  LayerTimes out;
  out.blocks.assign(static_cast<size_t>(layers), block);
  out.embedding = stages.size() >= 3 ? excess(embedding_stage, "embedding")
                                     : PieceTime{embedding_per_block * block.forward_ms,
                                                 embedding_per_block * block.backward_ms};
  out.head = excess(head_stage, "head");
  return out;
}

}  // namespace ppctl::plan
