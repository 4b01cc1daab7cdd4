// Per-microbatch activation bytes of blocks, embedding, head and stages, and static bytes (see
// memory_estimate.hpp for the formulas and their source).
#include "plan/memory_estimate.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "plan/tensor_parallel.hpp"

namespace ppctl::plan {
namespace {

/// Tokens per microbatch: t = micro_batch_size x seq_len.
int64_t tokens_of(const config::JobSpec& spec) { return spec.pipeline.micro_batch_size * spec.model.seq_len; }

/// The tensor-parallel size t (pipeline.tensor_parallel; 1 in a spec built by hand without it).
int64_t tp_of(const config::JobSpec& spec) { return std::max<int64_t>(spec.pipeline.tensor_parallel, 1); }

/// Whether sequence parallelism splits the residual stream over the tp group: tp > 1 and
/// pipeline.sequence_parallel (model/tensor_parallel.hpp's splits_sequence).
bool splits_sequence(const config::JobSpec& spec) { return tp_of(spec) > 1 && spec.pipeline.sequence_parallel; }

/// Tokens per microbatch of what lies between the tensor-parallel regions (the residual stream, the norms, the
/// dropout masks, what crosses a stage boundary): this rank's micro_batch_size x seq_len / tp positions under
/// sequence parallelism (the rules make tp divide seq_len), else all of them.
int64_t sequence_tokens_of(const config::JobSpec& spec) {
  return splits_sequence(spec) ? tokens_of(spec) / tp_of(spec) : tokens_of(spec);
}

/// A tensor-parallel rank's share of `x` elements of a split width (heads, kv heads, ffn columns): x / tp, rounded up
/// (exact where the rules make t divide it; x at tp = 1).
int64_t per_rank(const config::JobSpec& spec, int64_t x) { return (x + tp_of(spec) - 1) / tp_of(spec); }

/// v': the rows of the largest vocabulary shard, ceil(vocab / tp) (vocab at tp = 1).
int64_t vocab_per_rank(const config::JobSpec& spec) { return vocab_shard_rows(spec.model.vocab_size, tp_of(spec)); }

/// One g all-reduce's clone of its [tokens, h] input while it runs (model/tensor_parallel.cpp's `summed`): a t h
/// at tp > 1, none at tp = 1 (no all-reduce).
int64_t reduce_clone_bytes(const config::JobSpec& spec, int64_t element_bytes) {
  return tp_of(spec) > 1 ? element_bytes * tokens_of(spec) * spec.model.hidden : 0;
}

/// Bytes of one element of autocast's matrix products: a = 2 under bf16, 4 under fp32.
int64_t matmul_element_bytes(const config::JobSpec& spec) {
  return config::computes_in_bf16(spec.runtime.precision) ? 2 : 4;
}

/// Bytes of the bf16 weight copies autocast keeps in the graph for `weights` matrix weights: only under
/// bf16, whose weights are fp32 (none in fp32; none under bf16-params, whose weights are bf16 already).
int64_t weight_copy_bytes(const config::JobSpec& spec, int64_t weights) {
  return spec.runtime.precision == config::Precision::Bf16 ? 2 * weights : 0;
}

/// g: bytes of one element of a weight's gradient before it is added into .grad, the weight's own
/// type: 4 (fp32 weights; under bf16 autocast's cast back to fp32), 2 under bf16-params.
int64_t weight_gradient_element_bytes(const config::JobSpec& spec) {
  return bytes_per_parameter(spec.runtime.precision).parameters;
}

/// Two dropout sites per block, each keeping its mask (a t h; x * mask saves only the mask, as x's
/// factor does not require a gradient).
int64_t block_dropout_bytes(const config::JobSpec& spec) {
  return spec.model.dropout > 0 ? 2 * matmul_element_bytes(spec) * sequence_tokens_of(spec) * spec.model.hidden : 0;
}

int64_t gpt2_block_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t t = tokens_of(spec), h = m.hidden, f = config::ffn_hidden_of(m);
  const int64_t a = matmul_element_bytes(spec), ts = sequence_tokens_of(spec);
  // The LayerNorms' inputs and statistics lie on this rank's positions (all of them without sequence parallelism);
  // qkv's and fc1's inputs (the norms' outputs, gathered whole under sequence parallelism) are whole on every tp
  // rank; q, k, v, the attention output (proj's input), fc2's input and the GELU input are this rank's heads' or
  // columns' share.
  return 8 * ts * h + a * t * (2 * h + per_rank(spec, 4 * h) + per_rank(spec, 2 * f)) + 16 * ts +
         4 * t * per_rank(spec, m.heads) + weight_copy_bytes(spec, per_rank(spec, 4 * h * h + 2 * h * f));
}

int64_t llama_block_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t t = tokens_of(spec), h = m.hidden, f = config::ffn_hidden_of(m);
  const int64_t head_dim = config::head_dim_of(m);
  const int64_t kv = config::kv_heads_of(m) * head_dim;
  const int64_t a = matmul_element_bytes(spec);
  const bool bf16 = config::computes_in_bf16(spec.runtime.precision);
  const int64_t attention_kv = config::kv_heads_of(m) < m.heads ? h : kv;  // k', v' as SDPA gets them
  const int64_t ts = sequence_tokens_of(spec);
  const int64_t norms = 16 * ts * h + 8 * ts;  // on this rank's positions under sequence parallelism
  const int64_t projection_inputs = bf16 ? 2 * t * 5 * h : 4 * t * 2 * h;
  // The norms and the projections' inputs are whole on every tp rank; the rest is this rank's heads and columns.
  const int64_t matmuls = a * t * per_rank(spec, 2 * h + 2 * attention_kv + 4 * f);
  const int64_t rotary = 8 * m.seq_len * head_dim;
  return norms + projection_inputs + matmuls + 4 * t * per_rank(spec, m.heads) + rotary +
         weight_copy_bytes(spec, per_rank(spec, 2 * h * h + 2 * h * kv + 3 * h * f));
}

