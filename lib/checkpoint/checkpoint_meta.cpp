// Checkpoint metadata: meta.json's JSON form (writing and checked parsing) and the check that a job
// spec continues a checkpoint's model, data and batch (see checkpoint_meta.hpp).
#include "checkpoint/checkpoint_meta.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "data/dataset.hpp"

namespace ppctl::checkpoint {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Version 1: whole unit files (every checkpoint written at tensor_parallel 1, and all written before tensor
/// parallelism); version 2: per-rank shard files, written at tensor_parallel > 1 (recorded as `tensor_parallel`), so
/// that a ppctl that reads only whole files refuses them naming the version rather than a missing file.
constexpr int kFormatVersion = 1;
constexpr int kShardedVersion = 2;

std::string hex(uint64_t value) { return fmt::format("{:016x}", value); }

/// The JSON integer `v` as T. A fractional number (say 1e30) is refused with CheckpointError naming
/// `file` rather than converted (out of range, the conversion is undefined); a non-number throws
/// json::type_error.
template <typename T>
T integer(const json& v, const fs::path& file) {
  if (v.is_number_float()) throw_corrupt_checkpoint(file, fmt::format("holds {} where an integer belongs", v.dump()));
  return v.get<T>();
}

/// The JSON array `v` of integers as a vector (see integer()).
std::vector<int64_t> integers(const json& v, const fs::path& file) {
  std::vector<int64_t> out;
  for (const auto& item : v.get<std::vector<json>>()) out.push_back(integer<int64_t>(item, file));
  return out;
}

/// `key` of the JSON object `m`, spelled as config::to_string spells one of `values`, into `out`; a
/// missing key keeps `out`. Throws CheckpointError (naming `file` and `what`.`key`) on another spelling.
template <typename Enum>
void read_enum(const json& m, const char* what, const char* key, std::initializer_list<Enum> values,
               const fs::path& file, Enum& out) {
  if (!m.contains(key)) return;
  const auto name = m.at(key).get<std::string>();
  for (const Enum value : values) {
    if (name == config::to_string(value)) {
      out = value;
      return;
    }
  }
  throw_corrupt_checkpoint(file, fmt::format("names an unknown {}.{} '{}'", what, key, name));
}

/// The architecture fields of meta.json's `model` into `out`. Checkpoints written before model.arch
/// existed have none of them and hold a GPT-2 with today's defaults (0 = the rule for ffn_hidden and
/// kv_heads), so a missing key keeps ModelSpec's default. Throws json::exception on a wrong type,
/// CheckpointError (naming `file`) on an unknown architecture or activation.
void read_arch_fields(const json& m, const fs::path& file, config::ModelSpec& out) {
  read_enum(m, "model", "arch",
            {config::Arch::Gpt2, config::Arch::Llama, config::Arch::Qwen2, config::Arch::Qwen3, config::Arch::Mistral},
            file, out.arch);
  read_enum(m, "model", "activation", {config::Activation::Gelu, config::Activation::GeluTanh}, file,
            out.activation);
  out.norm_eps = m.value("norm_eps", out.norm_eps);
  out.rope_theta = m.value("rope_theta", out.rope_theta);
  if (m.contains("ffn_hidden")) out.ffn_hidden = integer<int64_t>(m.at("ffn_hidden"), file);
  if (m.contains("kv_heads")) out.kv_heads = integer<int64_t>(m.at("kv_heads"), file);
  if (m.contains("head_dim")) out.head_dim = integer<int64_t>(m.at("head_dim"), file);
  if (m.contains("sliding_window")) out.sliding_window = integer<int64_t>(m.at("sliding_window"), file);
  if (m.contains("rope_scaling")) {
    const json& r = m.at("rope_scaling");
    config::RopeScaling& s = out.rope_scaling;
    read_enum(r, "model.rope_scaling", "rope_type",
              {config::RopeType::Default, config::RopeType::Linear, config::RopeType::Llama3, config::RopeType::Yarn},
              file, s.rope_type);
    s.factor = r.at("factor").get<double>();
    s.low_freq_factor = r.at("low_freq_factor").get<double>();
    s.high_freq_factor = r.at("high_freq_factor").get<double>();
    s.original_max_position_embeddings = integer<int64_t>(r.at("original_max_position_embeddings"), file);
    s.attention_factor = r.at("attention_factor").get<double>();
    s.beta_fast = r.at("beta_fast").get<double>();
    s.beta_slow = r.at("beta_slow").get<double>();
    s.mscale = r.at("mscale").get<double>();
    s.mscale_all_dim = r.at("mscale_all_dim").get<double>();
    s.truncate = r.at("truncate").get<bool>();
  }
}

/// meta.json's `schedule` object (lr_schedule, lr, min_lr, warmup_steps, steps; all required).
/// Throws json::exception on a missing key or wrong type, CheckpointError on an unknown schedule.
CheckpointSchedule read_schedule(const json& s, const fs::path& file) {
  CheckpointSchedule out;
  if (!s.contains("lr_schedule")) throw_corrupt_checkpoint(file, "has a schedule without lr_schedule");
  read_enum(s, "schedule", "lr_schedule",
            {config::LrSchedule::Constant, config::LrSchedule::Cosine, config::LrSchedule::Linear}, file,
            out.lr_schedule);
  out.lr = s.at("lr").get<double>();
  out.min_lr = s.at("min_lr").get<double>();
  out.warmup_steps = integer<int64_t>(s.at("warmup_steps"), file);
  out.steps = integer<int64_t>(s.at("steps"), file);
  return out;
}

/// Every field of meta.json except the value checks (see parse_checkpoint_meta).
CheckpointMeta read_fields(const json& j, const fs::path& file) {
  if (j.at("format") != "ppctl-checkpoint" || (j.at("version") != kFormatVersion && j.at("version") != kShardedVersion)) {
    throw_corrupt_checkpoint(file, fmt::format("is not a version {} or {} ppctl checkpoint", kFormatVersion,
                                               kShardedVersion));
  }
  CheckpointMeta meta;
  // Absent in version 1 (whole unit files); at least 2 in version 2 (checked with the other values).
  meta.tensor_parallel = j.at("version") == kShardedVersion ? integer<int64_t>(j.at("tensor_parallel"), file) : 1;
  if (j.at("version") == kShardedVersion && meta.tensor_parallel < 2) {
    throw_corrupt_checkpoint(file, fmt::format("is a version {} checkpoint with tensor_parallel {}; version {} is "
                                               "written at tensor_parallel 2 or more",
                                               kShardedVersion, meta.tensor_parallel, kShardedVersion));
  }
  meta.step = integer<int64_t>(j.at("step"), file);
  const auto& m = j.at("model");
  meta.model.vocab_size = integer<int64_t>(m.at("vocab_size"), file);
  meta.model.layers = integer<int64_t>(m.at("layers"), file);
  meta.model.hidden = integer<int64_t>(m.at("hidden"), file);
  meta.model.heads = integer<int64_t>(m.at("heads"), file);
  meta.model.seq_len = integer<int64_t>(m.at("seq_len"), file);
  meta.tie_embeddings = m.at("tie_embeddings").get<bool>();
  meta.model.tie_embeddings = meta.tie_embeddings;
  read_arch_fields(m, file, meta.model);
  // model.init_from: absent when empty, and in checkpoints from before exports copied its tokenizer files
  if (m.contains("init_from")) meta.model.init_from = m.at("init_from").get<std::string>();
  meta.sequences_per_step = integer<int64_t>(j.at("sequences_per_step"), file);
  meta.next_sample = integer<int64_t>(j.at("next_sample"), file);
  if (j.contains("data")) {  // absent before blends: one text source, counts = {next_sample}
    meta.data_sources = j.at("data").at("sources").get<std::vector<std::string>>();
    meta.data_counts = integers(j.at("data").at("counts"), file);
  }
  meta.seed = integer<uint64_t>(j.at("seed"), file);
  meta.eval_fraction = j.at("eval_fraction").get<double>();
  meta.stages = integer<int64_t>(j.at("stages"), file);
  meta.lr = j.at("lr").get<double>();
  if (j.contains("schedule")) meta.schedule = read_schedule(j.at("schedule"), file);  // absent before it was recorded
  if (j.contains("run")) {  // absent before --resume auto
    meta.run_hash = j.at("run").at("spec_hash").get<std::string>();
    meta.slurm_job_id = j.at("run").at("slurm_job_id").get<std::string>();
  }
  for (const auto& [name, entry] : j.at("files").items()) {
    const auto checksum = entry.at("fnv1a64").get<std::string>();
    size_t used = 0;
    const uint64_t value = std::stoull(checksum, &used, 16);
    if (used != checksum.size()) throw std::invalid_argument(checksum);
    meta.files[name] = {integer<uint64_t>(entry.at("bytes"), file), value};
  }
  return meta;
}

/// Values a hand edit or a damaged file could put out of range: refused here, not mid-step.
void check_values(const CheckpointMeta& meta, const fs::path& file) {
  const auto& m = meta.model;
  int64_t expected_next = 0;
  const bool overflow = __builtin_mul_overflow(meta.step, meta.sequences_per_step, &expected_next);
  if (meta.step < 1 || meta.sequences_per_step < 1 || overflow || meta.next_sample != expected_next ||
      m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.seq_len < 1 || m.vocab_size < 1 ||
      !(meta.eval_fraction >= 0.0 && meta.eval_fraction <= 0.5)) {
    throw_corrupt_checkpoint(
        file, fmt::format("holds values no checkpoint has (step {}, sequences_per_step {}, next_sample {}, "
                          "layers {}, hidden {}, eval_fraction {})",
                          meta.step, meta.sequences_per_step, meta.next_sample, m.layers, m.hidden,
                          meta.eval_fraction));
  }
  // Each count lies in [0, next_sample]; a sum checked that way cannot overflow.
  int64_t counted = 0;
  bool counts_ok = meta.data_counts.size() == meta.data_sources.size();
  for (const int64_t c : meta.data_counts) {
    counts_ok = counts_ok && c >= 0 && c <= meta.next_sample - counted;
    if (counts_ok) counted += c;
  }
  if (!meta.data_counts.empty() && (!counts_ok || counted != meta.next_sample)) {
    throw_corrupt_checkpoint(file, fmt::format("holds a data position whose {} per-source counts do not sum to "
                                               "next_sample {}",
                                               meta.data_counts.size(), meta.next_sample));
  }
  // Version 2 is written at t >= 2 only, with t + 1 files per unit (checkpoint_files): a t beyond the files listed
  // cannot be complete (and is not expanded into file names).
  if (meta.tensor_parallel < 1 || static_cast<uint64_t>(meta.tensor_parallel) > meta.files.size()) {
    throw_corrupt_checkpoint(file, fmt::format("holds tensor_parallel {} with {} unit files listed, which no "
                                               "checkpoint has",
                                               meta.tensor_parallel, meta.files.size()));
  }
  // embedding.pt, block0.pt ... head.pt: a layer count beyond the files listed cannot be complete.
  if (static_cast<uint64_t>(m.layers) + 2 > meta.files.size()) {
    throw_corrupt_checkpoint(file, fmt::format("lists {} unit files, fewer than model.layers {} + 2",
                                               meta.files.size(), m.layers));
  }
  if (meta.schedule) {
    const auto& s = *meta.schedule;
    if (!(s.lr > 0.0) || !(s.min_lr >= 0.0 && s.min_lr <= s.lr) || s.warmup_steps < 0 || s.steps < 1) {
      throw_corrupt_checkpoint(file, fmt::format("holds a learning-rate schedule no run has (lr {}, min_lr {}, "
                                                 "warmup_steps {}, steps {})",
                                                 s.lr, s.min_lr, s.warmup_steps, s.steps));
    }
  }
}

/// Another checkpoint beside the folder that holds `file` (a `step-*` folder with a meta.json in the
/// same checkpoint.dir): the newest one older than it, else the oldest newer one; empty when there is
/// none. Never throws (a folder that cannot be listed counts as having none).
std::string other_checkpoint(const fs::path& file) {
  const fs::path folder = file.parent_path();
  std::error_code error;
  std::string older, newer;
  for (fs::directory_iterator it(folder.parent_path(), error), end; !error && it != end; it.increment(error)) {
    const fs::path candidate = it->path();
    const std::string name = candidate.filename().string();
    if (name.rfind("step-", 0) != 0 || candidate == folder || !fs::exists(candidate / "meta.json", error)) continue;
    if (name < folder.filename().string()) {
      if (older.empty() || candidate.string() > older) older = candidate.string();
    } else if (newer.empty() || candidate.string() < newer) {
      newer = candidate.string();
    }
  }
  return older.empty() ? newer : older;
}

/// meta.json's `model` object (the resolved ffn_hidden and kv_heads).
json model_json(const config::ModelSpec& m) {
  return {{"vocab_size", m.vocab_size},
          {"layers", m.layers},
          {"hidden", m.hidden},
          {"heads", m.heads},
          {"seq_len", m.seq_len},
          {"tie_embeddings", m.tie_embeddings},
          {"arch", config::to_string(m.arch)},
          {"activation", config::to_string(m.activation)},
          {"norm_eps", m.norm_eps},
          {"rope_theta", m.rope_theta},
          {"ffn_hidden", config::ffn_hidden_of(m)},
          {"kv_heads", config::kv_heads_of(m)},
          {"head_dim", m.head_dim},
          {"sliding_window", m.sliding_window},
          {"rope_scaling",
           {{"rope_type", config::to_string(m.rope_scaling.rope_type)},
            {"factor", m.rope_scaling.factor},
            {"low_freq_factor", m.rope_scaling.low_freq_factor},
            {"high_freq_factor", m.rope_scaling.high_freq_factor},
            {"original_max_position_embeddings", m.rope_scaling.original_max_position_embeddings},
            {"attention_factor", m.rope_scaling.attention_factor},
            {"beta_fast", m.rope_scaling.beta_fast},
            {"beta_slow", m.rope_scaling.beta_slow},
            {"mscale", m.rope_scaling.mscale},
            {"mscale_all_dim", m.rope_scaling.mscale_all_dim},
            {"truncate", m.rope_scaling.truncate}}}};
}

}  // namespace

std::string run_spec_hash(const config::JobSpec& spec, int64_t sequences_per_step) {
  const auto& o = spec.optimizer;
  auto model = model_json(spec.model);
  model["dropout"] = spec.model.dropout;
  const json run = {{"model", model},
                    {"data", data::describe_sources(spec)},
                    {"eval_fraction", spec.data.eval_fraction},
                    {"seed", spec.train.seed},
                    {"sequences_per_step", sequences_per_step},
                    {"optimizer",
                     {{"lr", o.lr}, {"betas", {o.beta1, o.beta2}}, {"eps", o.eps}, {"weight_decay", o.weight_decay},
                      {"lr_schedule", config::to_string(o.lr_schedule)}, {"warmup_steps", o.warmup_steps},
                      {"min_lr", o.min_lr}, {"clip_grad_norm", o.clip_grad_norm}}},
                    {"precision", config::to_string(spec.runtime.precision)}};
  return hex(core::fnv1a64(run.dump()));
}

std::optional<std::string> run_mismatch(const CheckpointMeta& meta, const std::string& spec_hash,
                                        const std::string& slurm_job_id) {
  if (meta.run_hash.empty()) return std::string("it records no run (written by a ppctl from before --resume auto)");
  if (!slurm_job_id.empty() && meta.slurm_job_id == slurm_job_id) return std::nullopt;
  if (meta.run_hash == spec_hash) return std::nullopt;
  auto why = fmt::format("it was written by a run with spec hash {} (this spec: {})", meta.run_hash, spec_hash);
  if (!meta.slurm_job_id.empty() || !slurm_job_id.empty())
    why += fmt::format(", in Slurm job {} (this job: {})", meta.slurm_job_id.empty() ? "none" : meta.slurm_job_id,
                       slurm_job_id.empty() ? "none" : slurm_job_id);
  return why;
}

void throw_corrupt_checkpoint(const fs::path& file, const std::string& why) {
  const std::string other = other_checkpoint(file);
  throw CheckpointError(fmt::format(
      "checkpoint file {} {} (fix: {})", file.string(), why,
      other.empty() ? fmt::format("no other checkpoint is beside {}: train from the start without --resume, "
                                  "after moving that folder away",
                                  file.parent_path().string())
                    : fmt::format("resume from another complete checkpoint, e.g. --resume {}", other)));
}

std::string checkpoint_meta_text(const CheckpointMeta& meta) {
  json files = json::object();
  for (const auto& [name, entry] : meta.files) {
    files[name] = {{"bytes", entry.first}, {"fnv1a64", hex(entry.second)}};
  }
  json j = {{"format", "ppctl-checkpoint"},
            {"version", meta.tensor_parallel > 1 ? kShardedVersion : kFormatVersion},
            {"step", meta.step},
            {"model", model_json(meta.model)},
            {"sequences_per_step", meta.sequences_per_step},
            {"next_sample", meta.next_sample},
            {"data", {{"sources", meta.data_sources}, {"counts", meta.data_counts}}},
            {"seed", meta.seed},
            {"eval_fraction", meta.eval_fraction},
            {"stages", meta.stages},
            {"lr", meta.lr},
            {"files", files}};
  if (!meta.model.init_from.empty()) j["model"]["init_from"] = meta.model.init_from;
  if (meta.tensor_parallel > 1) j["tensor_parallel"] = meta.tensor_parallel;
  if (meta.schedule) {
    const auto& s = *meta.schedule;
    j["schedule"] = {{"lr_schedule", config::to_string(s.lr_schedule)},
                     {"lr", s.lr},
                     {"min_lr", s.min_lr},
                     {"warmup_steps", s.warmup_steps},
                     {"steps", s.steps}};
  }
  if (!meta.run_hash.empty()) j["run"] = {{"spec_hash", meta.run_hash}, {"slurm_job_id", meta.slurm_job_id}};
  return j.dump(2) + "\n";
}

CheckpointMeta parse_checkpoint_meta(std::string_view text, const fs::path& file) {
  CheckpointMeta meta;
  try {
    meta = read_fields(json::parse(text), file);
  } catch (const json::exception& e) {
    throw_corrupt_checkpoint(file, fmt::format("cannot be read as checkpoint metadata ({})", e.what()));
  } catch (const std::logic_error&) {  // std::stoull: invalid_argument, out_of_range
    throw_corrupt_checkpoint(file, "has a malformed checksum");
  }
  check_values(meta, file);
  return meta;
}

void check_continues(const CheckpointMeta& meta, const config::JobSpec& spec, int64_t sequences_per_step,
                     const fs::path& checkpoint) {
  // A field the checkpoint and the spec must agree on: its name, both values as text, and why.
  struct Same {
    const char* field;
    std::string saved, wanted;
    const char* why;
  };
  const auto& a = meta.model;
  const auto& b = spec.model;
  const char* shape = "the checkpoint holds another model";
  const Same fields[] = {
      {"model.vocab_size", std::to_string(a.vocab_size), std::to_string(b.vocab_size), shape},
      {"model.layers", std::to_string(a.layers), std::to_string(b.layers), shape},
      {"model.hidden", std::to_string(a.hidden), std::to_string(b.hidden), shape},
      {"model.heads", std::to_string(a.heads), std::to_string(b.heads), shape},
      {"model.seq_len", std::to_string(a.seq_len), std::to_string(b.seq_len), shape},
      {"model.tie_embeddings", meta.tie_embeddings ? "true" : "false", b.tie_embeddings ? "true" : "false",
       shape},
      {"model.arch", config::to_string(a.arch), config::to_string(b.arch), shape},
      {"model.ffn_hidden", std::to_string(config::ffn_hidden_of(a)), std::to_string(config::ffn_hidden_of(b)),
       shape},
      {"model.kv_heads", std::to_string(config::kv_heads_of(a)), std::to_string(config::kv_heads_of(b)), shape},
      {"model.head_dim", std::to_string(config::head_dim_of(a)), std::to_string(config::head_dim_of(b)), shape},
      {"train.seed", std::to_string(meta.seed), std::to_string(spec.train.seed),
       "the data order would not continue"},
      {"data.eval_fraction", fmt::format("{:g}", meta.eval_fraction), fmt::format("{:g}", spec.data.eval_fraction),
       "other sequences would train"},
  };
  for (const auto& f : fields) {
    if (f.saved == f.wanted) continue;
    throw CheckpointError(fmt::format(
        "{}: {} is {} in the checkpoint {} but {} in {}: {} (fix: resume with {}: {}, or start a new "
        "run with another checkpoint.dir)",
        spec.source, f.field, f.saved, checkpoint.string(), f.wanted, spec.source, f.why, f.field, f.saved));
  }
  if (!meta.data_sources.empty() && meta.data_sources != data::describe_sources(spec)) {
    throw CheckpointError(fmt::format(
        "{}: the data sources differ from those of the checkpoint {} (saved: [{}]; now: [{}]): the data position "
        "would not continue (fix: resume with the same data.path / data.blend, data.format and data.dtype, and for a "
        "chat dataset the same conversations and data.overlong, or start a new run with another checkpoint.dir)",
        spec.source, checkpoint.string(), fmt::join(meta.data_sources, "; "),
        fmt::join(data::describe_sources(spec), "; ")));
  }
  if (!meta.data_counts.empty() && meta.data_counts != data::training_position(spec, meta.next_sample).counts) {
    throw CheckpointError(fmt::format(
        "{}: the checkpoint {} records a data position [{}] after {} samples that the blend rule does not give for "
        "this spec (damaged or edited meta.json; fix: resume from another checkpoint)",
        spec.source, checkpoint.string(), fmt::join(meta.data_counts, ", "), meta.next_sample));
  }
  if (meta.sequences_per_step != sequences_per_step) {
    throw CheckpointError(fmt::format(
        "{}: the global batch is {} sequences per step (pipeline.microbatches x "
        "pipeline.micro_batch_size x dp) but the checkpoint {} was saved with {}: the data position "
        "and the LR schedule would not continue (fix: choose microbatches and micro_batch_size whose "
        "product with dp is {})",
        spec.source, sequences_per_step, checkpoint.string(), meta.sequences_per_step,
        meta.sequences_per_step));
  }
}

}  // namespace ppctl::checkpoint
