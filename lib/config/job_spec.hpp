// The job spec as plain structs: what `ppctl train` and `ppctl plan` read from YAML. No torch here.
// Every field: meaning, unit, default, allowed range. docs/spec-reference.md is generated from the schema.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppctl::config {

/// Pipeline schedule family. The generators live in schedule/.
enum class ScheduleKind {
  GPipe,            ///< `gpipe`: all forwards, then all backwards (Huang et al., GPipe, arXiv 1811.06965)
  OneFOneB,         ///< `1f1b`: PipeDream-Flush / Megatron 1F1B: warmup, steady 1F1B, cooldown (arXiv 2104.04473 §2.2)
  Interleaved1F1B,  ///< `interleaved-1f1b`: v virtual stages per rank, stage k on rank k mod p (arXiv 2104.04473 §2.2)
  ZBH1,             ///< `zb-h1`: 1F1B with backward split into I and W, W filling bubbles (Zero Bubble, arXiv 2401.10241 §3)
  ZBV,              ///< `zbv`: two stages per rank in a V placement, split backward (arXiv 2401.10241 §6)
  ZBAuto,           ///< `zb-auto`: 1F1B's order of F and I, each W placed from costs (pipeline.zb_auto), after
                    ///< Zero Bubble's automatic scheduler (arXiv 2401.10241 §3); schedule/zb_auto.hpp
  Custom,           ///< `custom`: per-rank action lists read from pipeline.schedule_file (CSV)
};

/// Learning-rate schedule over optimizer steps (after the linear warmup).
enum class LrSchedule {
  Constant,  ///< `constant`: lr after warmup
  Cosine,    ///< `cosine`: cosine decay from lr to min_lr over the steps after warmup
  Linear,    ///< `linear`: linear decay from lr to min_lr over the steps after warmup
};

/// What every rank does when the loss or a gradient is not finite (NaN or infinite).
enum class NonFinitePolicy {
  Stop,  ///< `stop`: end the job with an error naming the stage(s) and the step
  Skip,  ///< `skip`: skip the optimizer step (gradients discarded) and go on
};

/// What a job does when SIGUSR1, SIGUSR2, SIGTERM, SIGINT or SIGHUP reaches it (a cluster's warning
/// before a time limit or a preemption, a Ctrl-C): every rank agrees on the next step boundary and stops there.
enum class SignalPolicy {
  Checkpoint,  ///< `checkpoint`: write a checkpoint at that step (checkpoint.dir), then exit 75, resumable
  Stop,        ///< `stop`: stop at that step without writing one; exit 128 + the signal
};

/// Activation recomputation (trading compute for memory), per stage.
enum class Recompute {
  None,    ///< `none`: keep every activation from forward to backward
  Full,    ///< `full`: keep only each stage's input per microbatch; recompute the forward at backward
  Blocks,  ///< `blocks`: keep the input of every recompute_every-th block; recompute the blocks between
};

/// Where each worker's stage lives.
enum class Device { Cpu, Cuda };

/// Arithmetic of the forward (and so of the backward's matrix products) and the type of the weights.
/// Gradients and the optimizer state are fp32 in all three.
enum class Precision {
  Fp32,  ///< `fp32`: everything in float32
  Bf16,  ///< `bf16`: mixed precision: autocast to bfloat16 (matrix products, attention), fp32 master
         ///< weights and gradient accumulation, fp32 logits and loss (as torch.autocast)
  Bf16Params,  ///< `bf16-params`: the same autocast arithmetic over bf16 weights (what the stages compute
               ///< with and what they keep), fp32 gradients accumulated into buffers beside them
               ///< (Megatron-Core's main_grad) and fp32 main parameters held by the optimizer only
               ///< (Megatron's --bf16 with its distributed optimizer: 6 + 12/dp bytes per parameter)
};

/// Element type of the activations and gradients sent between stages on different ranks
/// (runtime.p2p_dtype); resolved by p2p_dtype_of.
enum class P2pDtype {
  Auto,  ///< `auto`: bf16 under runtime.precision bf16 or bf16-params, fp32 under fp32
  Fp32,  ///< `fp32`: float32, as the stage computes them (4 bytes per element)
  Bf16,  ///< `bf16`: cast to bfloat16 before the send, back to float32 after the receive (2 bytes per
         ///< element); only with runtime.precision bf16 or bf16-params
};

