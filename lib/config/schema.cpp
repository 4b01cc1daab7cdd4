// The job spec's schema: the table of sections and keys, the builders of its rows, and the readers of the
// fields with a shape of their own (lists, pipeline.balance).
#include "config/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "config/foreign_keys.hpp"
#include "config/rope_scaling.hpp"
#include "config/suggest.hpp"
#include "config/zb_auto_costs.hpp"

namespace ppctl::config::detail {
namespace {

/// Reads `betas: [beta1, beta2]`, each in `range`.
bool read_betas(Context& c, const Entry& e, const RealRange& range, double& beta1, double& beta2) {
  if (!e.value.IsSequence() || e.value.size() != 2) {
    c.bad(e, "must be a list of two numbers [beta1, beta2]", fmt::format("write betas: [{}, {}]", beta1, beta2));
    return false;
  }
  bool ok = true;
  double* outs[] = {&beta1, &beta2};
  for (std::size_t i = 0; i < 2; ++i) {
    const Entry item{fmt::format("{}[{}]", e.path, i), line_of(e.value[i]), e.value[i]};
    ok = read_real(c, item, range, *outs[i], *outs[i]) && ok;
  }
  return ok;
}

/// Reads `layers_per_stage: [a, b, ...]`: a non-empty list of integers, each in `range`.
bool read_layer_counts(Context& c, const Entry& e, IntRange range, std::vector<int64_t>& out) {
  if (!e.value.IsSequence() || e.value.size() == 0) {
    c.bad(e, "must be a non-empty list of block counts, one per stage (stages x virtual_stages entries)",
          "write e.g. layers_per_stage: [3, 3, 3, 2], or leave it out for pipeline.balance");
    return false;
  }
  // Each stage holds at least one of model.layers' blocks: a longer list is refused before its entries are read.
  if (e.value.size() > static_cast<std::size_t>(range.hi)) {
    c.problems.add(e.line, e.path, std::nullopt,
                   fmt::format("a list of {} entries, more than the {} that ppctl reads (model.layers is at most {})",
                               e.value.size(), range.hi, range.hi),
                   "write one entry per stage (stages x virtual_stages entries)");
    return false;
  }
  bool ok = true;
  std::vector<int64_t> counts(e.value.size(), 0);
  for (std::size_t i = 0; i < e.value.size(); ++i) {
    const Entry item{fmt::format("{}[{}]", e.path, i), line_of(e.value[i]), e.value[i]};
    ok = read_int(c, item, range, 1, counts[i]) && ok;
  }
  if (ok) out = std::move(counts);
  return ok;
}

// ---------------------------------------------------------------------------------------------------------
// Rows. Each builder takes the JobSpec member the field reads into; its value now is the field's default.

Field row(std::string key, FieldType type, std::string doc, std::string default_text, Reader read) {
  return {std::move(key), type, std::move(doc), std::move(default_text), std::nullopt, std::nullopt, {},
          std::move(read)};
}

template <typename Int>
Field int_field(std::string key, Int& out, IntRange range, std::string doc) {
  const auto example = static_cast<int64_t>(out);
  Field field = row(std::move(key), FieldType::Integer, std::move(doc), std::to_string(example),
                    [&out, range, example](Context& c, const Entry& e) {
                      int64_t value = 0;
                      if (!read_int(c, e, range, example, value)) return false;
                      out = static_cast<Int>(value);
                      return true;
                    });
  field.ints = range;
  return field;
}

Field real_field(std::string key, double& out, RealRange range, std::string doc) {
  const double example = out;
  Field field = row(std::move(key), FieldType::Real, std::move(doc), fmt::format("{}", example),
                    [&out, range, example](Context& c, const Entry& e) {
                      return read_real(c, e, range, example, out);
                    });
  field.reals = range;
  return field;
}

/// A YAML boolean written `true` or `false` (lower case, unquoted).
Field bool_field(std::string key, bool& out, std::string doc) {
  Field field = row(std::move(key), FieldType::Boolean, std::move(doc), out ? "true" : "false",
                    [&out](Context& c, const Entry& e) {
                      if (e.value.IsScalar() && e.value.Tag() != "!" &&
                          (e.value.Scalar() == "true" || e.value.Scalar() == "false")) {
                        out = e.value.Scalar() == "true";
                        return true;
                      }
                      c.bad(e, "must be true or false", "write true or false");
                      return false;
                    });
  field.choices = {"true", "false"};
  return field;
}

/// One of `values`, spelled as to_string() spells it; `aliases` only point the hint at the right one.
template <typename Enum>
Field enum_field(std::string key, Enum& out, std::vector<Enum> values, std::string doc, HintAliases aliases = {}) {
  std::vector<std::string> choices;
  for (Enum v : values) choices.push_back(to_string(v));
  Field field = row(std::move(key), FieldType::Choice, std::move(doc), to_string(out),
                    [&out, values = std::move(values), aliases = std::move(aliases)](Context& c, const Entry& e) {
                      return read_enum(c, e, values, aliases, out);
                    });
  field.choices = std::move(choices);
  return field;
}

/// One of `choices` kept as the string itself; `hint` is the fix when nothing is close to what was written.
Field word_field(std::string key, std::string& out, std::vector<std::string> choices, std::string hint,
                 std::string doc) {
  Field field = row(std::move(key), FieldType::Choice, std::move(doc), out,
                    [&out, choices, hint = std::move(hint)](Context& c, const Entry& e) {
                      if (e.value.IsScalar() &&
                          std::find(choices.begin(), choices.end(), e.value.Scalar()) != choices.end()) {
                        out = e.value.Scalar();
                        return true;
                      }
                      const auto match = e.value.IsScalar() ? closest_match(e.value.Scalar(), choices) : std::nullopt;
                      c.bad(e, "must be one of " + join_names(choices),
                            match ? "did you mean '" + *match + "'?" : hint);
                      return false;
                    });
  field.choices = std::move(choices);
  return field;
}

/// A non-empty string as written; `what` names it in the rule, `example` in the hint.
Field text_field(std::string key, std::string& out, std::string what, std::string example, std::string doc) {
  return row(std::move(key), FieldType::Text, std::move(doc), out,
             [&out, what = std::move(what), example = std::move(example)](Context& c, const Entry& e) {
               return read_text(c, e, what, example, out);
             });
}

Field layer_counts_field(std::string key, std::vector<int64_t>& out, IntRange range, std::string doc) {
  Field field = row(std::move(key), FieldType::Integers, std::move(doc), "",
                    [&out, range](Context& c, const Entry& e) { return read_layer_counts(c, e, range, out); });
  field.ints = range;
  return field;
}

Field betas_field(std::string key, double& beta1, double& beta2, RealRange range, std::string doc) {
  Field field = row(std::move(key), FieldType::Reals, std::move(doc), fmt::format("[{}, {}]", beta1, beta2),
                    [&beta1, &beta2, range](Context& c, const Entry& e) {
                      return read_betas(c, e, range, beta1, beta2);
                    });
  field.reals = range;
  return field;
}

/// data.path or data.blend: the entry is kept in `slot`, read by the loader once data.format is known.
Field data_field(std::string key, std::optional<Entry>& slot, std::string doc) {
  return row(std::move(key), FieldType::DataPaths, std::move(doc), "", [&slot](Context&, const Entry& e) {
    slot = e;
    return true;
  });
}

}  // namespace

std::vector<std::string> Section::keys() const {
  std::vector<std::string> names;
  for (const auto& f : fields) names.push_back(f.key);
  return names;
}

const Field* Section::field(const std::string& key) const {
  const auto it = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == key; });
  return it == fields.end() ? nullptr : &*it;
}

