// Per-microbatch activation bytes of blocks, embedding, head and stages, and static bytes (see
// memory_estimate.hpp for the formulas and their source).
#include "plan/memory_estimate.hpp"

namespace ppctl::plan {
namespace {

/// Tokens per microbatch: t = micro_batch_size x seq_len.
int64_t tokens_of(const config::JobSpec& spec) { return spec.pipeline.micro_batch_size * spec.model.seq_len; }

/// Bytes of one element of autocast's matrix products: a = 2 under bf16, 4 under fp32.
int64_t matmul_element_bytes(const config::JobSpec& spec) {
  return spec.runtime.precision == config::Precision::Bf16 ? 2 : 4;
}

/// Bytes of the bf16 weight copies autocast keeps in the graph for `weights` matrix weights (0 in fp32).
int64_t weight_copy_bytes(const config::JobSpec& spec, int64_t weights) {
  return spec.runtime.precision == config::Precision::Bf16 ? 2 * weights : 0;
}

/// Two dropout sites per block, each keeping its mask (a t h; x * mask saves only the mask, as x's
/// factor does not require a gradient).
int64_t block_dropout_bytes(const config::JobSpec& spec) {
  return spec.model.dropout > 0 ? 2 * matmul_element_bytes(spec) * tokens_of(spec) * spec.model.hidden : 0;
}

int64_t gpt2_block_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t t = tokens_of(spec), h = m.hidden, f = config::ffn_hidden_of(m);
  const int64_t a = matmul_element_bytes(spec);
  return 8 * t * h + a * t * (6 * h + 2 * f) + 16 * t + 4 * t * m.heads +
         weight_copy_bytes(spec, 4 * h * h + 2 * h * f);
}

int64_t llama_block_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t t = tokens_of(spec), h = m.hidden, f = config::ffn_hidden_of(m);
  const int64_t head_dim = h / m.heads;
  const int64_t kv = config::kv_heads_of(m) * head_dim;
  const int64_t a = matmul_element_bytes(spec);
  const bool bf16 = spec.runtime.precision == config::Precision::Bf16;
  const int64_t attention_kv = config::kv_heads_of(m) < m.heads ? h : kv;  // k', v' as SDPA gets them
  const int64_t norms = 16 * t * h + 8 * t;
  const int64_t projection_inputs = bf16 ? 2 * t * 5 * h : 4 * t * 2 * h;
  const int64_t matmuls = a * t * (2 * h + 2 * attention_kv + 4 * f);
  const int64_t rotary = 8 * m.seq_len * head_dim;
  return norms + projection_inputs + matmuls + 4 * t * m.heads + rotary +
         weight_copy_bytes(spec, 2 * h * h + 2 * h * kv + 3 * h * f);
}

}  // namespace

int64_t boundary_bytes(const config::JobSpec& spec) { return 4 * tokens_of(spec) * spec.model.hidden; }

int64_t p2p_bytes(const config::JobSpec& spec) {
  return config::p2p_element_bytes(spec.runtime) * tokens_of(spec) * spec.model.hidden;
}

int64_t block_activation_bytes(const config::JobSpec& spec) {
  const int64_t bytes = spec.model.arch == config::Arch::Llama ? llama_block_bytes(spec) : gpt2_block_bytes(spec);
  return bytes + block_dropout_bytes(spec);
}

int64_t embedding_activation_bytes(const config::JobSpec& spec) {
  const int64_t t = tokens_of(spec);
  int64_t bytes = 8 * t;
  if (spec.model.arch == config::Arch::Gpt2) bytes += 8 * spec.model.seq_len;
  if (spec.model.dropout > 0) bytes += boundary_bytes(spec);
  return bytes;
}

int64_t head_activation_bytes(const config::JobSpec& spec) {
  const auto& m = spec.model;
  const int64_t t = tokens_of(spec);
  const int64_t norm = m.arch == config::Arch::Llama ? 8 * t * m.hidden + 4 * t : 4 * t * m.hidden + 8 * t;
  return norm + matmul_element_bytes(spec) * t * m.hidden + 4 * t * m.vocab_size + 8 * t +
         weight_copy_bytes(spec, m.vocab_size * m.hidden);
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
  int64_t segments = 1;
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
      segments = runs + (stage.has_embedding ? 1 : 0) + (stage.has_head ? 1 : 0);
      break;
    }
  }
  // I keeps every segment's graph with its output and that output's gradient: hidden-sized, except
  // the scalar loss ending the last stage. Without recomputation the one output is the tensor F
  // sent (a communication buffer); recomputed outputs are new tensors.
  const int64_t hidden_outputs = segments - (stage.has_head ? 1 : 0);
  const int64_t per_output = spec.train.recompute == config::Recompute::None ? 1 : 2;
  bytes.graph = whole + hidden_outputs * per_output * boundary;
  return bytes;
}

StaticBytes static_bytes(int64_t parameters) { return {4 * parameters, 4 * parameters, 8 * parameters}; }

}  // namespace ppctl::plan