/// Communication backend; Auto = gloo on cpu, nccl on cuda.
enum class Backend { Auto, Gloo, Nccl };

/// How the local launcher places its workers on the CPUs this process may use (its affinity mask).
enum class CpuBinding {
  Cores,  ///< `cores`: worker r runs on its own runtime.threads_per_worker CPUs, r * T to r * T + T - 1 of
          ///< the mask (when they fit), as torchrun's --numa-binding does per NUMA node
  None,   ///< `none`: workers inherit the whole mask; the kernel places them
};

/// How a training corpus is stored (data.format; data/token_source.hpp reads each).
enum class DataFormat {
  Text,      ///< `text`: raw bytes of text files, one token per byte (vocabulary 256)
  Tokens,    ///< `tokens`: one flat file of little-endian token ids of data.dtype (nanoGPT's train.bin)
  Megatron,  ///< `megatron`: a Megatron-LM indexed dataset PREFIX.bin + PREFIX.idx, named by PREFIX
};

/// What packing does with a conversation longer than model.seq_len (data.overlong; data/packing.hpp).
enum class Overlong {
  Error,     ///< `error` (default): refuse the dataset, naming the conversation
  Drop,      ///< `drop`: leave it out (counted in the log and the plan)
  Truncate,  ///< `truncate`: keep its first seq_len tokens (counted)
};

/// Element type of a `tokens` file (data.dtype). Megatron datasets name theirs in the .idx.
enum class TokenDType { Uint16, Uint32, Int32 };

/// GPT decoder shape. Layers are transformer blocks; the embedding and the LM head are extra.
/// Decoder architecture (model/gpt2.hpp, model/llama.hpp). qwen2, qwen3 and mistral are Llama blocks
/// with the differences of their Hugging Face classes (llama_family).
enum class Arch {
  Gpt2,     ///< `gpt2`: GPT-2 (Radford et al. 2019): LayerNorm, learned positions, GELU MLP, biases
  Llama,    ///< `llama`: Llama (Touvron et al., arXiv 2302.13971): RMSNorm, rotary positions, SwiGLU MLP,
            ///< grouped-query attention (Ainslie et al., arXiv 2305.13245), no biases
  Qwen2,    ///< `qwen2`: Llama with biases on the q, k and v projections (transformers' Qwen2ForCausalLM)
  Qwen3,    ///< `qwen3`: Llama with an RMSNorm over each head's q and k before the rotation
            ///< (transformers' Qwen3ForCausalLM, q_norm / k_norm)
  Mistral,  ///< `mistral`: Llama (transformers' MistralForCausalLM) whose sliding window, when it has
            ///< one, spans at least seq_len, so attention is plain causal attention
};

/// How the rotary embedding's inverse frequencies are scaled for a longer context
/// (model.rope_scaling.rope_type; transformers' modeling_rope_utils ROPE_INIT_FUNCTIONS).
enum class RopeType {
  Default,  ///< `default`: inv_freq_j = theta^(-2j / head_dim)
  Linear,   ///< `linear`: position interpolation, inv_freq / factor (Chen et al., arXiv 2306.15595)
  Llama3,   ///< `llama3`: Llama 3.1's wavelength-banded scaling (factor, low/high_freq_factor,
            ///< original_max_position_embeddings)
  Yarn,     ///< `yarn`: YaRN (Peng et al., arXiv 2309.00071 §3.2-3.4): ramped interpolation plus an
            ///< attention factor on cos and sin
};

