// Per-step training metrics: model FLOPs (Megatron's formula), peak FLOP/s of known GPUs, MFU, and the
// JSONL file (<run dir>/metrics.jsonl) they are written to. No torch.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "core/append_file.hpp"
#include "observe/bubble_report.hpp"

namespace ppctl::observe {

/// Model FLOPs of one optimizer step of the decoder in `model` over `sequences` sequences (the global
/// batch B): forward and backward (backward = twice the forward), without recomputation, counting a
/// multiply-add as 2 FLOPs. Per matrix product: a [B s, k] x [k, n] product costs 2 B s k n forward.
///
/// gpt2 with f = 4h is exactly Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
/// Clusters Using Megatron-LM", arXiv 2104.04473, Appendix, eq. (3) with the recomputation forward
/// removed (its 96 = 4 x 24 becomes 3 x 24 = 72, its V / (16 l h) becomes V / (12 l h)):
///
///     F = 72 B s l h^2 (1 + s / (6 h) + V / (12 l h))
///
/// with s = seq_len, l = layers, h = hidden, V = vocab_size. In general, per block forward, with
/// f = config::ffn_hidden_of and kv = kv_heads x head_dim (= h for gpt2):
///   attention projections  2 B s h (h + 2 kv + h)       (q, k, v and the output projection)
///   attention scores/values 2 x 2 B s^2 h                (Q K^T and softmax(.) V over all s^2, as eq. 3)
///   MLP  gpt2: 2 x 2 B s h f (fc1, fc2); llama (SwiGLU): 3 x 2 B s h f (gate, up, down)
/// plus the logits 2 B s h V once; F = 3 x (l x block + logits). Grouped-query attention shrinks only
/// k and v. Recomputation (train.recompute) does extra work that this deliberately does not count: MFU
/// counts model FLOPs only. Norms, softmax, rotary embeddings, the SwiGLU product, biases and the
/// embedding lookup are left out, as in the paper.
double model_flops_per_step(const config::ModelSpec& model, int64_t sequences);

/// Peak dense TFLOP/s of one GPU whose name (as CUDA reports it, e.g. "NVIDIA H100 80GB HBM3")
/// contains a known model, for the precision ppctl computes in (fp32, without TF32: LibTorch's
/// default), from NVIDIA's data sheets; nothing for an unknown name. The bf16 figure is given too
/// for reference in `bf16_tflops` when `bf16_tflops` is not null.
std::optional<double> known_peak_tflops(const std::string& device_name, double* bf16_tflops = nullptr);

/// What one optimizer step measured, as written to metrics.jsonl (see metrics_json_line).
struct StepMetrics {
  int64_t step = 0;            ///< 1-based
  int64_t steps = 0;           ///< steps of the run
  double loss = 0.0;           ///< mean over the step's microbatches, nats per token (byte)
  double lr = 0.0;             ///< learning rate the step used
  double grad_norm = 0.0;      ///< global gradient L2 norm before clipping
  bool skipped = false;        ///< optimizer step skipped (train.on_nonfinite: skip)
  double step_time_s = 0.0;    ///< wall time of the whole step (schedule, all-reduce, optimizer), s
  int64_t tokens = 0;          ///< tokens in the global batch
  double model_flops = 0.0;    ///< model_flops_per_step
  int64_t devices = 1;         ///< workers (one device each) sharing the step
  std::optional<double> peak_tflops;  ///< per device; MFU is absent without it
  int64_t peak_memory_bytes = 0;      ///< the writing rank's peak so far (see RunObserver)
  double elapsed_s = 0.0;      ///< since the writing rank started training

  double tokens_per_s() const { return step_time_s > 0 ? static_cast<double>(tokens) / step_time_s : 0.0; }
  /// Achieved model TFLOP/s per device: model_flops / step_time_s / devices / 1e12.
  double tflops() const;
  /// tflops() / peak_tflops, or nothing without a peak.
  std::optional<double> mfu() const;
};

/// One JSON object (no newline) for a step, with the fields:
/// `event` "step", `step`, `steps`, `loss`, `lr`, `grad_norm`, `skipped`, `step_time_s`, `tokens`,
/// `tokens_per_s`, `model_flops` (per step), `tflops` (achieved, per device), `peak_tflops` and `mfu`
/// (null when no peak is known), `peak_memory_bytes` (the writing rank), `elapsed_s`.
/// Non-finite numbers (a NaN loss) are written as null.
std::string metrics_json_line(const StepMetrics& metrics);

/// What the end of a run summarises (the last line of metrics.jsonl).
struct RunSummary {
  int64_t steps = 0;
  std::vector<int64_t> peak_memory_bytes;       ///< per pipeline rank of replica 0
  std::vector<std::vector<int64_t>> stages;     ///< per rank, the stages it holds
  std::string memory_kind;                      ///< "cuda allocated" or "cpu max resident set"
  std::optional<BubbleReport> bubbles;          ///< none when no step was timed (a 1-step run)
  std::string stopped_by;  ///< the signal the run stopped early on ("SIGUSR1"; train.on_signal); empty = none
  bool checkpointed = false;  ///< with stopped_by: a checkpoint of the last step was written
  std::vector<int64_t> ranks;  ///< the global rank of each peak_memory_bytes and stages entry (replica 0's pipeline)
};

/// The last line of metrics.jsonl: `event` "end", `steps` (completed), `stopped_by` (the signal's name, or null
/// when the run was not stopped early), `checkpointed` (at that stop), `peak_memory_bytes` and `stages` (per
/// pipeline rank of replica 0, indexed by pipeline rank: with data parallelism only replica 0 reports), `ranks`
/// (the global rank of each entry, as the rank logs name them), `memory_kind`, and from `bubbles` (null without them): `bubble_measured`,
/// `bubble_planned`, `bubble_simulated` (per rank) and `step_ms_measured`, `step_ms_simulated`.
std::string metrics_end_line(const RunSummary& summary);

/// Appends lines to a JSONL file, each handed to write(2) at once, so a failed run keeps the steps it
/// finished, and whole (core::AppendOnlyFile: a failed write, e.g. a full disk, is cut back).
class JsonlWriter {
 public:
  /// Opens (creates or truncates) `path`. Throws ppctl::Error naming the path when it cannot.
  explicit JsonlWriter(const std::string& path);
  /// Writes `line` and a newline, whole or not at all. Throws ppctl::Error naming the file, the
  /// reason ("No space left on device") and the fix when the write fails.
  void write(const std::string& line);

 private:
  core::AppendOnlyFile file_;
};

}  // namespace ppctl::observe