/// The gradients arriving at a block's matrix products, which I keeps for W (its graph is retained
/// until I ends): gpt2 qkv (3h), proj (h), fc1 (f), fc2 (h); llama q, o, down (h each), k, v (kv
/// each), gate, up (f each). At tp > 1 the row-parallel products' (proj, fc2; o, down) are whole [t, h] (the
/// gradient of g's sum), the column-parallel ones this rank's share.
int64_t block_output_gradient_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t t = tokens_of(spec), h = m.hidden, f = config::ffn_hidden_of(m);
  const int64_t a = matmul_element_bytes(spec);
  if (config::llama_family(m.arch))
    return a * t * (2 * h + per_rank(spec, h + 2 * config::kv_heads_of(m) * config::head_dim_of(m) + 2 * f));
  return a * t * (2 * h + per_rank(spec, 3 * h + f));
}

/// From I until W (runtime/split_backward.hpp): each matrix product keeps its saved input and its
/// weight's bf16 copy (bf16 only), and the gradient of its output; norms and everything else are done at I.
int64_t gpt2_block_deferred_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t t = tokens_of(spec), h = m.hidden, f = config::ffn_hidden_of(m);
  const int64_t a = matmul_element_bytes(spec);
  // Inputs of qkv, fc1 (h each, whole) and proj (h), fc2 (f) (this rank's share); the output gradients.
  return a * t * (2 * h + per_rank(spec, h + f)) + block_output_gradient_bytes(spec) +
         weight_copy_bytes(spec, per_rank(spec, 4 * h * h + 2 * h * f));
}

int64_t llama_block_deferred_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t t = tokens_of(spec), h = m.hidden, f = config::ffn_hidden_of(m);
  const int64_t kv = config::kv_heads_of(m) * config::head_dim_of(m);
  const int64_t a = matmul_element_bytes(spec);
  // Inputs: the two norm outputs q/k/v and gate/up share (fp32), or one bf16 cast per projection (whole);
  // o's (h) and down's (f) (this rank's share). Then the output gradients.
  const int64_t projection_inputs = config::computes_in_bf16(spec.runtime.precision) ? 2 * t * 5 * h : 4 * t * 2 * h;
  return projection_inputs + a * t * per_rank(spec, h + f) + block_output_gradient_bytes(spec) +
         weight_copy_bytes(spec, per_rank(spec, 2 * h * h + 2 * h * kv + 3 * h * f));
}

