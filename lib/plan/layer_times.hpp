// Measured or chosen per-layer times (forward and backward of every block, the embedding and the
// LM head + loss, ms per microbatch): stage times of a split, the split minimising the slowest stage,
// and the fit of per-layer times from a run's measured per-stage times. No torch, no schedule/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/balance.hpp"
#include "plan/layout.hpp"

namespace ppctl::plan {

/// Forward and backward time of one piece of the model for one microbatch, in milliseconds.
struct PieceTime {
  double forward_ms = 0.0;
  double backward_ms = 0.0;  ///< the full backward (B); a split backward's I and W share it (I = W = B / 2)
  double total() const { return forward_ms + backward_ms; }
};

/// Per-layer times of a whole model.
struct LayerTimes {
  std::vector<PieceTime> blocks;  ///< one per transformer block, in order (model.layers entries)
  PieceTime embedding;            ///< the embedding, on the first stage
  PieceTime head;                 ///< final norm, LM head and loss, on the last stage
  int64_t micro_batch_size = 0;   ///< sequences per microbatch they were measured at; 0 = not said (the spec's)
};

/// Time of each stage of `split` (ranges into times.blocks): the sum of its blocks, plus the embedding
/// on stage 0 and the head on the last stage.
std::vector<PieceTime> stage_times(const std::vector<LayerRange>& split, const LayerTimes& times);

/// The contiguous split of times.blocks over `stages` stages (each >= 1 block) whose slowest stage
/// (largest stage_times total, F + B: a stage's time per microbatch in the steady state) is as fast as
/// possible, blocks of any cost. The least feasible maximum is found by bisection on the greedy
/// feasibility test (fill each stage in order as far as the bound allows, leaving one block per stage
/// still to come; with non-negative costs a greedy prefix is never behind any feasible split's:
/// the linear partition problem, Skiena, "The Algorithm Design Manual", 2nd ed., §8.5), to within 1e-12
/// relative; the stages on either side of the first slowest one are then split again the same way, so
/// that the spare blocks spread instead of piling onto the first stages. FirstStage fills from stage 0,
/// LastStage from the last. O(blocks x stages x 40). Throws ppctl::PlanError when stages < 1 or
/// blocks < stages.
std::vector<LayerRange> partition_min_max(const LayerTimes& times, int64_t stages, TieBreak tie = TieBreak::FirstStage);

/// Of `candidates` (splits), the one with the least `step_time`; the first listed unless another is
/// strictly faster. `candidates` must not be empty.
std::vector<LayerRange> fastest_split(std::vector<std::vector<LayerRange>> candidates, const StepTimeOf& step_time);

/// `costs` (balance auto's forward costs, e.g. flop_layer_costs) as times of `layers` identical blocks,
/// in units of one block's forward (block F = 1 "ms"), each backward twice its forward (the simulator's
/// default F:B = 1:2): the costs `ppctl plan` splits by without measured ones.
LayerTimes layer_times(const LayerCosts& costs, int64_t layers);

/// Per-stage times measured in a run (e.g. the median F and B of each stage's actions), the layout
/// they were measured with, and the fit.
struct StageMeasurement {
  int64_t blocks = 0;  ///< blocks the stage held
  PieceTime time;      ///< its measured time per microbatch
};

/// Per-layer times from per-stage measurements (stage 0 held the embedding, the last stage the head).
/// With 3 or more stages: a block costs the middle stages' total time over their total blocks
/// (they hold blocks only); the embedding is what stage 0 took beyond its blocks, the head what the
/// last stage took beyond its blocks (each of F and B on its own, floored at 0). With 2 stages no stage
/// holds blocks only: the embedding is taken as `embedding_per_block` blocks (the FLOP model's ratio),
/// which fixes a block's cost from stage 0, and the head is the rest of stage 1. `notes` receives one
/// line per assumption made (the 2-stage ratio, a floored negative excess). Throws ppctl::PlanError
/// for fewer than 2 stages (a block cannot be told from the head) or a stage without blocks.
LayerTimes fit_layer_times(const std::vector<StageMeasurement>& stages, int64_t layers, double embedding_per_block,
                           std::vector<std::string>& notes);

}  // namespace ppctl::plan