/// model.rope_scaling: transformers' rope_parameters without rope_theta (model.rope_theta holds it).
/// Fields a type does not use keep their defaults. Checked by config/rope_scaling.hpp.
struct RopeScaling {
  RopeType rope_type = RopeType::Default;
  double factor = 1.0;                  ///< linear, llama3, yarn: context extension factor, >= 1
  double low_freq_factor = 1.0;         ///< llama3: wavelengths above original / low_freq_factor are divided
  double high_freq_factor = 4.0;        ///< llama3: wavelengths below original / high_freq_factor are kept
  int64_t original_max_position_embeddings = 0;  ///< llama3, yarn: the pretraining context (required)
  double attention_factor = 0.0;        ///< yarn: scale of cos and sin; 0 = derived from factor (and mscale)
  double beta_fast = 32.0;              ///< yarn: rotations bounding extrapolation
  double beta_slow = 1.0;               ///< yarn: rotations bounding interpolation
  double mscale = 0.0;                  ///< yarn: DeepSeek's mscale; 0 = not given
  double mscale_all_dim = 0.0;          ///< yarn: DeepSeek's mscale_all_dim; 0 = not given
  bool truncate = true;                 ///< yarn: floor / ceil the correction range
};

/// Field-by-field equality of two RoPE scalings.
inline bool operator==(const RopeScaling& a, const RopeScaling& b) {
  return a.rope_type == b.rope_type && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings &&
         a.attention_factor == b.attention_factor && a.beta_fast == b.beta_fast && a.beta_slow == b.beta_slow &&
         a.mscale == b.mscale && a.mscale_all_dim == b.mscale_all_dim && a.truncate == b.truncate;
}
inline bool operator!=(const RopeScaling& a, const RopeScaling& b) { return !(a == b); }

/// GPT-2's MLP activation.
enum class Activation {
  Gelu,      ///< `gelu`: exact GELU, 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks & Gimpel, arXiv 1606.08415)
  GeluTanh,  ///< `gelu_tanh`: the tanh approximation, Hugging Face GPT-2's `gelu_new`
};

/// Decoder shape. Layers are transformer blocks; the embedding and the LM head are extra.
struct ModelSpec {
  int64_t vocab_size = 256;  ///< tokens in the vocabulary. Range [1, 1e6]; >= 256 with data.format text (bytes);
                             ///< with token formats > every token id in the data and >= the tokenizer's vocabulary.
  int64_t layers = 4;        ///< transformer blocks. Range [1, 10000]; >= pipeline.stages x pipeline.virtual_stages.
  int64_t hidden = 128;      ///< model width d. Range [1, 65536]; divisible by heads.
  int64_t heads = 4;         ///< attention heads. Range [1, hidden].
  int64_t seq_len = 128;     ///< tokens per training sequence. Range [1, 1e6].
  double dropout = 0.0;      ///< dropout probability after embedding, attention and MLP. Range [0, 1).
  bool tie_embeddings = true;  ///< the LM head uses the token embedding's weight (Press & Wolf, arXiv
                               ///< 1608.05859); with several stages the last one holds a copy whose
                               ///< gradient is summed with the first stage's every step. `true` / `false`.
                               ///< Default true for gpt2, false for llama (the loader sets it when unwritten).
  Arch arch = Arch::Gpt2;    ///< `gpt2` (default), `llama`, `qwen2`, `qwen3` or `mistral`. (After the older fields: aggregate
                             ///< initialisers {vocab_size, layers, ...} keep their meaning.)
  Activation activation = Activation::Gelu;  ///< gpt2 only: `gelu` (default) or `gelu_tanh`.
  double norm_eps = 1e-5;    ///< epsilon of every LayerNorm (gpt2) / RMSNorm (llama). Range (0, 1).
  double rope_theta = 10000.0;  ///< llama only: RoPE base theta, inv_freq_j = theta^(-2j / head_dim).
                                ///< Range (1, 1e12].
  int64_t ffn_hidden = 0;    ///< MLP inner width; 0 = the architecture's rule (ffn_hidden_of). Range [0, 1e6].
  int64_t kv_heads = 0;      ///< llama only: key/value heads (grouped-query attention); 0 = heads (plain
                             ///< multi-head attention). Range [0, 65536]; must divide heads.
  int64_t head_dim = 0;      ///< llama family only: width of each attention head; 0 = hidden / heads. Range
                             ///< [0, 65536]; even (rotary embeddings rotate pairs). Qwen3 sets it apart.
  int64_t sliding_window = 0;  ///< mistral, qwen2, qwen3 only: the window of sliding-window attention,
                               ///< recorded for export; 0 = none. ppctl attends causally over the whole
                               ///< sequence, so it must be >= seq_len. Range [0, 1e9].
  RopeScaling rope_scaling;  ///< llama family only: RoPE scaling (default: none).
  std::string init_from;       ///< a Hugging Face model folder (config.json + model.safetensors, or shards
                               ///< in model.safetensors.index.json) whose weights the model starts from;
                               ///< model fields not written in the spec come from its config.json, written
                               ///< ones must agree (config/hf_config.hpp). Resolved to an absolute path by
                               ///< the loader. Empty (default) = random initialisation.
};