/// The LM head's product from I until W: its input, the logits' gradient, the weight's bf16 copy (bf16 only).
int64_t head_deferred_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t v = vocab_per_rank(spec);
  return matmul_element_bytes(spec) * tokens_of(spec) * (m.hidden + v) + weight_copy_bytes(spec, v * m.hidden);
}

/// A block's forward without a graph (no_grad): its input, the residual stream after attention, and
/// the MLP's widest intermediates (gpt2: fc1 output and GELU; llama: gate, up and SiLU; this rank's columns),
/// and at tp > 1 the down (fc2) all-reduce's clone.
int64_t block_forward_no_grad_bytes(const config::JobSpec& spec) {
  const int64_t t = tokens_of(spec), h = spec.model.hidden, f = config::ffn_hidden_of(spec.model);
  const int64_t widest = config::llama_family(spec.model.arch) ? 3 : 2;
  const int64_t a = matmul_element_bytes(spec);
  return 8 * sequence_tokens_of(spec) * h + widest * a * t * per_rank(spec, f) + reduce_clone_bytes(spec, a);
}

/// The head's logits in fp32 (and their bf16 original under bf16 and bf16-params): this rank's vocabulary rows.
int64_t logits_bytes(const config::JobSpec& spec) {
  const int64_t tv = tokens_of(spec) * vocab_per_rank(spec);
  return 4 * tv + (config::computes_in_bf16(spec.runtime.precision) ? 2 * tv : 0);
}

/// A block's backward at its high-water mark: the MLP's two f-wide gradients in GELU's (SiLU's)
/// backward, or fc2's (down's) input gradient next to its weight gradient before it is added into .grad (this
/// rank's columns), or at tp > 1 f's backward all-reduce: the fp32 gradient of a norm's output and its clone (8 t h).
int64_t block_backward_bytes(const config::JobSpec& spec) {
  const int64_t t = tokens_of(spec), h = spec.model.hidden, f = per_rank(spec, config::ffn_hidden_of(spec.model));
  const int64_t a = matmul_element_bytes(spec);
  return std::max({2 * a * t * f, a * t * f + weight_gradient_element_bytes(spec) * h * f,
                   2 * reduce_clone_bytes(spec, 4)});
}

/// At tp > 1, what the vocabulary-parallel cross-entropy's forward holds beside the logits (model/tensor_parallel.cpp):
/// the shifted logits (4 t v') next to their exponentials (the saved softmax, in head_activation_bytes).
int64_t vocab_parallel_loss_bytes(const config::JobSpec& spec) {
  return tp_of(spec) > 1 ? 4 * tokens_of(spec) * vocab_per_rank(spec) : 0;
}

}  // namespace

int64_t boundary_bytes(const config::JobSpec& spec) { return 4 * sequence_tokens_of(spec) * spec.model.hidden; }

int64_t p2p_bytes(const config::JobSpec& spec) {
  return config::p2p_element_bytes(spec.runtime) * sequence_tokens_of(spec) * spec.model.hidden;
}

int64_t block_activation_bytes(const config::JobSpec& spec) {
  const int64_t bytes = config::llama_family(spec.model.arch) ? llama_block_bytes(spec) : gpt2_block_bytes(spec);
  return bytes + block_dropout_bytes(spec);
}

int64_t embedding_activation_bytes(const config::JobSpec& spec) {
  const int64_t t = tokens_of(spec);
  int64_t bytes = 8 * t;
  if (spec.model.arch == config::Arch::Gpt2) bytes += 8 * spec.model.seq_len;
  if (spec.model.dropout > 0) bytes += boundary_bytes(spec);
  if (tp_of(spec) > 1) bytes += 12 * t;  // the vocabulary-parallel lookup's local ids (int64) and row mask (fp32)
  return bytes;
}