std::vector<Section> schema(JobSpec& spec, DataEntries& data_entries) {
  ModelSpec& m = spec.model;
  PipelineSpec& p = spec.pipeline;
  DataSpec& d = spec.data;
  OptimizerSpec& o = spec.optimizer;
  TrainSpec& t = spec.train;
  EvalSpec& v = spec.eval;
  CheckpointSpec& k = spec.checkpoint;
  RuntimeSpec& r = spec.runtime;
  ObserveSpec& s = spec.observe;
  return {
      {"model",
       {int_field("vocab_size", m.vocab_size, {1, kMillion}, "tokens in the vocabulary"),
        int_field("layers", m.layers, {1, kMaxLayers}, "transformer blocks, split over the stages"),
        int_field("hidden", m.hidden, {1, 65'536}, "model width d"),
        int_field("heads", m.heads, {1, 65'536}, "attention heads, each hidden / heads wide"),
        int_field("seq_len", m.seq_len, {1, kMillion}, "tokens per training sequence"),
        real_field("dropout", m.dropout, {0, false, 1, true}, "dropout after the embedding, attention and MLP"),
        bool_field("tie_embeddings", m.tie_embeddings,
                   "the LM head uses the token embedding's weight (false for llama when not written)"),
        // Checked against model.arch once every key is read (rules.cpp, check_arch_fields).
        enum_field("arch", m.arch, std::vector{Arch::Gpt2, Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Mistral},
                   "the decoder architecture",
                   {{"gpt-2", "gpt2"}, {"llama2", "llama"}, {"llama3", "llama"}, {"qwen2.5", "qwen2"}}),
        enum_field("activation", m.activation, std::vector{Activation::Gelu, Activation::GeluTanh},
                   "gpt2 only: the MLP's GELU, exact or its tanh approximation",
                   {{"gelu_new", "gelu_tanh"}, {"gelu_pytorch_tanh", "gelu_tanh"}, {"tanh", "gelu_tanh"}}),
        real_field("norm_eps", m.norm_eps, {0, true, 1, true}, "epsilon of every LayerNorm (gpt2) or RMSNorm (llama)"),
        real_field("rope_theta", m.rope_theta, {1, true, 1e12, false},
                   "llama family: base theta of the rotary position embedding"),
        int_field("ffn_hidden", m.ffn_hidden, {0, kMillion}, "inner width of the MLP; 0 = the architecture's rule"),
        int_field("kv_heads", m.kv_heads, {0, 65'536}, "llama family: key/value heads (grouped-query); 0 = heads"),
        // Checked against the architecture, model.seq_len and model.hidden by rules.cpp (check_arch_fields).
        int_field("head_dim", m.head_dim, {0, 65'536}, "llama family: width of each attention head; 0 = hidden / heads"),
        int_field("sliding_window", m.sliding_window, {0, kBillion},
                  "mistral, qwen2, qwen3: sliding-window span, at least seq_len; 0 = none"),
        row("rope_scaling", FieldType::Mapping, "llama family: RoPE scaling, as transformers' rope_parameters", "",
            [&m](Context& c, const Entry& e) { return read_rope_scaling(c, e, m.rope_scaling); }),
        // Resolved and merged with its config.json by the loader (load.cpp, apply_init_from).
        text_field("init_from", m.init_from, "folder path", "init_from: models/gpt2",
                   "a Hugging Face model folder to start from; its config.json fills the model fields")},
       "the network: its architecture and shape, or the Hugging Face model it starts from"},
      {"pipeline",
       {int_field("stages", p.stages, {1, 1024}, "pipeline-parallel size: one rank per stage (t of them with tensor_parallel)"),
        enum_field("schedule", p.schedule,
                   std::vector{ScheduleKind::OneFOneB, ScheduleKind::GPipe, ScheduleKind::Interleaved1F1B,
                               ScheduleKind::ZBH1, ScheduleKind::ZBV, ScheduleKind::ZBAuto, ScheduleKind::Custom},
                   "the order of forwards and backwards on each rank",
                   {{"interleaved", "interleaved-1f1b"}, {"zbh1", "zb-h1"}, {"zb1p", "zb-h1"}, {"zb-v", "zbv"},
                    {"zbauto", "zb-auto"}, {"zb_auto", "zb-auto"}, {"csv", "custom"}}),
        int_field("microbatches", p.microbatches, {1, kMillion}, "microbatches per optimizer step"),
        int_field("micro_batch_size", p.micro_batch_size, {1, kMillion}, "sequences per microbatch"),
        int_field("virtual_stages", p.virtual_stages, {1, 64},
                  "stages per rank (model chunks); 2 when not written for zbv and interleaved-1f1b"),
        int_field("microbatch_group_size", p.microbatch_group_size, {0, kMillion},
                  "interleaved-1f1b only: microbatches per group; 0 = stages"),
        int_field("data_parallel", p.data_parallel, {0, 65'536},
                  "replicas of the whole pipeline; 0 = derived from the number of workers"),
        // Checked against the model's heads, kv_heads, ffn width and vocabulary (rules.cpp, check_tensor_parallel).
        int_field("tensor_parallel", p.tensor_parallel, {1, 1024},
                  "tensor-parallel size: ranks that split each stage's layers (one node's GPUs)"),
        // Checked against model.seq_len (rules.cpp, check_tensor_parallel).
        bool_field("sequence_parallel", p.sequence_parallel,
                   "with tensor_parallel > 1: split norms, dropout and activations along the sequence"),
        // Checked against the schedule once every key is read (rules.cpp, check_schedule_file).
        text_field("schedule_file", p.schedule_file, "path", "a path such as schedules/mine.csv",
                   "custom only: the CSV file of every rank's actions"),
        // Checked against model.layers, the stage count and pipeline.balance (rules.cpp, check_layer_split).
        layer_counts_field("layers_per_stage", p.layers_per_stage,
                           {1, kMaxLayers, "every stage holds at least one block"},
                           "an explicit split: the blocks of each stage, in stage order"),
        word_field("balance", p.balance, {"uniform", "auto"}, "write balance: auto or balance: uniform",
                   "how the blocks are split when layers_per_stage is not given"),
        // Checked against the schedule and pipeline.stages once every key is read (rules.cpp, check_zb_auto).
        row("zb_auto", FieldType::Mapping, "zb-auto only: {f, i, w, b, defer_penalty, p2p_latency, max_in_flight}, ms",
            "", [&p](Context& c, const Entry& e) { return read_zb_auto(c, e, p.zb_auto); })},
       "how the model is split into stages and ranks, and the schedule each rank runs"},
      {"data",
       {data_field("path", data_entries.path, "text: paths or globs; tokens: the file; megatron: the PREFIX"),
        real_field("eval_fraction", d.eval_fraction, {0, false, 0.5, false},
                   "share of each dataset's sequences held out for evaluation"),
        enum_field("format", d.format, std::vector{DataFormat::Text, DataFormat::Tokens, DataFormat::Megatron},
                   "how data.path (and blend entries without their own) is stored",
                   {{"bytes", "text"}, {"bin", "tokens"}, {"indexed", "megatron"}, {"mmap", "megatron"}}),
        enum_field("dtype", d.dtype, std::vector{TokenDType::Uint16, TokenDType::Uint32, TokenDType::Int32},
                   "element type of a tokens file",
                   {{"u16", "uint16"}, {"u32", "uint32"}, {"i32", "int32"}, {"int16", "uint16"}}),
        data_field("blend", data_entries.blend, "a weighted mix of corpora: [{weight, path, format, dtype}, ...]"),
        enum_field("overlong", d.overlong, std::vector{Overlong::Error, Overlong::Drop, Overlong::Truncate},
                   "chat datasets: a conversation longer than model.seq_len is refused, dropped or truncated")},
       "the training corpus: its files, format and blend, and the share held out for evaluation"},
      {"optimizer",
       {real_field("lr", o.lr, {0, true, 10, false}, "learning rate"),
        betas_field("betas", o.beta1, o.beta2, {0, false, 1, true},
                    "[beta1, beta2]: decay of the first and second moment estimates"),
        real_field("eps", o.eps, {0, true, 1, false}, "added to AdamW's denominator"),
        real_field("weight_decay", o.weight_decay, {0, false, 10, false}, "decoupled weight decay"),
        enum_field("lr_schedule", o.lr_schedule,
                   std::vector{LrSchedule::Constant, LrSchedule::Cosine, LrSchedule::Linear},
                   "how the learning rate moves after warmup"),
        int_field("warmup_steps", o.warmup_steps, {0, kBillion}, "steps of linear warmup up to lr"),
        real_field("min_lr", o.min_lr, {0, false, 10, false}, "the floor cosine and linear decay reach at the end"),
        real_field("clip_grad_norm", o.clip_grad_norm, {0, false, 1e6, false},
                   "clip the global gradient norm to this; 0 = off"),
        bool_field("distributed", o.distributed,
                   "shard the optimizer state over the data-parallel group (Megatron's distributed optimizer)")},
       "AdamW, its learning-rate schedule, gradient clipping and the distributed optimizer"},
      {"train",
       {int_field("steps", t.steps, {1, kMaxSteps}, "optimizer steps to run (--steps replaces it)"),
        int_field("seed", t.seed, {0, std::numeric_limits<int64_t>::max()},
                  "seeds the weights, the data order and dropout"),
        int_field("log_interval", t.log_interval, {1, kBillion}, "log a line every N steps"),
        enum_field("on_nonfinite", t.on_nonfinite, std::vector{NonFinitePolicy::Stop, NonFinitePolicy::Skip},
                   "what every rank does when the loss or a gradient is not finite"),
        enum_field("on_signal", t.on_signal, std::vector{SignalPolicy::Checkpoint, SignalPolicy::Stop},
                   "on SIGUSR1, SIGUSR2, SIGTERM, SIGINT or SIGHUP: stop at the next step, with or without a checkpoint"),
        enum_field("recompute", t.recompute, std::vector{Recompute::None, Recompute::Full, Recompute::Blocks},
                   "activation recomputation: what a stage keeps from forward to backward"),
        int_field("recompute_every", t.recompute_every, {1, 10'000},
                  "with recompute blocks: keep the input of every k-th block"),
        int_field("max_restarts", t.max_restarts, {0, 1000}, "local launcher: restarts after a worker failure"),
        real_field("restart_backoff_s", t.restart_backoff_s, {0, false, 3600, false},
                   "seconds between a failure and the restart")},
       "the training loop: steps, seed, logging, recomputation, and what happens on a signal, a non-finite "
       "value or a failure"},
      {"eval",
       {int_field("interval", v.interval, {0, kBillion}, "evaluate every N steps and after the last; 0 = never"),
        int_field("batches", v.batches, {1, kMillion}, "global batches per evaluation")},
       "evaluation on the held-out share of the data"},
      // checkpoint.dir is resolved against the spec's folder by rules.cpp (check_checkpoint).
      {"checkpoint",
       {text_field("dir", k.dir, "folder path", "dir: checkpoints/my-job",
                   "folder of the checkpoints; none = no checkpoints"),
        int_field("interval", k.interval, {0, kBillion}, "save every N optimizer steps; 0 = only after the last"),
        int_field("keep", k.keep, {1, kMillion}, "complete checkpoints kept, the newest")},
       "where checkpoints go, how often and how many are kept"},
      {"runtime",
       {enum_field("device", r.device, std::vector{Device::Cpu, Device::Cuda}, "where each stage runs",
                   {{"gpu", "cuda"}}),
        enum_field("backend", r.backend, std::vector{Backend::Auto, Backend::Gloo, Backend::Nccl},
                   "communication backend; auto = gloo on cpu, nccl on cuda"),
        text_field("master_addr", r.master_addr, "host name or address", "a host such as 127.0.0.1 or node01",
                   "host of the rendezvous store"),
        int_field("master_port", r.master_port, {0, 65'535}, "port of the rendezvous store; 0 = any free port"),
        real_field("comm_timeout_s", r.comm_timeout_s, {0, true, 86'400, false},
                   "seconds after which every blocking wait gives up"),
        int_field("threads_per_worker", r.threads_per_worker, {1, 1024}, "intra-op CPU threads per worker"),
        enum_field("precision", r.precision, std::vector{Precision::Fp32, Precision::Bf16, Precision::Bf16Params},
                   "arithmetic and weights: fp32, bf16 (autocast over fp32 weights) or bf16-params (bf16 weights)",
                   {{"bfloat16", "bf16"}, {"float32", "fp32"}, {"fp16", "bf16"}, {"bf16_params", "bf16-params"},
                    {"bf16-weights", "bf16-params"}}),
        real_field("device_memory_gib", r.device_memory_gib, {0, false, 1e6, false},
                   "memory of one worker's device, for the memory warning; 0 = not given"),
        enum_field("cpu_binding", r.cpu_binding, std::vector{CpuBinding::Cores, CpuBinding::None},
                   "how the local launcher places its workers on CPUs",
                   {{"core", "cores"}, {"off", "none"}, {"numa", "cores"}}),
        enum_field("p2p_dtype", r.p2p_dtype, std::vector{P2pDtype::Auto, P2pDtype::Fp32, P2pDtype::Bf16},
                   "element type of the tensors sent between ranks",
                   {{"bfloat16", "bf16"}, {"float32", "fp32"}, {"fp16", "bf16"}}),
        bool_field("overlap_grad_reduce", r.overlap_grad_reduce,
                   "start each stage's gradient reduction right after its last backward (REDUCE_GRAD)"),
        bool_field("overlap_param_gather", r.overlap_param_gather,
                   "optimizer.distributed: each stage's first forward waits for its updated parameters"),
        int_field("grad_bucket_size", r.grad_bucket_size, {0, kBillion},
                  "parameters per gradient bucket; 0 = max(40M, 1M x dp)")},
       "devices, communication, precision, CPU placement and gradient buckets"},
      {"observe",
       {text_field("runs_dir", s.runs_dir, "folder", "a folder such as runs or /scratch/runs",
                   "folder in which each train makes its run directory"),
        int_field("trace_steps", s.trace_steps, {0, kMillion}, "the first N steps are traced; 0 = off"),
        real_field("peak_tflops", s.peak_tflops, {0, false, 1e6, false},
                   "peak TFLOP/s of one worker's device, for MFU; 0 = from the known-GPU table"),
        bool_field("tensorboard", s.tensorboard, "TensorBoard event files in the run directory")},
       "what a run records: its run directory, traces, TensorBoard files and MFU"},
  };
}

std::string unknown_key_hint(const std::vector<Section>& sections, const std::string& name, const std::string& prefix,
                             const std::vector<std::string>& known) {
  for (const auto& section : sections) {
    if (section.name == prefix) continue;
    for (const auto& field : section.fields) {
      if (field.key == name) return fmt::format("move it under '{}:' ({}.{})", section.name, section.name, name);
    }
  }
  if (auto hint = foreign_key_hint(name)) return *hint;  // Megatron-LM's num_layers is model.layers
  if (auto match = closest_match(name, known)) return "did you mean '" + *match + "'?";
  return (prefix.empty() ? "valid sections are " : "valid keys are ") + join_names(known);
}

}  // namespace ppctl::config::detail
