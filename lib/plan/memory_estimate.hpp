// Memory estimate of one pipeline stage from the job spec, on one tensor-parallel rank: the bytes autograd saves
// from a forward to its backward per microbatch (by block, embedding and head, under runtime.precision,
// train.recompute and pipeline.tensor_parallel), the bytes crossing a stage boundary, and the static bytes of
// parameters, gradients and AdamW state. Pure functions of the spec; no torch.
#pragma once

#include <cstdint>

#include "config/job_spec.hpp"
#include "plan/layout.hpp"

namespace ppctl::plan {

/// Bytes of one tensor crossing a stage boundary (an activation or its gradient) as the stage holds
/// it: micro_batch_size x seq_len x hidden x 4 (the residual stream is float32 under either precision); seq_len / tp
/// positions under sequence parallelism (tp > 1 and pipeline.sequence_parallel).
int64_t boundary_bytes(const config::JobSpec& spec);

/// Bytes of one such tensor on the wire and in its send or receive buffer: micro_batch_size x
/// seq_len x hidden x config::p2p_element_bytes (4, or 2 when runtime.p2p_dtype resolves to bf16); seq_len / tp
/// positions under sequence parallelism.
int64_t p2p_bytes(const config::JobSpec& spec);

/// Bytes autograd saves for the backward of one transformer block and one microbatch, when the
/// block's graph is kept (train.recompute none, or a segment being recomputed). Derived from what
/// the ops of model/gpt2.cpp and model/llama.cpp save (adapting Korthikanti et al. 2022, "Reducing
/// Activation Recomputation in Large Transformer Models", arXiv 2205.05198 §4.1, to our code), with
/// t = micro_batch_size x seq_len tokens, h = hidden, f = ffn_hidden_of, n = heads,
/// a = 4 bytes (fp32) or 2 (bf16 and bf16-params: autocast's matrix-product operands and outputs):
/// - gpt2: 8 t h (fp32 inputs of ln1 and ln2: the residual stream) + a t (6 h + 2 f) (inputs of
///   qkv, proj, fc1, fc2 and of the attention: q, k, v, its output; the GELU input) + 16 t (the two
///   LayerNorms' mean and rstd) + 4 t n (the fused attention's logsumexp; no s x s matrix: flash /
///   memory-efficient SDPA). At f = 4h and fp32: 64 t h bytes, i.e. 16 t h values.
/// - llama (kv = kv_heads x head_dim, GQA when kv_heads < heads): 16 t h (fp32: the inputs and
///   normalised values of the two RMSNorms) + 8 t (their rsqrt) + the projections' inputs (fp32:
///   4 t (2 h) for the two norm outputs, shared; bf16, bf16-params: one cast copy per projection, 2 t (5 h)) +
///   a t (2 h + k' + v' + 4 f) (q after RoPE and the attention's output; its k' and v', = h with GQA
///   (repeated), kv without; gate, SiLU, up and their product) + 4 t n (logsumexp) + 8 s head_dim
///   (the rotary cos/sin tables). RoPE's x cos + rotate(x) sin keeps only cos and sin: autograd saves
///   a factor of a product only when the other factor needs a gradient.
/// - model.dropout > 0 adds 2 sites x the mask = 2 a t h (x * mask keeps only the mask).
/// - bf16 adds the bf16 copies of the block's fp32 weight matrices autocast makes for the forward (2
///   bytes per weight of qkv/proj/fc1/fc2, or q/k/v/o/gate/up/down), which the graph holds;
///   bf16-params makes none (the weights are bf16 already: the graph saves the parameters themselves).
/// Tensor parallelism (pipeline.tensor_parallel tp > 1; model/tensor_parallel.hpp, Megatron-LM's layers without
/// sequence parallelism): what lives inside a tp region is this rank's share, x / tp: q, k, v (and k', v'), the
/// attention output (proj's / o's input), the logsumexp (heads / tp), the ffn intermediates (fc2's input and the
/// GELU input; gate, SiLU, up and their product: f / tp) and the weight copies. What lies outside stays whole on
/// every tp rank: the residual stream and the norms' inputs, outputs and statistics, the projections' inputs
/// (qkv's and fc1's, q/k/v's and gate/up's: the norm outputs f hands on), the dropout masks, the rotary tables.
/// For gpt2 under bf16-params at f = 4h (bf16 adds the weight copies) that is t h (12 + 24 / tp) bytes plus
/// 16 t + 4 t n / tp: Korthikanti et al. (arXiv 2205.05198 §4.2, Table 2, "tensor parallel"; their t is our tp,
/// their s b our t) count s b h (10 + 24 / tp + 5 a s / (h tp)); their 24 / tp
/// is ours term by term (q, k, v, attention output 8; GELU input and output 16); they keep the two LayerNorm
/// inputs in bf16 (4, ours 8 in fp32) but count the dropout masks (2, ours 0 without dropout), and flash
/// attention keeps no a s / h term.
/// Sequence parallelism (tp > 1 and pipeline.sequence_parallel, the default) divides what lies between the tp
/// regions by tp: the residual stream and the norms' inputs, outputs and statistics, the dropout masks, the head's
/// final norm and what crosses a stage boundary (boundary_bytes, p2p_bytes) cover this rank's seq_len / tp
/// positions. The column-parallel products' inputs are the all-gathered sequence, which autograd saves whole on
/// every rank (Korthikanti et al. §4.2.2 save them sharded and all-gather again in backward, which ppctl does not),
/// and the rotary tables stay whole. For gpt2 at bf16-params, f = 4h, with dropout: their s b h 34 / tp (Table 2,
/// "tensor + sequence parallel", flash attention) against ours t h (4 + 36 / tp) plus the statistics: the gathered
/// inputs 4 whole, and the fp32 norm inputs and the masks in the matmul type 8 + 4 where they count 4 + 2.
int64_t block_activation_bytes(const config::JobSpec& spec);

/// Bytes the embedding's graph saves per microbatch: the token ids (8 t, int64), gpt2's position
/// ids (8 s), and with dropout its mask (4 t h, fp32); at tp > 1 the vocabulary-parallel lookup's local ids and
/// row mask (12 t).
int64_t embedding_activation_bytes(const config::JobSpec& spec);

/// Bytes the head's graph saves per microbatch (v = vocab_size): the final norm's input and
/// statistics (gpt2: 4 t h + 8 t; llama: 8 t h + 4 t), the LM head's input (a t h), the
/// log-softmax of the fp32 logits that cross_entropy keeps (4 t v), the targets (8 t), and under
/// bf16 the LM head weight's bf16 copy (2 v h; none under bf16-params, whose weight is bf16).
/// At tp > 1 v is this rank's vocabulary rows v' = ceil(v / tp) (the largest shard): the vocabulary-parallel
/// cross-entropy keeps its softmax rows (4 t v') and the targets' local index and mask (9 t); the norm and the
/// LM head's input stay whole.
int64_t head_activation_bytes(const config::JobSpec& spec);

/// What one (stage, microbatch) holds between its actions, in bytes (runtime/executor.hpp).
struct StageActivationBytes {
  int64_t kept = 0;   ///< from F until its B (or I): the whole graph with recompute none; the
                      ///< stage input (full) or every segment's input (blocks), and the targets
  int64_t graph = 0;  ///< from I until W (split backward): each matrix product's saved input,
                      ///< bf16 weight copy (bf16 only) and output gradient; a segment fed by token ids (no I)
                      ///< keeps its whole graph, its output's gradient and, when recomputed, its output
};

/// The bytes of `stage` of the spec's model per microbatch under train.recompute (none, full, or
/// blocks with recompute_every): see StageActivationBytes. The received input and the output are
/// not included (they are communication buffers) except as the kept input of full / blocks.
StageActivationBytes stage_activation_bytes(const config::JobSpec& spec, const StageLayout& stage);

/// What one action of a stage allocates for its own duration on top of what is held between actions
/// (StageActivationBytes, the communication buffers), at the action's high-water mark, per
/// microbatch, in bytes: the part of runtime::StepResult::peak_bytes no between-actions count sees.
/// From what the ops of model/gpt2.cpp, model/llama.cpp and model/stage.cpp allocate and free
/// (t tokens, h hidden, f = ffn_hidden_of, v = vocab_size, a = matmul element bytes as above, g =
/// bytes of a weight's gradient as autograd hands it to .grad: 4 with fp32 weights, 2 under
/// bf16-params, whose bf16 gradient AccumulateGrad adds into the fp32 buffer, optim/grad_buffers.hpp):
/// - F with the graph kept: the head's fp32 logits (4 t v; + 2 t v of bf16 logits under bf16 and
///   bf16-params), alive next to the log-softmax cross_entropy keeps; a block's: the proj / fc2
///   (o / down) output before its residual add, a t h.
/// - F without a graph (train.recompute full or blocks: no_grad): the head's logits and their
///   log-softmax (8 t v, + 2 t v under bf16 and bf16-params); a block's: its input and the residual
///   stream after attention (8 t h) and the MLP's fc1 output and GELU (gpt2: 2 a t f) or gate, up
///   and SiLU (llama: 3 a t f).
/// - B: the head's backward holds the log-softmax's and the logits' gradients together (8 t v); a
///   block's MLP backward the gradients of fc2's input and of fc1's output (2 a t f), or fc2's input
///   gradient and its weight gradient before it is added into .grad (a t f + g h f), the larger.
///   Recomputing (full: the whole stage; blocks: its largest segment) adds the rebuilt graph and its
///   output (plan::boundary_bytes) on top: that is what the backward then frees.
/// - I: as B, and the graph is retained until I ends, so the gradients arriving at every matrix
///   product, kept for W, add up on top (gpt2: a t (5 h + f) per block; llama: a t (3 h + 2 kv + 2 f);
///   the head: a t v), less the attention products' of the block whose MLP backward is the high-water
///   mark (gpt2 a t 4 h; llama a t (2 h + 2 kv): not arrived yet). Under blocks, I splits one segment at a time (last first), so the segments
///   already split hold their deferred graphs (StageActivationBytes::graph's terms) meanwhile; the
///   embedding's segment has no I and only rebuilds its graph, after the others are split. A
///   stage fed by token ids (no I, recompute none or full): 0, and W is its whole backward (the B term).
/// - W: one matrix's weight gradient before it is added into .grad (g h f, or g v h with the head).
/// - At tp > 1 (this rank's f / tp columns and v' = ceil(v / tp) vocabulary rows in every term above): each g
///   all-reduce (after proj / o and fc2 / down, and the embedding's) clones its [t, h] input while it runs
///   (model/tensor_parallel.cpp): F adds a t h to a block's output, the vocabulary-parallel embedding holds its
///   lookup, the masked lookup and the clone (3 x [t, h] in the weights' type), the loss its shifted logits
///   (4 t v') beside the logits; B's high-water mark may be f's backward all-reduce instead, the fp32 gradient of
///   a norm's output and its clone (8 t h). The loss's all-reduces ([t, tokens] and [2, tokens]) are left out.
/// Not modelled: LibTorch's per-op workspaces (SDPA's CPU kernel: kilobytes here), the bias gradients, NCCL's
/// own buffers.
struct StageTransientBytes {
  int64_t forward = 0;   ///< during F
  int64_t backward = 0;  ///< during B
  int64_t input = 0;     ///< during I
  int64_t weight = 0;    ///< during W
};
StageTransientBytes stage_transient_bytes(const config::JobSpec& spec, const StageLayout& stage);

/// Static bytes of parameters: the weights, their gradients and the optimizer's state (AdamW's two
/// fp32 moments, and under bf16-params the fp32 main parameters), of the parameters one rank holds (with tensor
/// parallelism one tp rank's: plan::stage_parameters). Megatron-Core's table
/// (docs/source/api-guide/dist_optimizer.md of Megatron-LM; d = the data-parallel size):
/// - fp32 and bf16 (autocast over fp32 weights, which are the main parameters: no extra copy outside
///   the forward's graph): 4 (weights) + 4 (gradients) + 8 (moments) = 16 B per parameter, Megatron's
///   "fp32 param, fp32 grads"; with the distributed optimizer 8 + 8/d.
/// - bf16-params: 2 (bf16 weights) + 4 (fp32 gradients, Megatron's main_grad) + 12 (fp32 main
///   parameters and moments, held by the optimizer) = 18 B per parameter, Megatron's "bf16 param,
///   fp32 grads"; with the distributed optimizer 6 + 12/d.
struct StaticBytes {
  int64_t parameters = 0;  ///< the weights
  int64_t gradients = 0;
  int64_t optimizer = 0;   ///< AdamW's moments, and the fp32 main parameters under bf16-params
  int64_t total() const { return parameters + gradients + optimizer; }
};

/// The StaticBytes of one parameter under `precision`, unsharded: {4, 4, 8}, or {2, 4, 12} under bf16-params.
StaticBytes bytes_per_parameter(config::Precision precision);

/// Static bytes of `parameters` parameters under `precision` (bytes_per_parameter each). With the
/// distributed optimizer (optimizer.distributed, `optimizer_shards` = dp > 1) the optimizer's state of
/// all but `unsharded` of the parameters (the tied embedding's copies, kept whole) is split over the
/// dp replicas: o x unsharded + o x ceil((parameters - unsharded) / dp) B with o = 8 (12 under
/// bf16-params), Megatron-Core's 8 + 8/d (6 + 12/d) per parameter (a bucket's padding to a multiple
/// of dp, under dp elements, is left out).
StaticBytes static_bytes(int64_t parameters, config::Precision precision, int64_t optimizer_shards = 1,
                         int64_t unsharded = 0);

}  // namespace ppctl::plan
