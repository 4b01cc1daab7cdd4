// The tensor-parallel collectives of each stage's forward, backward and input-gradient actions for one
// microbatch, and the time of one: what the simulator adds to a stage's costs at tp > 1 (docs/planning.md,
// "Tensor-parallel collectives"). Mirrors model/tensor_parallel.hpp's regions. Pure; no torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/job_spec.hpp"
#include "plan/layout.hpp"

namespace ppctl::plan {

/// The collectives one action of a stage issues over its tp group for one microbatch. The large ones move one
/// microbatch's activations, [micro_batch_size, seq_len, hidden] in the compute dtype (tp_activation_bytes).
struct TpCollectives {
  int64_t all_reduces = 0;        ///< of the activations (without sequence parallelism)
  int64_t all_gathers = 0;        ///< into the activations from their seq_len / t shards (sequence parallelism)
  int64_t reduce_scatters = 0;    ///< out of the activations into seq_len / t shards (sequence parallelism)
  int64_t small_all_reduces = 0;  ///< the vocabulary-parallel loss's per-token maxima and sums
  double small_bytes = 0.0;       ///< the bytes those small ones reduce, together

  /// Their time in all-reduces of the activations (ring algorithm: an all-reduce is a reduce-scatter then an
  /// all-gather, so each of those takes half; a small one by its bytes): all_reduces + (all_gathers +
  /// reduce_scatters) / 2 + small_bytes / activation_bytes.
  double all_reduce_equivalents(double activation_bytes) const;
  TpCollectives& operator+=(const TpCollectives& other);
};

/// The collectives of a stage's three compute actions. W (a split backward's weight gradients) issues none.
struct StageTpCollectives {
  TpCollectives forward;     ///< F
  TpCollectives backward;    ///< B: the backward's, plus the forward's again under train.recompute full or blocks
  TpCollectives input_grad;  ///< I: the same as B (the activations' gradients cross the tp regions here)
};

/// What `stage` issues at spec.pipeline.tensor_parallel t (all zero at t = 1), from model/tensor_parallel.cpp's
/// regions (Megatron-LM, Shoeybi et al. 2019, arXiv 1909.08053 §3; with pipeline.sequence_parallel, Korthikanti
/// et al. 2022, arXiv 2205.05198 §4.2.2). Each block: forward 2 all-reduces (after attention and after the MLP),
/// backward 2 (the inputs' gradients); with sequence parallelism an all-gather into and a reduce-scatter out of
/// each region instead, mirrored in the backward. The embedding: forward 1 all-reduce (with sequence parallelism a reduce-scatter, and in the
/// backward an all-gather). The head: into the column-parallel LM head, backward 1 all-reduce (with sequence
/// parallelism a forward all-gather and a backward reduce-scatter); the loss, forward 2 small all-reduces of
/// (t + 2) fp32 values per token. train.recompute (full or blocks) runs the forward again inside B and I, with its
/// collectives (schedule::job_cost_model adds F's time the same way). Not per microbatch, so not here: the one
/// all-reduce per stage and step of the partial gradients (model::gradient_is_partial: under sequence parallelism
/// the norms', row-parallel biases' and positions', qwen3's q and k norms'), a few kilobytes beside the data-parallel
/// reduction.
StageTpCollectives stage_tp_collectives(const config::JobSpec& spec, const StageLayout& stage);

/// Bytes of one microbatch's activations, micro_batch_size x seq_len x hidden x (2 under a bf16 precision, else
/// 4): what one large tp collective moves (before the ring's 2(t - 1)/t).
double tp_activation_bytes(const config::JobSpec& spec);

/// How one tp collective is timed (`ppctl plan --tp-collective-ms`, `--tp-bandwidth`, `--tflops`).
struct TpCommOptions {
  /// --tp-collective-ms: one all-reduce of a microbatch's activations at `given_micro_batch_size`, ms (scaled by
  /// the bytes at another micro_batch_size; the same at every t). Unset: from the bytes and `bandwidth_gbps`.
  std::optional<double> collective_ms;
  int64_t given_micro_batch_size = 1;  ///< the spec's micro_batch_size, which collective_ms is given at
  double bandwidth_gbps = 450.0;  ///< --tp-bandwidth: the tp link's bus bandwidth, GB/s (1e9 B/s); default NVLink 4
                                  ///< (H100/H200: 900 GB/s both ways, 450 each way)
  double tflops = 400.0;  ///< --tflops: compute one GPU achieves, TFLOP/s, which turns FLOPs into ms (default: the
                          ///< 380-430 BF16 TFLOP/s per H100 of Llama 3 405B's training, arXiv 2407.21783 §3.3.4)
};

/// ms of one all-reduce of a microbatch's activations for `spec` (its tp and micro_batch_size): options'
/// collective_ms x micro_batch_size / given_micro_batch_size when set, else the ring algorithm's 2(t - 1)/t x
/// tp_activation_bytes / bandwidth (NCCL's bus bandwidth convention). 0 at t = 1.
double tp_all_reduce_ms(const config::JobSpec& spec, const TpCommOptions& options);

/// ms of one forward of `flops_per_token` (e.g. balance.hpp's block_forward_flops) over one microbatch
/// (micro_batch_size x seq_len tokens) on one of t tp ranks (each computes 1/t): the FLOP model's time unit
/// turned into ms at options.tflops.
double forward_ms(const config::JobSpec& spec, double flops_per_token, const TpCommOptions& options);

/// `2 all-gathers + 2 reduce-scatters + 2 small all-reduces`, `2 all-reduces`, or `none`.
std::string describe(const TpCollectives& collectives);

/// One line for the plan and the tuner: each block's collectives per microbatch in F and in B and I (recompute
/// included), and one all-reduce of a microbatch's activations (its shape and bytes) in ms with where that came
/// from (--tp-collective-ms, or the ring's bytes at --tp-bandwidth).
std::string describe_tp_collectives(const config::JobSpec& spec, const TpCommOptions& options);

}  // namespace ppctl::plan
