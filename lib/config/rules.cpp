// The rules that span fields of a job spec: one function each, reporting on the later key of the pair.
#include "config/rules.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "config/schema.hpp"

namespace ppctl::config::detail {
namespace {

namespace fs = std::filesystem;

/// Nearest divisors of `n` below and above `near` (e.g. 4 or 8 for n = 128, near = 5).
std::string divisors_near(int64_t n, int64_t near) {
  std::optional<int64_t> below;
  std::optional<int64_t> above;
  for (int64_t d = std::min(near, n); d >= 1 && !below; --d) {
    if (n % d == 0) below = d;
  }
  for (int64_t d = near + 1; d <= n && !above; ++d) {
    if (n % d == 0) above = d;
  }
  return one_or_two(below, above);
}

/// Bytes in the data files together.
std::uintmax_t text_bytes(const DataSpec& data) {
  std::uintmax_t bytes = 0;
  for (const auto& file : data.files) {
    std::error_code ignored;
    const auto size = fs::file_size(file, ignored);
    if (!ignored) bytes += size;
  }
  return bytes;
}

/// Sequences of model.seq_len + 1 bytes (stride seq_len) in the data files; -1 when not even one.
int64_t text_sequences(const JobSpec& spec) {
  const std::uintmax_t bytes = text_bytes(spec.data);
  const auto seq = static_cast<std::uintmax_t>(spec.model.seq_len);
  return bytes < seq + 1 ? -1 : static_cast<int64_t>((bytes - 1) / seq);
}

/// The rule and hint pipeline.virtual_stages breaks for its schedule, if any: gpipe, 1f1b, zb-h1 and zb-auto run one
/// stage per rank, zbv two, interleaved-1f1b two or more; custom schedules any number.
std::optional<std::pair<std::string, std::string>> virtual_stages_problem(const SpecState& s) {
  const PipelineSpec& p = s.spec.pipeline;
  if (!s.usable("pipeline.schedule") || !s.usable("pipeline.virtual_stages")) return std::nullopt;
  switch (p.schedule) {
    case ScheduleKind::ZBV:
      if (p.virtual_stages == 2) return std::nullopt;
      return std::pair{std::string("must be 2 with schedule zbv (two stages per rank, in a V)"),
                       std::string("set pipeline.virtual_stages: 2, or leave it out (2 is zbv's default)")};
    case ScheduleKind::Interleaved1F1B:
      if (p.virtual_stages >= 2) return std::nullopt;
      return std::pair{std::string("must be at least 2 with schedule interleaved-1f1b"),
                       std::string("set pipeline.virtual_stages: 2 or more (2 is the default), or use schedule 1f1b")};
    case ScheduleKind::Custom:
      return std::nullopt;
    default:
      if (p.virtual_stages == 1) return std::nullopt;
      return std::pair{fmt::format("must be 1 with schedule {} (one stage per rank)", to_string(p.schedule)),
                       std::string("leave pipeline.virtual_stages out, or use schedule interleaved-1f1b or zbv for "
                                   "several stages per rank")};
  }
}

/// Every stage holds at least one layer: layers >= stages x virtual_stages. Reported on pipeline.stages
/// when there is one stage per rank, else on pipeline.virtual_stages.
void check_layers_cover_stages(SpecState& s) {
  const ModelSpec& m = s.spec.model;
  const PipelineSpec& p = s.spec.pipeline;
  if (!s.usable("model.layers") || !s.usable("pipeline.stages") || !s.usable("pipeline.virtual_stages")) return;
  if (virtual_stages_problem(s)) return;  // reported by check_schedule
  if (p.virtual_stages == 1 && m.layers < p.stages) {
    s.combination_problem(
        "pipeline.stages", "model.layers", std::to_string(p.stages),
        fmt::format("must not exceed model.layers ({})", m.layers),
        fmt::format("use at most {} stages, or raise model.layers to {} or more", m.layers, p.stages));
  } else if (m.layers < p.stages * p.virtual_stages) {
    std::vector<std::string> fixes;  // only values inside each field's range
    if (p.stages * p.virtual_stages <= kMaxLayers)
      fixes.push_back(fmt::format("raise model.layers to {} or more", p.stages * p.virtual_stages));
    if (m.layers / p.virtual_stages >= 1)
      fixes.push_back(fmt::format("lower pipeline.stages to {}", m.layers / p.virtual_stages));
    if (p.schedule == ScheduleKind::Interleaved1F1B && m.layers / p.stages >= 2)
      fixes.push_back(fmt::format("lower pipeline.virtual_stages to {}", m.layers / p.stages));
    if (fixes.empty()) fixes.push_back("use fewer pipeline.stages or pipeline.virtual_stages");
    const std::string hint = fmt::format("{}", fmt::join(fixes, ", or "));
    s.combination_problem("pipeline.virtual_stages",
                          s.seen.count("pipeline.stages") ? "pipeline.stages" : "pipeline.schedule",
                          std::to_string(p.virtual_stages),
                          fmt::format("pipeline.stages x pipeline.virtual_stages = {} x {} = {} stages must not exceed "
                                      "model.layers ({})",
                                      p.stages, p.virtual_stages, p.stages * p.virtual_stages, m.layers),
                          hint);
  }
}

/// pipeline.layers_per_stage: one entry per stage (stages x virtual_stages), summing to model.layers, and
/// not together with balance auto (which chooses the split itself).
void check_layer_split(SpecState& s) {
  const PipelineSpec& p = s.spec.pipeline;
  const std::string path = "pipeline.layers_per_stage";
  if (p.layers_per_stage.empty() || !s.usable(path)) return;
  const std::string value = fmt::format("[{}]", fmt::join(p.layers_per_stage, ", "));
  const auto count = static_cast<int64_t>(p.layers_per_stage.size());
  if (s.usable("pipeline.balance") && p.balance == "auto") {
    s.combination_problem(path, "pipeline.balance", value,
                          "excludes pipeline.balance auto (an explicit split, or one chosen by ppctl, not both)",
                          "remove pipeline.layers_per_stage to let balance auto choose, or remove balance: auto");
  }
  if (s.usable("pipeline.stages") && s.usable("pipeline.virtual_stages") && !virtual_stages_problem(s) &&
      count != p.stages * p.virtual_stages) {
    s.combination_problem(path, "pipeline.stages", value,
                          fmt::format("has {} entries but pipeline.stages x pipeline.virtual_stages = {} x {} = {}",
                                      count, p.stages, p.virtual_stages, p.stages * p.virtual_stages),
                          fmt::format("give one block count per stage ({} entries), in stage order",
                                      p.stages * p.virtual_stages));
  }
  int64_t sum = 0;
  for (const int64_t n : p.layers_per_stage) sum += n;
  if (s.usable("model.layers") && sum != s.spec.model.layers) {
    s.combination_problem(path, "model.layers", value,
                          fmt::format("sums to {} but model.layers is {}", sum, s.spec.model.layers),
                          fmt::format("make the entries add up to {} (or set model.layers: {})",
                                      s.spec.model.layers, sum));
  }
}

/// optimizer.min_lr is a floor below optimizer.lr.
void check_min_lr(SpecState& s) {
  const OptimizerSpec& o = s.spec.optimizer;
  if (s.usable("optimizer.min_lr") && s.usable("optimizer.lr") && o.min_lr > o.lr) {
    s.combination_problem("optimizer.min_lr", "optimizer.lr", fmt::format("{:g}", o.min_lr),
                          fmt::format("must not exceed optimizer.lr ({:g})", o.lr),
                          fmt::format("use a floor of at most {:g}, e.g. {:g}", o.lr, o.lr / 10));
  }
}

/// The learning-rate schedule fits in train.steps, and optimizer.min_lr is only written for a schedule that
/// decays to it. Warmup (steps 0 .. warmup_steps - 1) reaches optimizer.lr at its last step, so a constant
/// schedule needs warmup_steps <= train.steps; cosine and linear decay to min_lr over the steps after warmup
/// (train/lr_schedule.cpp), so they need at least one: warmup_steps < train.steps.
void check_lr_schedule(SpecState& s) {
  const OptimizerSpec& o = s.spec.optimizer;
  if (!s.usable("optimizer.lr_schedule")) return;
  const bool decays = o.lr_schedule != LrSchedule::Constant;
  const std::string schedule =
      to_string(o.lr_schedule) + (s.seen.count("optimizer.lr_schedule") ? "" : ", the default");
  if (s.usable("optimizer.warmup_steps") && s.usable("train.steps")) {
    const int64_t steps = s.spec.train.steps;
    const int64_t most = decays ? steps - 1 : steps;
    if (o.warmup_steps > most) {
      const std::string rule =
          decays ? fmt::format("must be below {} for lr_schedule {}: warmup would take every step, "
                               "so the decay to optimizer.min_lr never happens",
                               s.steps_named(), schedule)
                 : fmt::format("must not exceed {}: the run would end during warmup, before "
                               "reaching optimizer.lr",
                               s.steps_named());
      const std::string lower = most == 0 ? "set optimizer.warmup_steps: 0"
                                          : fmt::format("lower optimizer.warmup_steps to at most {}", most);
      const int64_t fewest = decays ? o.warmup_steps + 1 : o.warmup_steps;
      const std::string raise = s.steps_overridden ? fmt::format("pass --steps {} or more", fewest)
                                                   : fmt::format("raise train.steps to at least {}", fewest);
      s.combination_problem("optimizer.warmup_steps", "train.steps", std::to_string(o.warmup_steps), rule,
                            fewest > kMaxSteps ? lower : lower + ", or " + raise);
    }
  }
  if (!decays && s.seen.count("optimizer.min_lr") && s.usable("optimizer.min_lr")) {
    s.combination_problem("optimizer.min_lr", "optimizer.lr_schedule", fmt::format("{:g}", o.min_lr),
                          fmt::format("applies only to lr_schedule cosine or linear (lr_schedule is {})", schedule),
                          "remove optimizer.min_lr, or set optimizer.lr_schedule: cosine (or linear)");
  }
}

/// The text must hold at least one training sequence: seq_len + 1 bytes over all data files.
void check_data_covers_a_sequence(SpecState& s) {
  if (!s.usable("data.path") || !s.usable("model.seq_len") || s.spec.data.files.empty()) return;
  const std::uintmax_t bytes = text_bytes(s.spec.data);
  const auto needed = static_cast<std::uintmax_t>(s.spec.model.seq_len) + 1;
  if (bytes < needed) {
    s.combination_problem(
        "data.path", "model.seq_len", fmt::format("{} file(s), {} bytes", s.spec.data.files.size(), bytes),
        fmt::format("must hold at least model.seq_len + 1 = {} bytes of text", needed),
        // model.seq_len is at least 1: lowering it is a fix only when the text holds 2 bytes or more.
        bytes >= 2 ? fmt::format("add text, or lower model.seq_len to {} or less", bytes - 1)
                   : fmt::format("add text: model.seq_len {} needs {} bytes (its smallest value, 1, needs 2)",
                                 s.spec.model.seq_len, needed));
  }
}

/// model.vocab_size >= 256 when any source is text (bytes are ids 0..255).
void check_vocab_covers_bytes(SpecState& s) {
  const auto& sources = s.spec.data.sources;
  const bool text = std::any_of(sources.begin(), sources.end(),
                                [](const DataSource& source) { return source.format == DataFormat::Text; });
  if (text && s.usable("model.vocab_size") && s.spec.model.vocab_size < 256) {
    s.combination_problem("model.vocab_size", "data.format", std::to_string(s.spec.model.vocab_size),
                          "must be at least 256 with data.format text (the data are bytes, ids 0..255)",
                          "use vocab_size: 256 or more, or train on tokenized data (data.format tokens or megatron)");
  }
}

/// eval.interval needs held-out text, and the split must leave sequences on both sides.
void check_eval(SpecState& s) {
  const double fraction = s.spec.data.eval_fraction;
  if (s.usable("eval.interval") && s.usable("data.eval_fraction") && s.spec.eval.interval > 0 && fraction == 0.0) {
    s.combination_problem("eval.interval", "data.eval_fraction", std::to_string(s.spec.eval.interval),
                          "needs held-out text, but data.eval_fraction is 0",
                          "set data.eval_fraction: 0.05 (the last 5% of the sequences), or eval.interval: 0");
  }
  if (fraction == 0.0 || !s.usable("data.eval_fraction") || !s.usable("data.path") || !s.usable("model.seq_len")) {
    return;
  }
  const int64_t sequences = text_sequences(s.spec);
  if (sequences < 0) return;  // too short for one sequence: reported by check_data_covers_a_sequence
  const int64_t held_out = held_out_sequences(sequences, fraction);
  if (sequences - held_out < 1) {
    s.combination_problem("data.eval_fraction", "data.path", fmt::format("{:g}", fraction),
                          fmt::format("leaves no training sequence: the text holds {} sequence(s) of "
                                      "model.seq_len + 1 bytes and {} would be held out",
                                      sequences, held_out),
                          "add text, lower model.seq_len, or set data.eval_fraction: 0");
  }
}

/// checkpoint.interval and checkpoint.keep need checkpoint.dir; the folder must be a folder (or not exist
/// yet) under a writable parent.
void check_checkpoint(SpecState& s) {
  CheckpointSpec& k = s.spec.checkpoint;
  if (k.dir.empty()) {
    for (const char* key : {"checkpoint.interval", "checkpoint.keep"}) {
      if (!s.seen.count(key) || !s.usable(key)) continue;
      s.combination_problem(key, "checkpoint", key == std::string("checkpoint.interval") ? std::to_string(k.interval)
                                                                                         : std::to_string(k.keep),
                            "needs checkpoint.dir (the folder to write checkpoints to)",
                            "add checkpoint: {dir: checkpoints/my-job}");
    }
    return;
  }
  if (!s.usable("checkpoint.dir")) return;
  const std::string value = detail::quoted(k.dir);
  s.spec.checkpoint.dir = resolve_against(s.c.base_dir, k.dir);
  std::error_code ignored;
  fs::path existing = k.dir;
  while (!existing.empty() && !fs::exists(existing, ignored)) existing = existing.parent_path();
  if (existing == fs::path(k.dir) && !fs::is_directory(existing, ignored)) {
    s.combination_problem("checkpoint.dir", "checkpoint", value, "names a file, not a folder",
                          "name a folder (it is created when missing)");
  } else if (!existing.empty() && !fs::is_directory(existing, ignored)) {
    s.combination_problem("checkpoint.dir", "checkpoint", value,
                          fmt::format("lies under {}, which is a file, not a folder", existing.string()),
                          "name a folder (it is created when missing)");
  } else if (!existing.empty() && ::access(existing.c_str(), W_OK | X_OK) != 0) {
    s.combination_problem("checkpoint.dir", "checkpoint", value,
                          fmt::format("cannot be written: {} is not writable ({})", existing.string(),
                                      std::strerror(errno)),
                          "choose a folder you can write to, or fix its permissions");
  }
}

/// The model fields that belong to some architectures, grouped-query heads, RoPE's even head size, a
/// sliding window no shorter than seq_len, and model.tie_embeddings' per-architecture default (false
/// for the llama family when not written).
void check_arch_fields(SpecState& s) {
  ModelSpec& m = s.spec.model;
  if (!s.usable("model.arch")) return;
  const std::string arch = to_string(m.arch);
  const auto only_for = [&](const std::string& key, bool applies, const std::string& owners,
                            const std::string& example, const std::string& value) {
    if (applies || !s.seen.count("model." + key)) return;
    s.combination_problem("model." + key, "model.arch", value,
                          fmt::format("applies only to model.arch {} (model.arch is {}{})", owners, arch,
                                      s.seen.count("model.arch") ? "" : ", the default"),
                          fmt::format("remove model.{}, or set model.arch: {}", key, example));
  };
  const bool llama = llama_family(m.arch);
  const std::string family = "llama, qwen2, qwen3 or mistral";
  only_for("activation", m.arch == Arch::Gpt2, "gpt2", "gpt2", quoted(to_string(m.activation)));
  only_for("rope_theta", llama, family, "llama", fmt::format("{:g}", m.rope_theta));
  only_for("rope_scaling", llama, family, "llama", quoted(to_string(m.rope_scaling.rope_type)));
  only_for("kv_heads", llama, family, "llama", std::to_string(m.kv_heads));
  only_for("head_dim", llama, family, "qwen3", std::to_string(m.head_dim));
  only_for("sliding_window", m.arch == Arch::Mistral || m.arch == Arch::Qwen2 || m.arch == Arch::Qwen3,
           "mistral, qwen2 or qwen3", "mistral", std::to_string(m.sliding_window));
  if (llama && !s.seen.count("model.tie_embeddings")) m.tie_embeddings = false;
  if (llama && s.usable("model.kv_heads") && s.usable("model.heads") && m.kv_heads > 0 &&
      m.heads % m.kv_heads != 0) {
    s.combination_problem("model.kv_heads", "model.heads", std::to_string(m.kv_heads),
                          fmt::format("must divide model.heads ({})", m.heads),
                          fmt::format("use a divisor of {} such as {}, or 0 for kv_heads = heads", m.heads,
                                      divisors_near(m.heads, m.kv_heads)));
  }
  if (llama && m.head_dim > 0 && s.usable("model.head_dim") && m.head_dim % 2 != 0) {
    s.combination_problem("model.head_dim", "model.arch", std::to_string(m.head_dim),
                          "is odd; rotary embeddings rotate pairs of features, so it must be even",
                          "choose an even head_dim, or 0 for hidden / heads");
  }
  if (llama && m.head_dim == 0 && s.usable("model.hidden") && s.usable("model.heads") && m.hidden % m.heads == 0 &&
      (m.hidden / m.heads) % 2 != 0) {
    s.combination_problem("model.heads", "model.hidden", std::to_string(m.heads),
                          fmt::format("gives an odd head size hidden / heads = {}; rotary embeddings (llama) "
                                      "rotate pairs of features, so it must be even",
                                      m.hidden / m.heads),
                          "choose heads so that model.hidden / model.heads is even");
  }
  if (m.sliding_window > 0 && m.sliding_window < m.seq_len && s.usable("model.sliding_window") &&
      s.usable("model.seq_len")) {
    s.combination_problem("model.sliding_window", "model.seq_len", std::to_string(m.sliding_window),
                          fmt::format("is shorter than model.seq_len ({}); ppctl attends over the whole sequence "
                                      "and does not implement sliding-window attention",
                                      m.seq_len),
                          fmt::format("write model.seq_len: {} or less", m.sliding_window));
  }
}

/// pipeline.tensor_parallel t against the model (Megatron-LM's column- and row-parallel split, model/tensor_parallel.hpp):
/// every rank holds heads / t query heads, kv_heads / t key/value heads (no replication of key/value heads) and
/// ffn / t MLP columns; the vocabulary is split into t contiguous shards differing by at most one row
/// (model::shard_range), so it needs at least t entries but no padding; with sequence parallelism each rank holds seq_len / t
/// positions.
void check_tensor_parallel(SpecState& s) {
  const ModelSpec& m = s.spec.model;
  const int64_t t = s.spec.pipeline.tensor_parallel;
  if (t <= 1 || !s.usable("pipeline.tensor_parallel") || !s.usable("model.arch")) return;
  const bool sp = s.spec.pipeline.sequence_parallel;
  const int64_t kv = kv_heads_of(m), ffn = ffn_hidden_of(m);
  // Every rule at once for a size c, so that the fix names a size that satisfies all of them, not only the broken one.
  const auto fits = [&](int64_t c) {
    return m.heads % c == 0 && (!llama_family(m.arch) || kv % c == 0) && ffn % c == 0 && m.vocab_size >= c &&
           (!sp || m.seq_len % c == 0);
  };
  std::optional<int64_t> below, above;
  for (int64_t c = t - 1; c >= 1 && !below; --c) {
    if (fits(c)) below = c;
  }
  for (int64_t c = t + 1; c <= 1024 && !above; ++c) {
    if (fits(c)) above = c;
  }
  const std::string fix = fmt::format("use pipeline.tensor_parallel: {}, which splits the heads, the MLP, the "
                                      "vocabulary{} alike",
                                      one_or_two(below, above), sp ? " and the sequence" : "");
  const std::string tp = fmt::format("pipeline.tensor_parallel ({})", t);
  if (s.usable("model.heads") && m.heads % t != 0) {
    s.combination_problem("model.heads", "pipeline.tensor_parallel", std::to_string(m.heads),
                          fmt::format("must be a multiple of {}: each tensor-parallel rank holds whole attention heads",
                                      tp),
                          fix);
  }
  if (llama_family(m.arch) && s.usable("model.kv_heads") && s.usable("model.heads") && m.heads % t == 0 &&
      kv % t != 0) {
    s.combination_problem("model.kv_heads", "pipeline.tensor_parallel", std::to_string(kv),
                          fmt::format("must be a multiple of {}: each tensor-parallel rank holds kv_heads / t "
                                      "key/value heads (ppctl does not replicate key/value heads)",
                                      tp),
                          fix);
  }
  if (s.usable("model.ffn_hidden") && s.usable("model.hidden") && ffn % t != 0) {
    s.combination_problem("model.ffn_hidden", "pipeline.tensor_parallel", std::to_string(ffn),
                          fmt::format("must be a multiple of {}: the MLP's columns are split evenly over the "
                                      "tensor-parallel ranks",
                                      tp),
                          fix);
  }
  if (sp && s.usable("pipeline.sequence_parallel") && s.usable("model.seq_len") && m.seq_len % t != 0) {
    s.combination_problem("model.seq_len", "pipeline.tensor_parallel", std::to_string(m.seq_len),
                          fmt::format("must be a multiple of {} with pipeline.sequence_parallel: each rank holds "
                                      "seq_len / t positions of the residual stream",
                                      tp),
                          fmt::format("{}; or a seq_len that {} divides, or pipeline.sequence_parallel: false", fix, t));
  }
  if (s.usable("model.vocab_size") && m.vocab_size < t) {
    s.combination_problem("model.vocab_size", "pipeline.tensor_parallel", std::to_string(m.vocab_size),
                          fmt::format("is below {}: every tensor-parallel rank holds at least one vocabulary row", tp),
                          fix);
  }
}

/// The rules on pairs of fields outside the schedule, in the order their problems are reported.
void check_combinations(SpecState& s) {
  const ModelSpec& m = s.spec.model;
  const RuntimeSpec& r = s.spec.runtime;
  check_layers_cover_stages(s);
  check_layer_split(s);
  check_min_lr(s);
  check_lr_schedule(s);
  check_data_covers_a_sequence(s);
  check_vocab_covers_bytes(s);
  check_eval(s);
  check_checkpoint(s);
  check_arch_fields(s);
  check_tensor_parallel(s);
  if (s.usable("model.hidden") && s.usable("model.heads") && m.hidden % m.heads != 0 &&
      !(llama_family(m.arch) && m.head_dim > 0)) {  // an explicit head_dim need not divide hidden
    s.combination_problem("model.heads", "model.hidden", std::to_string(m.heads),
                          fmt::format("must divide model.hidden ({})", m.hidden),
                          fmt::format("use a divisor of {} such as {}", m.hidden, divisors_near(m.hidden, m.heads)));
  }
  if (s.usable("runtime.device") && s.usable("runtime.backend") && r.backend == Backend::Nccl &&
      r.device == Device::Cpu) {
    s.combination_problem("runtime.backend", "runtime.device", quoted(to_string(r.backend)),
                          fmt::format("needs runtime.device cuda (runtime.device is cpu{})",
                                      s.seen.count("runtime.device") ? "" : ", the default"),
                          "use backend gloo or auto on cpu, or set runtime.device: cuda");
  }
  // bf16 on the wire under fp32 arithmetic would round an otherwise exact fp32 step: refused.
  if (s.usable("runtime.p2p_dtype") && s.usable("runtime.precision") && r.p2p_dtype == P2pDtype::Bf16 &&
      r.precision == Precision::Fp32) {
    s.combination_problem("runtime.p2p_dtype", "runtime.precision", quoted(to_string(r.p2p_dtype)),
                          fmt::format("needs runtime.precision bf16 or bf16-params (runtime.precision is fp32{})",
                                      s.seen.count("runtime.precision") ? "" : ", the default"),
                          "set runtime.precision: bf16, or p2p_dtype auto or fp32");
  }
}

/// pipeline.schedule_file: required with schedule custom, not allowed otherwise; resolved against the spec's
/// folder to an absolute path naming a readable regular file.
void check_schedule_file(SpecState& s) {
  PipelineSpec& p = s.spec.pipeline;
  const std::string path = "pipeline.schedule_file";
  if (!s.usable(path)) return;
  const bool custom = p.schedule == ScheduleKind::Custom;
  if (!custom && !p.schedule_file.empty()) {
    s.combination_problem(
        path, "pipeline.schedule", detail::quoted(p.schedule_file),
        fmt::format("is only read with schedule custom (pipeline.schedule is {})", to_string(p.schedule)),
        "leave pipeline.schedule_file out, or set pipeline.schedule: custom");
    return;
  }
  if (!custom) return;
  if (p.schedule_file.empty()) {
    const auto schedule = s.seen.find("pipeline.schedule");
    s.c.problems.add(
        schedule->second.line, path, std::nullopt,
        "required key is missing: schedule custom reads its actions from a CSV file",
        "add pipeline.schedule_file: my_schedule.csv (one row of actions per rank; see docs/schedules.md, custom)");
    return;
  }
  const fs::path file = resolve_against(s.c.base_dir, p.schedule_file);
  const std::string value = detail::quoted(p.schedule_file);
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    s.combination_problem(path, "pipeline.schedule", value,
                          fmt::format("names no readable file ({}: {})", file.string(), std::strerror(errno)),
                          "check the path; a relative path is resolved against " + s.c.base_dir);
  } else if (!S_ISREG(info.st_mode)) {
    s.combination_problem(path, "pipeline.schedule", value,
                          S_ISDIR(info.st_mode) ? "names a folder, not a regular file"
                                                : "names a device, pipe or socket, not a regular file",
                          "name the CSV file itself");
  } else if (::access(file.c_str(), R_OK) != 0) {
    s.combination_problem(path, "pipeline.schedule", value,
                          fmt::format("cannot be read ({}: {})", file.string(), std::strerror(errno)),
                          "check the file's permissions");
  } else {
    p.schedule_file = file.string();
  }
}

/// A cost list as YAML writes it: `1.5` for one entry, `[1, 2]` for several.
std::string costs_text(const std::vector<double>& values) {
  return values.size() == 1 ? fmt::format("{:g}", values.front()) : fmt::format("[{:g}]", fmt::join(values, ", "));
}

/// pipeline.zb_auto: only with schedule zb-auto, and each cost list one entry (every stage) or one per stage
/// (b may be absent: empty).
void check_zb_auto(SpecState& s) {
  const PipelineSpec& p = s.spec.pipeline;
  const std::string path = "pipeline.zb_auto";
  const auto written = s.seen.find(path);
  if (written == s.seen.end() || !s.usable(path) || !s.usable("pipeline.schedule")) return;
  if (p.schedule != ScheduleKind::ZBAuto) {
    const ZbAutoSpec& z = p.zb_auto;
    const std::string b = z.backward.empty() ? "" : fmt::format(", b: {}", costs_text(z.backward));
    const std::string value = fmt::format("{{f: {}, i: {}, w: {}{}, defer_penalty: {}, p2p_latency: {:g}, max_in_flight: {}}}",
                                          costs_text(z.forward), costs_text(z.input_grad), costs_text(z.weight_grad), b,
                                          costs_text(z.defer_penalty), z.p2p_latency, z.max_in_flight);
    s.combination_problem(path, "pipeline.schedule", value,
                          fmt::format("only applies to schedule zb-auto (pipeline.schedule is {})",
                                      to_string(p.schedule)),
                          "leave pipeline.zb_auto out, or set pipeline.schedule: zb-auto");
    return;
  }
  if (!s.usable("pipeline.stages")) return;
  const std::pair<const char*, const std::vector<double>*> lists[] = {
      {"f", &p.zb_auto.forward},
      {"i", &p.zb_auto.input_grad},
      {"w", &p.zb_auto.weight_grad},
      {"b", &p.zb_auto.backward},
      {"defer_penalty", &p.zb_auto.defer_penalty}};
  for (const auto& [key, values] : lists) {
    const auto n = static_cast<int64_t>(values->size());
    if (n == 1 || n == p.stages || (n == 0 && values == &p.zb_auto.backward)) continue;  // b not given: I + W
    s.c.problems.add(written->second.line, fmt::format("{}.{}", path, key), costs_text(*values),
                     fmt::format("has {} entries but pipeline.stages is {}", n, p.stages),
                     fmt::format("give one number for every stage, or {} (one per stage, in stage order)", p.stages));
  }
}

/// The schedule's own keys: stages per rank, the group size, the file of a custom schedule and zb-auto's costs.
void check_schedule(SpecState& s) {
  const PipelineSpec& p = s.spec.pipeline;
  if (!s.usable("pipeline.schedule")) return;
  if (const auto problem = virtual_stages_problem(s)) {
    s.combination_problem("pipeline.virtual_stages", "pipeline.schedule", std::to_string(p.virtual_stages),
                          problem->first, problem->second);
  }
  if (s.usable("pipeline.microbatch_group_size") && p.microbatch_group_size != 0 &&
      p.schedule != ScheduleKind::Interleaved1F1B) {
    s.combination_problem("pipeline.microbatch_group_size", "pipeline.schedule",
                          std::to_string(p.microbatch_group_size),
                          fmt::format("only applies to schedule interleaved-1f1b (pipeline.schedule is {})",
                                      to_string(p.schedule)),
                          "leave pipeline.microbatch_group_size out, or set pipeline.schedule: interleaved-1f1b");
  }
  check_schedule_file(s);
  check_zb_auto(s);
}

}  // namespace

bool SpecState::usable(const std::string& path) const {
  const std::string section = path.substr(0, path.find('.'));
  for (const auto& p : {section, path}) {
    if (const auto it = seen.find(p); it != seen.end() && !it->second.ok) return false;
  }
  return true;
}

void SpecState::combination_problem(const std::string& path, const std::string& other, const std::string& value,
                                    const std::string& rule, const std::string& hint) {
  const auto here = seen.find(path);
  const bool present = here != seen.end();
  const auto there = seen.find(other);
  const int line = present ? here->second.line : there != seen.end() ? there->second.line : 1;
  // A field taken from model.init_from's config.json is named with the file and its key there.
  const std::string& shown = present && !here->second.label.empty() ? here->second.label : path;
  c.problems.add(line, shown, present ? value : value + " (default)", rule, hint);
}

std::string SpecState::steps_named() const {
  return steps_overridden ? fmt::format("the step count (--steps {})", spec.train.steps)
                          : fmt::format("train.steps ({})", spec.train.steps);
}

void check_rules(SpecState& s) {
  check_combinations(s);
  check_schedule(s);
}

}  // namespace ppctl::config::detail