/// model.ffn_hidden resolved: as written when non-zero; else 4 x hidden for gpt2, and for llama the
/// rule of Meta's reference llama/model.py (FeedForward, multiple_of = 256): int(2 x 4h / 3) rounded
/// up to a multiple of 256 (hidden 4096 -> 11008, 128 -> 512).
int64_t ffn_hidden_of(const ModelSpec& model);

/// model.kv_heads resolved: as written when non-zero, else model.heads.
int64_t kv_heads_of(const ModelSpec& model);

/// model.head_dim resolved: as written when non-zero, else hidden / heads.
int64_t head_dim_of(const ModelSpec& model);

/// Whether `arch` is built from Llama's block (RMSNorm, rotary positions, SwiGLU, grouped-query
/// attention): llama, qwen2, qwen3, mistral.
bool llama_family(Arch arch);

/// pipeline.zb_auto: the costs the zb-auto schedule places each W with (schedule/zb_auto.hpp). A cost list
/// holds one entry (every stage) or one per stage (pipeline.stages entries, stage order). The defaults are
/// `ppctl plan`'s (F 1, I 1, W 1 ms, B = I + W; nothing for deferring or sending).
struct ZbAutoSpec {
  std::vector<double> forward{1.0};        ///< `f`: ms of one F per stage. Each in [0, 1e9].
  std::vector<double> input_grad{1.0};     ///< `i`: ms of one I (input-gradient backward). Each in [0, 1e9].
  std::vector<double> weight_grad{1.0};    ///< `w`: ms of one W (weight-gradient backward) run right after its I.
                                           ///< Each in [0, 1e9].
  std::vector<double> backward;            ///< `b`: ms of one unsplit backward B per stage, what 1F1B (a zb-auto
                                           ///< candidate) runs; often below I + W (on CPUs the split backward costs
                                           ///< 35-40% more: docs/benchmarks.md). Each in [0, 1e9]. Empty (not
                                           ///< given, the default) = I + W of each stage.
  std::vector<double> defer_penalty{0.0};  ///< `defer_penalty`: ms a W costs more when it does not run right after
                                           ///< its I (docs/benchmarks.md: about 0.2 x W on CPUs). Each in [0, 1e9].
  double p2p_latency = 0.0;                ///< `p2p_latency`: ms added to every transfer between ranks. [0, 1e9].
  int64_t max_in_flight = 0;               ///< `max_in_flight`: most microbatches a rank holds activations for
                                           ///< (from its F to its W); never below 1F1B's p - rank. 0 (default) =
                                           ///< pipeline.stages (1F1B's rank 0; ZB-H1's every rank). Range [0, 1e6].
};

