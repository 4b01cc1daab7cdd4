// What every decoder block shares, whatever the architecture: the interface a pipeline stage runs
// blocks through, the seeds of partition-independent initialisation, and seeded dropout.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "model/tensor_parallel.hpp"

namespace ppctl::model {

/// Identifies one forward pass for dropout: masks depend only on (seed, step, microbatch, layer,
/// site), so a pipelined run and an unpipelined one draw identical masks.
struct DropoutContext {
  bool training = true;
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t microbatch = 0;  ///< global microbatch index in the step; runtime::Executor::run_step
                           ///< takes it as the base (replica dp's offset dp x m) and adds its own
};

/// What one microbatch's forward needs besides its activations, the same on every pipeline stage (Megatron-Core's
/// PackedSeqParams plays this part): the dropout identity, and for packed conversations each token's position
/// in its conversation and the block-diagonal causal mask that keeps attention inside one conversation; the
/// rotary tables of those positions, computed once per microbatch and stage (StageModuleImpl::context), not in
/// every block. Converts implicitly from a DropoutContext: positions 0 .. seq_len - 1 and plain causal
/// attention, the blocks computing the rotary tables themselves.
struct MicrobatchContext {
  MicrobatchContext() = default;
  MicrobatchContext(const DropoutContext& dropout) : dropout(dropout) {}  // NOLINT(google-explicit-constructor)
  DropoutContext dropout;
  torch::Tensor positions;       ///< [batch, seq_len] int64: the position ids; undefined = 0 .. seq_len - 1
  torch::Tensor attention_mask;  ///< [batch, 1, seq_len, seq_len] bool, true where a query may attend a key;
                                 ///< undefined = causal over the whole sequence (or cu_seqlens)
  /// Packed conversations on CUDA in bf16: the boundaries as a variable-length attention kernel takes them
  /// (flash attention's cu_seqlens: int32 [segments + 1], the running sums of the segments' lengths over the
  /// batch's rows laid end to end, each row's padding a segment of its own) and the longest segment; then no
  /// attention_mask is built.
  torch::Tensor cu_seqlens;
  int64_t max_seqlen = 0;
  torch::Tensor rope_cos, rope_sin;  ///< llama family: [seq_len, head_dim] or, with positions, [batch, 1, seq_len,
                                     ///< head_dim] fp32 (model/rope.hpp's tables at the positions); may be undefined
};

/// The block-diagonal causal mask of `documents` [batch, seq_len] int64 (the conversation each position belongs
/// to; padding has a number of its own): [batch, 1, seq_len, seq_len] bool, true where key j <= query i and both
/// lie in the same document. Every query keeps at least itself, so no softmax row is empty.
torch::Tensor block_causal_mask(const torch::Tensor& documents);

/// The cu_seqlens of `documents` [batch, seq_len] int64 on the CPU (MicrobatchContext::cu_seqlens) and the longest
/// segment: a segment ends where the document number changes or a row ends.
std::pair<torch::Tensor, int64_t> segment_offsets(const torch::Tensor& documents);

/// Scaled dot-product attention of q [batch, heads, seq, head_dim] over k, v of the same shape: causal; with
/// `context`'s attention mask (packed conversations) SDPA over that mask; with its cu_seqlens, LibTorch's
/// variable-length flash attention kernel (at::_flash_attention_forward, causal within each segment; q, k, v in
/// bf16), which never forms an s x s mask.
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const MicrobatchContext& context);

/// Seed of the generator that initialises one part of the model. `part` is -1 for the embedding,
/// -2 for the final norm and LM head, or the global block index: weights never depend on the
/// partition into stages.
uint64_t init_seed(uint64_t seed, int64_t part);

/// Standard deviation of the N(0, std) initialisation of weight matrices and embeddings (GPT-2).
constexpr double kInitStd = 0.02;

/// kInitStd / sqrt(2 x layers): the residual output projections' std (GPT-2 paper §2.3), which keeps
/// the residual stream's variance independent of depth.
double residual_init_std(int64_t layers);

/// The one factory of the blocks' and the LM head's linear layers, [in] -> [out] (weight [out, in], bias [out]
/// when `bias`), for every architecture family: `style` says how tensor parallelism over `tp` splits it
/// (model/tensor_parallel.hpp; `parts` fused components for a column split such as GPT-2's qkv); with t = 1
/// every style is a plain linear layer.
ParallelLinear make_linear(int64_t in, int64_t out, bool bias, ParallelStyle style = ParallelStyle::Replicated,
                           const TensorParallel& tp = {}, int64_t parts = 1);

/// Fills `linear`'s weight with its shard of an [out, in] N(0, std) draw from `gen` and zeroes its bias when it
/// has one.
void init_linear(ParallelLinear& linear, at::Generator& gen, double std);

/// Inverted dropout of `x` with probability `p` whose mask comes from a generator keyed by (`ctx`,
/// `layer`, `site`) — not from the global RNG — so that every partition of the model, and every
/// recomputation, draws the same mask. `layer` is -1 for the embedding, else the global block index;
/// `site` numbers the dropouts within it. Returns `x` itself when not training or p is 0. With sequence
/// parallelism over `tp`, x [batch, s / t, hidden] is this rank's part of the sequence and its mask the same part
/// of the whole sequence's mask, so a run's masks do not depend on t.
torch::Tensor seeded_dropout(const torch::Tensor& x, double p, const DropoutContext& ctx, int64_t layer,
                             int64_t site, const TensorParallel& tp = {});

/// One transformer block of some architecture, built for its global layer index. Input and output
/// [batch, seq_len, hidden], float (fp32 residual stream; bf16 inside under autocast).
class DecoderBlock : public torch::nn::Module {
 public:
  ~DecoderBlock() override = default;
  virtual torch::Tensor forward(const torch::Tensor& x, const MicrobatchContext& context) = 0;
};

}  // namespace ppctl::model