int64_t head_activation_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t t = tokens_of(spec);
  const int64_t ts = sequence_tokens_of(spec);  // the final norm's positions; the LM head's input is gathered whole
  const int64_t norm = config::llama_family(m.arch) ? 8 * ts * m.hidden + 4 * ts : 4 * ts * m.hidden + 8 * ts;
  const int64_t v = vocab_per_rank(spec);
  // At tp > 1 the vocabulary-parallel loss saves its softmax rows (4 t v', in place of the log-softmax) and the
  // targets' local index (int64) and mask (bool): 9 t.
  return norm + matmul_element_bytes(spec) * t * m.hidden + 4 * t * v + 8 * t + (tp_of(spec) > 1 ? 9 * t : 0) +
         weight_copy_bytes(spec, v * m.hidden);
}

StageActivationBytes stage_activation_bytes(const config::JobSpec& spec, const StageLayout& stage) {
  const int64_t t = tokens_of(spec);
  const int64_t boundary = boundary_bytes(spec);
  const int64_t blocks = stage.layers.size();
  // The whole graph: what recompute none keeps, and what I rebuilds.
  const int64_t whole = (stage.has_embedding ? embedding_activation_bytes(spec) : 0) +
                        blocks * block_activation_bytes(spec) + (stage.has_head ? head_activation_bytes(spec) : 0);
  const int64_t targets = stage.has_head ? 8 * t : 0;
  const int64_t stage_input = stage.has_embedding ? 8 * t : boundary;  // token ids or hidden states
  StageActivationBytes bytes;
  switch (spec.train.recompute) {
    case config::Recompute::None:
      bytes.kept = whole;
      break;
    case config::Recompute::Full:
      bytes.kept = stage_input + targets;
      break;
    case config::Recompute::Blocks: {
      const int64_t runs = (blocks + spec.train.recompute_every - 1) / spec.train.recompute_every;
      // The embedding's input (token ids), each run of blocks' input, the head's input.
      bytes.kept = (stage.has_embedding ? 8 * t : 0) + runs * boundary +
                   (stage.has_head ? boundary : 0) + targets;
      break;
    }
  }
  // From I until W. A segment whose input is the token ids has no I: it keeps its whole graph, its
  // output's gradient and, when recomputed, the output (a new tensor; without recomputation the
  // output is the tensor F sent, a communication buffer). Every other segment keeps only its
  // matrix products' inputs and output gradients (runtime/split_backward.hpp).
  const bool whole_first = stage.has_embedding && spec.train.recompute != config::Recompute::Blocks;
  const int64_t per_output = spec.train.recompute == config::Recompute::None ? 1 : 2;
  const int64_t block_deferred =
      config::llama_family(spec.model.arch) ? llama_block_deferred_bytes(spec) : gpt2_block_deferred_bytes(spec);
  if (whole_first) {
    bytes.graph = whole + (stage.has_head ? 0 : per_output * boundary);
  } else {
    bytes.graph = blocks * block_deferred + (stage.has_head ? head_deferred_bytes(spec) : 0) +
                  (stage.has_embedding ? embedding_activation_bytes(spec) + 2 * boundary : 0);
  }
  return bytes;
}