/// How the model is cut and scheduled.
struct PipelineSpec {
  int64_t stages = 1;                              ///< pipeline-parallel size p (one rank per stage). Range [1, 1024].
  ScheduleKind schedule = ScheduleKind::OneFOneB;  ///< `1f1b` (default), `gpipe`, `interleaved-1f1b`, `zb-h1`,
                                                   ///< `zbv`, `zb-auto` or `custom`.
  int64_t microbatches = 1;                        ///< microbatches m per step. Range [1, 1e6].
  int64_t micro_batch_size = 1;                    ///< sequences per microbatch. Range [1, 1e6].
  int64_t virtual_stages = 1;   ///< stages per rank v (model chunks). interleaved-1f1b: >= 2; zbv: 2 (the default
                                ///< there); gpipe, 1f1b, zb-h1, zb-auto: 1. Range [1, 64]. Total stages = stages x v.
  int64_t microbatch_group_size = 0;  ///< interleaved-1f1b: microbatches per group g (Megatron's
                                      ///< microbatch_group_size_per_vp_stage); 0 = stages. Range [0, 1e6],
                                      ///< non-zero only for interleaved-1f1b. schedule::check_params asks
                                      ///< g >= stages and a last group m % g of 0 or >= stages (or m <= g).
  int64_t data_parallel = 0;    ///< data-parallel size dp: replicas of the whole pipeline, each on its own
                                ///< t x p ranks (world size = t x dp x p). 0 = derived: WORLD_SIZE / (t x p)
                                ///< under torchrun or Slurm, 1 for the local launcher. Range [0, 65536].
  int64_t tensor_parallel = 1;  ///< tensor-parallel size t: each stage's layers split over t ranks (Megatron-LM's
                                ///< column- and row-parallel layers, model/tensor_parallel.hpp), ranks ordered tp
                                ///< fastest (plan/rank_grid.hpp). Range [1, 1024]; rules.cpp checks model.heads,
                                ///< kv_heads, the ffn width and the vocabulary against it.
  bool sequence_parallel = true;  ///< with t > 1: norms, dropout and the residual stream split along the sequence
                                  ///< (Korthikanti et al., arXiv 2205.05198 §4.2.2): all-gather before and
                                  ///< reduce-scatter after each tensor-parallel region instead of all-reduces, and
                                  ///< the pipeline sends seq_len / t of each microbatch. No effect at t = 1.
  std::string schedule_file;    ///< custom: CSV schedule, one row per rank (relative to the spec's folder; resolved
                                ///< to an absolute path by the loader). Required for custom, not allowed otherwise.
  std::vector<int64_t> layers_per_stage;  ///< explicit split: blocks of each of the stages x virtual_stages
                                          ///< stages in stage order, each >= 1, summing to model.layers; empty
                                          ///< (default) = pipeline.balance decides. Excludes balance auto.
  std::string balance = "uniform";  ///< `uniform` (default: sizes differ by at most one, plan::partition_uniform)
                                    ///< or `auto` (the split with the least simulated step time from per-layer
                                    ///< FLOP costs, embedding on the first and LM head + loss on the last stage;
                                    ///< plan/balance.hpp).
  ZbAutoSpec zb_auto;  ///< zb-auto only: the costs it places W with (written only with schedule zb-auto).
};

/// One corpus of the training data: data.path itself, or one entry of data.blend.
struct DataSource {
  double weight = 1.0;                    ///< share of the samples, normalised so that the weights sum to 1
  DataFormat format = DataFormat::Text;   ///< the entry's `format`, else data.format
  TokenDType dtype = TokenDType::Uint16;  ///< the entry's `dtype`, else data.dtype (`tokens` only)
  std::string path;                       ///< as written (for messages)
  std::vector<std::string> files;         ///< resolved, absolute: text: every matching file, sorted; tokens:
                                          ///< the file; megatron: the PREFIX (without .bin / .idx)
};

/// Training data. Text files are read as raw bytes (vocabulary 256); token formats hold ids.
struct DataSpec {
  std::vector<std::string> paths;  ///< as written: paths or globs (relative to the spec's folder). Required
                                   ///< unless data.blend is given.
  std::vector<std::string> files;  ///< resolved: every matching regular file, sorted, absolute. Filled by the loader
                                   ///< for data.format text with data.path (empty with data.blend).
  DataFormat format = DataFormat::Text;   ///< `text` (default), `tokens` or `megatron`.
  TokenDType dtype = TokenDType::Uint16;  ///< `tokens` files: `uint16` (default), `uint32` or `int32`.
  std::vector<DataSource> sources;  ///< filled by the loader: one source (weight 1) for data.path, or one per
                                    ///< data.blend entry (`[{weight: W, path: P, format: F, dtype: D}, ...]`),
                                    ///< weights normalised to sum 1. data.path and data.blend exclude each other.
  double eval_fraction = 0.0;      ///< share of the text's sequences held out for evaluation (the last ones,
                                   ///< never trained on); 0 = none. Range [0, 0.5].
  /// Chat datasets (a megatron PREFIX with PREFIX.loss_mask beside it, packed into windows): what happens to a
  /// conversation longer than model.seq_len.
  Overlong overlong = Overlong::Error;
};

