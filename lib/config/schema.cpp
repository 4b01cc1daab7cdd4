// The job spec's schema: the table of sections and keys, and the readers of fields with a shape of their own.
#include "config/schema.hpp"

#include <fmt/format.h>

#include <limits>
#include <utility>

#include "config/suggest.hpp"

namespace ppctl::config::detail {
namespace {

/// Reads `betas: [beta1, beta2]`, each in [0, 1).
bool read_betas(Context& c, const Entry& e, double& beta1, double& beta2) {
  if (!e.value.IsSequence() || e.value.size() != 2) {
    c.bad(e, "must be a list of two numbers [beta1, beta2]", fmt::format("write betas: [{}, {}]", beta1, beta2));
    return false;
  }
  const RealRange range{0, false, 1, true};
  bool ok = true;
  double* outs[] = {&beta1, &beta2};
  for (std::size_t i = 0; i < 2; ++i) {
    const Entry item{fmt::format("{}[{}]", e.path, i), line_of(e.value[i]), e.value[i]};
    ok = read_real(c, item, range, *outs[i], *outs[i]) && ok;
  }
  return ok;
}

/// Reads `layers_per_stage: [a, b, ...]`: a non-empty list of integers, each in [1, kMaxLayers].
bool read_layer_counts(Context& c, const Entry& e, IntRange range, std::vector<int64_t>& out) {
  if (!e.value.IsSequence() || e.value.size() == 0) {
    c.bad(e, "must be a non-empty list of block counts, one per stage (stages x virtual_stages entries)",
          "write e.g. layers_per_stage: [3, 3, 3, 2], or leave it out for pipeline.balance");
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

template <typename Int>
Field int_field(std::string key, Int& out, IntRange range) {
  const auto example = static_cast<int64_t>(out);
  return {std::move(key), [&out, range, example](Context& c, const Entry& e) {
            int64_t value = 0;
            if (!read_int(c, e, range, example, value)) return false;
            out = static_cast<Int>(value);
            return true;
          }};
}

Field real_field(std::string key, double& out, RealRange range) {
  const double example = out;
  return {std::move(key), [&out, range, example](Context& c, const Entry& e) {
            return read_real(c, e, range, example, out);
          }};
}

/// A YAML boolean written `true` or `false` (lower case, unquoted).
Field bool_field(std::string key, bool& out) {
  return {std::move(key), [&out](Context& c, const Entry& e) {
            if (e.value.IsScalar() && e.value.Tag() != "!" &&
                (e.value.Scalar() == "true" || e.value.Scalar() == "false")) {
              out = e.value.Scalar() == "true";
              return true;
            }
            c.bad(e, "must be true or false", "write true or false");
            return false;
          }};
}

template <typename Enum>
Field enum_field(std::string key, Enum& out, std::vector<Enum> values, HintAliases aliases = {}) {
  return {std::move(key), [&out, values = std::move(values), aliases = std::move(aliases)](Context& c, const Entry& e) {
            return read_enum(c, e, values, aliases, out);
          }};
}

}  // namespace

std::vector<Section> schema(JobSpec& spec, DataEntries& data_entries) {
  ModelSpec& m = spec.model;
  PipelineSpec& p = spec.pipeline;
  OptimizerSpec& o = spec.optimizer;
  TrainSpec& t = spec.train;
  RuntimeSpec& r = spec.runtime;
  return {
      {"model",
       {int_field("vocab_size", m.vocab_size, {1, kMillion}),
        int_field("layers", m.layers, {1, kMaxLayers}),
        int_field("hidden", m.hidden, {1, 65'536}),
        int_field("heads", m.heads, {1, 65'536}),
        int_field("seq_len", m.seq_len, {1, kMillion}),
        real_field("dropout", m.dropout, {0, false, 1, true}),
        bool_field("tie_embeddings", m.tie_embeddings),
        // Checked against model.arch once every key is read (Loader::check_arch_fields).
        enum_field("arch", m.arch, std::vector{Arch::Gpt2, Arch::Llama},
                   {{"gpt-2", "gpt2"}, {"llama2", "llama"}, {"llama3", "llama"}, {"mistral", "llama"}}),
        enum_field("activation", m.activation, std::vector{Activation::Gelu, Activation::GeluTanh},
                   {{"gelu_new", "gelu_tanh"}, {"gelu_pytorch_tanh", "gelu_tanh"}, {"tanh", "gelu_tanh"}}),
        real_field("norm_eps", m.norm_eps, {0, true, 1, true}),
        real_field("rope_theta", m.rope_theta, {1, true, 1e12, false}),
        int_field("ffn_hidden", m.ffn_hidden, {0, kMillion}),
        int_field("kv_heads", m.kv_heads, {0, 65'536}),
        {"init_from",  // resolved and merged with its config.json by Loader::apply_init_from
         [&m](Context& c, const Entry& e) {
           return read_text(c, e, "folder path", "init_from: models/gpt2", m.init_from);
         }}}},
      {"pipeline",
       {int_field("stages", p.stages, {1, 1024}),
        enum_field("schedule", p.schedule,
                   std::vector{ScheduleKind::OneFOneB, ScheduleKind::GPipe, ScheduleKind::Interleaved1F1B,
                               ScheduleKind::ZBH1, ScheduleKind::ZBV, ScheduleKind::Custom},
                   {{"interleaved", "interleaved-1f1b"}, {"zbh1", "zb-h1"}, {"zb1p", "zb-h1"}, {"zb-v", "zbv"},
                    {"csv", "custom"}}),
        int_field("microbatches", p.microbatches, {1, kMillion}),
        int_field("micro_batch_size", p.micro_batch_size, {1, kMillion}),
        int_field("virtual_stages", p.virtual_stages, {1, 64}),
        int_field("microbatch_group_size", p.microbatch_group_size, {0, kMillion}),
        int_field("data_parallel", p.data_parallel, {0, 65'536}),
        // Checked against the schedule once every key is read (Loader::check_schedule_file).
        {"schedule_file", [&p](Context& c, const Entry& e) {
           return read_text(c, e, "path", "a path such as schedules/mine.csv", p.schedule_file);
         }},
        // Checked against model.layers, the stage count and pipeline.balance by Loader::check_layer_split.
        {"layers_per_stage", [&p](Context& c, const Entry& e) {
           return read_layer_counts(c, e, {1, kMaxLayers, "every stage holds at least one block"},
                                    p.layers_per_stage);
         }},
        {"balance", [&p](Context& c, const Entry& e) {
           if (e.value.IsScalar() && (e.value.Scalar() == "uniform" || e.value.Scalar() == "auto")) {
             p.balance = e.value.Scalar();
             return true;
           }
           const auto match = e.value.IsScalar() ? closest_match(e.value.Scalar(), {"uniform", "auto"})
                                                 : std::nullopt;
           c.bad(e, "must be one of uniform, auto",
                 match ? "did you mean '" + *match + "'?" : "write balance: auto or balance: uniform");
           return false;
         }}}},
      {"data",
       {{"path", [&data_entries](Context&, const Entry& e) {
          data_entries.path = e;  // resolved by Loader::resolve_data once data.format is known
          return true;
        }},
        real_field("eval_fraction", spec.data.eval_fraction, {0, false, 0.5, false}),
        enum_field("format", spec.data.format,
                   std::vector{DataFormat::Text, DataFormat::Tokens, DataFormat::Megatron},
                   {{"bytes", "text"}, {"bin", "tokens"}, {"indexed", "megatron"}, {"mmap", "megatron"}}),
        enum_field("dtype", spec.data.dtype, std::vector{TokenDType::Uint16, TokenDType::Uint32, TokenDType::Int32},
                   {{"u16", "uint16"}, {"u32", "uint32"}, {"i32", "int32"}, {"int16", "uint16"}}),
        {"blend", [&data_entries](Context&, const Entry& e) {
          data_entries.blend = e;  // read by Loader::resolve_data
          return true;
        }}}},
      {"optimizer",
       {real_field("lr", o.lr, {0, true, 10, false}),
        {"betas", [&o](Context& c, const Entry& e) { return read_betas(c, e, o.beta1, o.beta2); }},
        real_field("eps", o.eps, {0, true, 1, false}),
        real_field("weight_decay", o.weight_decay, {0, false, 10, false}),
        enum_field("lr_schedule", o.lr_schedule,
                   std::vector{LrSchedule::Constant, LrSchedule::Cosine, LrSchedule::Linear}),
        int_field("warmup_steps", o.warmup_steps, {0, kBillion}),
        real_field("min_lr", o.min_lr, {0, false, 10, false}),
        real_field("clip_grad_norm", o.clip_grad_norm, {0, false, 1e6, false})}},
      {"train",
       {int_field("steps", t.steps, {1, kBillion}),
        int_field("seed", t.seed, {0, std::numeric_limits<int64_t>::max()}),
        int_field("log_interval", t.log_interval, {1, kBillion}),
        enum_field("on_nonfinite", t.on_nonfinite, std::vector{NonFinitePolicy::Stop, NonFinitePolicy::Skip}),
        enum_field("recompute", t.recompute, std::vector{Recompute::None, Recompute::Full, Recompute::Blocks}),
        int_field("recompute_every", t.recompute_every, {1, 10'000}),
        int_field("max_restarts", t.max_restarts, {0, 1000}),
        real_field("restart_backoff_s", t.restart_backoff_s, {0, false, 3600, false})}},
      {"eval",
       {int_field("interval", spec.eval.interval, {0, kBillion}),
        int_field("batches", spec.eval.batches, {1, kMillion})}},
      {"checkpoint",
       {{"dir",  // resolved against the spec's folder by Loader::check_checkpoint
         [&spec](Context& c, const Entry& e) {
           return read_text(c, e, "folder path", "dir: checkpoints/my-job", spec.checkpoint.dir);
         }},
        int_field("interval", spec.checkpoint.interval, {0, kBillion}),
        int_field("keep", spec.checkpoint.keep, {1, kMillion})}},
      {"runtime",
       {enum_field("device", r.device, std::vector{Device::Cpu, Device::Cuda}, {{"gpu", "cuda"}}),
        enum_field("backend", r.backend, std::vector{Backend::Auto, Backend::Gloo, Backend::Nccl}),
        {"master_addr",
         [&r](Context& c, const Entry& e) {
           return read_text(c, e, "host name or address", "a host such as 127.0.0.1 or node01", r.master_addr);
         }},
        int_field("master_port", r.master_port, {0, 65'535}),
        real_field("comm_timeout_s", r.comm_timeout_s, {0, true, 86'400, false}),
        int_field("threads_per_worker", r.threads_per_worker, {1, 1024}),
        enum_field("precision", r.precision, std::vector{Precision::Fp32, Precision::Bf16},
                   {{"bfloat16", "bf16"}, {"float32", "fp32"}, {"fp16", "bf16"}}),
        real_field("device_memory_gib", r.device_memory_gib, {0, false, 1e6, false}),
        enum_field("cpu_binding", r.cpu_binding, std::vector{CpuBinding::Cores, CpuBinding::None},
                   {{"core", "cores"}, {"off", "none"}, {"numa", "cores"}}),
        enum_field("p2p_dtype", r.p2p_dtype, std::vector{P2pDtype::Auto, P2pDtype::Fp32, P2pDtype::Bf16},
                   {{"bfloat16", "bf16"}, {"float32", "fp32"}, {"fp16", "bf16"}})}},
      {"observe",
       {{"runs_dir",
         [&spec](Context& c, const Entry& e) {
           return read_text(c, e, "folder", "a folder such as runs or /scratch/runs", spec.observe.runs_dir);
         }},
        int_field("trace_steps", spec.observe.trace_steps, {0, kMillion}),
        real_field("peak_tflops", spec.observe.peak_tflops, {0, false, 1e6, false}),
        bool_field("tensorboard", spec.observe.tensorboard)}},
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
  if (auto match = closest_match(name, known)) return "did you mean '" + *match + "'?";
  return (prefix.empty() ? "valid sections are " : "valid keys are ") + join_names(known);
}

}  // namespace ppctl::config::detail