StageTransientBytes stage_transient_bytes(const config::JobSpec& spec, const StageLayout& stage) {
  const auto& m = spec.model;
  // f and v: this tp rank's ffn columns and vocabulary rows (the whole at tp = 1).
  const int64_t t = tokens_of(spec), h = m.hidden, f = per_rank(spec, config::ffn_hidden_of(m));
  const int64_t v = vocab_per_rank(spec);
  const bool blocks = stage.layers.size() > 0;
  const bool graph = spec.train.recompute == config::Recompute::None;
  const int64_t a = matmul_element_bytes(spec);
  StageTransientBytes bytes;
  // F: with the graph, only what the kept graph does not hold; without, each part's intermediates. At tp > 1 a
  // row-parallel product's output is cloned by its all-reduce, and the vocabulary-parallel embedding holds its
  // lookup, the masked lookup and the all-reduce's clone (3 x [t, h] in the weights' type) at once.
  const int64_t embedding_lookup =
      stage.has_embedding ? 3 * reduce_clone_bytes(spec, weight_gradient_element_bytes(spec)) : 0;
  if (graph) {
    bytes.forward = std::max({blocks ? a * t * h + reduce_clone_bytes(spec, a) : 0,
                              stage.has_head ? logits_bytes(spec) + vocab_parallel_loss_bytes(spec) : 0,
                              embedding_lookup});
  } else {
    bytes.forward = std::max({blocks ? block_forward_no_grad_bytes(spec) : 0,
                              stage.has_head ? logits_bytes(spec) + 4 * t * v + vocab_parallel_loss_bytes(spec) : 0,
                              embedding_lookup});
  }
  const int64_t backward = std::max(blocks ? block_backward_bytes(spec) : 0, stage.has_head ? 8 * t * v : 0);
  // The graph a backward rebuilds before running (and frees as it goes), with its output.
  int64_t rebuilt = 0;
  const int64_t output = stage.has_head ? 0 : boundary_bytes(spec);
  const int64_t count = stage.layers.size();
  const int64_t embedding = stage.has_embedding ? embedding_activation_bytes(spec) : 0;
  const int64_t head = stage.has_head ? head_activation_bytes(spec) : 0;
  int64_t run = count;  // blocks whose gradients one I holds at once
  if (spec.train.recompute == config::Recompute::Full) {
    rebuilt = embedding + count * block_activation_bytes(spec) + head + output;
  } else if (spec.train.recompute == config::Recompute::Blocks) {
    run = std::min(count, spec.train.recompute_every);
    rebuilt = std::max(embedding + run * block_activation_bytes(spec) + (count > 0 ? boundary_bytes(spec) : 0), head);
  }
  bytes.backward = rebuilt + backward;
  // I retains its graph until it ends (runtime/split_backward.cpp), holding every matrix product's
  // arriving gradient on top. A segment fed by token ids has no I: W runs its whole backward.
  const bool whole_first = stage.has_embedding && spec.train.recompute != config::Recompute::Blocks;
  const int64_t gradients = run * block_output_gradient_bytes(spec) + (stage.has_head ? a * t * v : 0);
  // Under blocks, I splits one segment at a time, last first: the segments already split hold their
  // deferred graphs (the head's segment's, and run blocks' each) while the next one is rebuilt. The
  // embedding's segment (token ids: no I) only rebuilds its graph, after all the others are split.
  // At the backward temporaries' high-water mark (the first block's MLP, the last one I reaches) that
  // block's attention products have not had their gradients yet: gpt2 qkv and proj (4 h), llama q, k,
  // v, o (2 h + 2 kv); at tp > 1 proj's and o's whole (h), the others this rank's share.
  const int64_t kv = config::kv_heads_of(m) * config::head_dim_of(m);
  const int64_t pending =
      blocks ? a * t * (h + (config::llama_family(m.arch) ? per_rank(spec, h + 2 * kv) : per_rank(spec, 3 * h))) : 0;
  bytes.input = whole_first ? 0 : rebuilt + gradients + backward - pending;
  if (spec.train.recompute == config::Recompute::Blocks) {
    const int64_t deferred =
        config::llama_family(spec.model.arch) ? llama_block_deferred_bytes(spec) : gpt2_block_deferred_bytes(spec);
    const int64_t head_split = stage.has_head ? head_deferred_bytes(spec) : 0;
    const int64_t before_split = std::max<int64_t>(count - (stage.has_embedding ? 2 : 1) * run, 0);
    bytes.input += before_split * deferred + head_split;
    if (stage.has_embedding) bytes.input = std::max(bytes.input, rebuilt + (count - run) * deferred + head_split);
  }
  bytes.weight = whole_first ? backward
                              : weight_gradient_element_bytes(spec) * std::max(blocks ? h * f : 0, stage.has_head ? v * h : 0);
  return bytes;
}

StaticBytes bytes_per_parameter(config::Precision precision) {
  if (precision == config::Precision::Bf16Params) return {2, 4, 12};
  return {4, 4, 8};
}

StaticBytes static_bytes(int64_t parameters, config::Precision precision, int64_t optimizer_shards, int64_t unsharded) {
  PPCTL_ASSERT(optimizer_shards >= 1 && unsharded >= 0 && unsharded <= parameters, "static_bytes: bad arguments");
  const auto each = bytes_per_parameter(precision);
  const int64_t sharded = parameters - unsharded;
  return {each.parameters * parameters, each.gradients * parameters,
          each.optimizer * (unsharded + (sharded + optimizer_shards - 1) / optimizer_shards)};
}

}  // namespace ppctl::plan