/// AdamW (Loshchilov & Hutter, arXiv 1711.05101) as in torch::optim::AdamW.
struct OptimizerSpec {
  double lr = 1e-3;            ///< learning rate. Range (0, 10].
  double beta1 = 0.9;          ///< first-moment decay. Range [0, 1).
  double beta2 = 0.95;         ///< second-moment decay. Range [0, 1).
  double eps = 1e-8;           ///< denominator epsilon. Range (0, 1].
  double weight_decay = 0.1;   ///< decoupled weight decay. Range [0, 10].
  LrSchedule lr_schedule = LrSchedule::Constant;  ///< `constant` (default), `cosine` or `linear`.
  int64_t warmup_steps = 0;    ///< steps of linear warmup from lr / warmup_steps up to lr. Range [0, 1e9].
  double min_lr = 0.0;         ///< the floor cosine and linear decay reach at the last step. Range [0, lr].
  double clip_grad_norm = 0.0; ///< clip the global gradient norm (over every stage) to this; 0 = off. Range [0, 1e6].
  bool distributed = false;    ///< shard AdamW's moments (and the step) over the data-parallel group, Megatron-Core's
                               ///< distributed optimizer: reduce-scatter, AdamW on the shard, all-gather.
};

/// The step loop.
struct TrainSpec {
  int64_t steps = 100;        ///< optimizer steps. Range [1, 1e9].
  uint64_t seed = 0;          ///< seeds weights, data order and dropout. Range [0, 2^63).
  int64_t log_interval = 10;  ///< log a line every N steps (and at the first and last). Range [1, 1e9].
  NonFinitePolicy on_nonfinite = NonFinitePolicy::Stop;  ///< `stop` (default) or `skip`.
  SignalPolicy on_signal = SignalPolicy::Checkpoint;  ///< `checkpoint` (default) or `stop`.
  Recompute recompute = Recompute::None;  ///< `none` (default), `full` or `blocks`.
  int64_t recompute_every = 1;  ///< with recompute: blocks, keep every k-th block's input. Range [1, 10000].
  int64_t max_restarts = 0;       ///< local launcher: restarts after a worker failure, from the latest
                                  ///< complete checkpoint. Range [0, 1000].
  double restart_backoff_s = 1.0; ///< seconds between a failure and the restart. Range [0, 3600].
};

/// Evaluation on the held-out split (data.eval_fraction), forward only, from the last stage.
struct EvalSpec {
  int64_t interval = 0;  ///< evaluate every N optimizer steps and after the last; 0 = never. Range [0, 1e9].
  int64_t batches = 4;   ///< global batches (microbatches x micro_batch_size sequences each) per evaluation,
                         ///< the same ones every time. Range [1, 1e6].
};

/// Checkpoints: per-layer model and optimizer state, written atomically (checkpoint/checkpoint.hpp).
struct CheckpointSpec {
  std::string dir;        ///< folder of the checkpoints (relative to the spec's folder; resolved to an absolute
                          ///< path by the loader); empty = no checkpoints.
  int64_t interval = 0;   ///< save every N optimizer steps (and after the last); 0 = only after the last.
                          ///< Range [0, 1e9]. Needs dir.
  int64_t keep = 3;       ///< complete checkpoints kept (the newest); older ones are deleted. Range [1, 1e6].
};

/// Processes and communication.
struct RuntimeSpec {
  Device device = Device::Cpu;        ///< `cpu` or `cuda` (one GPU per local rank).
  Backend backend = Backend::Auto;    ///< `auto`, `gloo` or `nccl` (nccl needs device cuda).
  std::string master_addr = "127.0.0.1";  ///< rendezvous (TCPStore) host. Non-empty.
  int64_t master_port = 0;            ///< rendezvous port; 0 = any free port (local launch). Range [0, 65535].
  double comm_timeout_s = 300.0;      ///< every blocking wait (rendezvous, send/recv) ends after this, seconds. Range (0, 86400].
  int64_t threads_per_worker = 1;     ///< intra-op threads per worker (at::set_num_threads). Range [1, 1024].
  Precision precision = Precision::Fp32;  ///< `fp32` (default), `bf16` or `bf16-params`.
  double device_memory_gib = 0.0;     ///< memory of one worker's device, GiB (2^30 bytes); `ppctl plan` and
                                      ///< `ppctl train` warn when a rank's estimate exceeds it. 0 = not given
                                      ///< (no check). Range [0, 1e6].
  CpuBinding cpu_binding = CpuBinding::Cores;  ///< `cores` (default) or `none`: the local launcher's CPU
                                               ///< placement of workers (torchrun and srun place their own).
  P2pDtype p2p_dtype = P2pDtype::Auto;  ///< `auto` (default), `fp32` or `bf16` (needs precision bf16): the
                                        ///< element type of tensors sent between ranks (p2p_dtype_of).
  bool overlap_grad_reduce = true;    ///< each stage's data-parallel gradient reduction starts right after its
                                      ///< last backward of the step (REDUCE_GRAD actions in the schedule, as
                                      ///< Megatron-Core's overlap_grad_reduce); false: after the whole schedule.
  bool overlap_param_gather = true;   ///< optimizer.distributed: each stage's forward waits for its own updated
                                      ///< parameters (the all-gather after AdamW runs under the next step's start,
                                      ///< Megatron-Core's overlap_param_gather); false: waited for right after AdamW.
  int64_t grad_bucket_size = 0;       ///< parameters per gradient bucket (one collective each); 0 = Megatron-Core's
                                      ///< default max(40M, 1M x dp) (train::bucket_size_of). Range [0, 1e9].
};

/// What a run leaves behind and how it is measured (run directory, trace, MFU).
struct ObserveSpec {
  std::string runs_dir = "runs";  ///< folder in which each `train` makes its run directory
                                  ///< `<spec name>-<UTC time>`; relative to the working directory.
                                  ///< Non-empty. `ppctl train --run-dir DIR` names the run directory itself.
  int64_t trace_steps = 20;       ///< steps (the first ones) whose executed actions are traced; 0 = off.
                                  ///< Range [0, 1e6].
  double peak_tflops = 0.0;       ///< peak dense fp32 TFLOP/s of one worker's device, for MFU; 0 = from the
                                  ///< known-GPU table on CUDA, none on CPU (MFU absent). Range [0, 1e6].
  bool tensorboard = true;        ///< TensorBoard event files in <run dir>/tb/ (the rank writing metrics.jsonl)
};

/// A whole job. `source` is the spec file's path (for messages).
struct JobSpec {
  ModelSpec model;
  PipelineSpec pipeline;
  DataSpec data;
  OptimizerSpec optimizer;
  TrainSpec train;
  EvalSpec eval;
  CheckpointSpec checkpoint;
  RuntimeSpec runtime;
  ObserveSpec observe;
  std::string source;
};

/// Sequences held out for evaluation out of `num_sequences` with data.eval_fraction `fraction`: 0 when the
/// fraction is 0, else floor(num_sequences x fraction) but at least 1. The held-out ones are the last.
int64_t held_out_sequences(int64_t num_sequences, double fraction);

/// Whether `precision` computes in bf16 (autocast): Bf16 and Bf16Params.
bool computes_in_bf16(Precision precision);

/// runtime.p2p_dtype resolved: Fp32 or Bf16 (Auto = Bf16 exactly when computes_in_bf16(runtime.precision)).
P2pDtype p2p_dtype_of(const RuntimeSpec& runtime);

/// Bytes of one element sent between ranks: 2 when p2p_dtype_of is Bf16, else 4.
int64_t p2p_element_bytes(const RuntimeSpec& runtime);

/// Lower-case YAML spelling of each enum (`1f1b`, `gpipe`, `cpu`, ...).
std::string to_string(ScheduleKind kind);
std::string to_string(Device device);
std::string to_string(Backend backend);
std::string to_string(CpuBinding binding);
std::string to_string(LrSchedule schedule);
std::string to_string(NonFinitePolicy policy);
std::string to_string(Overlong rule);
std::string to_string(SignalPolicy policy);
std::string to_string(Recompute recompute);
std::string to_string(Precision precision);
std::string to_string(P2pDtype dtype);
std::string to_string(DataFormat format);
std::string to_string(TokenDType dtype);
std::string to_string(Arch arch);
std::string to_string(Activation activation);
std::string to_string(RopeType type);

}  // namespace ppctl::config
