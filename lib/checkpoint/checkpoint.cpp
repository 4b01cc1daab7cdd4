// Checkpoint saving (per-unit files, meta.json last, atomic renames, `latest` pointer, pruning) and
// loading (resolving, checking against the spec, restoring parameters and AdamW state).
#include "checkpoint/checkpoint.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/serialize.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <regex>

#include "core/atomic_file.hpp"
#include "core/check.hpp"
#include "core/error.hpp"
#include "checkpoint/unit_reader.hpp"
#include "data/dataset.hpp"
#include "model/tensor_parallel.hpp"

namespace ppctl::checkpoint {
namespace fs = std::filesystem;

namespace {

constexpr const char* kMetaFile = "meta.json";
constexpr const char* kLatestFile = "latest";
constexpr const char* kPartialSuffix = ".partial";

std::string checkpoint_name(int64_t step) { return fmt::format("step-{:08d}", step); }

/// The step of a complete checkpoint folder's name (`step-00000100`), or -1.
int64_t step_of(const std::string& name) {
  static const std::regex pattern(R"(step-(\d+))");
  std::smatch m;
  return std::regex_match(name, m, pattern) ? std::stoll(m[1]) : -1;
}

/// A parameter of this rank and the stage holding it (which knows its tensor-parallel split).
struct UnitParameter {
  std::string name;
  torch::Tensor param;
  const model::StageModuleImpl* stage;
};

/// This rank's parameters grouped by unit (e.g. "block3" -> its parameters).
std::map<std::string, std::vector<UnitParameter>> parameters_by_unit(const std::vector<model::StageModule>& stages) {
  std::map<std::string, std::vector<UnitParameter>> units;
  for (const auto& stage : stages) {
    for (const auto& item : stage->named_parameters()) {
      units[checkpoint_unit(item.key())].push_back({item.key(), item.value(), stage.get()});
    }
  }
  return units;
}

/// One unit file's bytes: `params` as this rank holds them (its shards at t > 1) and their AdamW state, on the CPU.
std::vector<char> unit_bytes(const std::vector<UnitParameter>& params, const torch::optim::Optimizer& optimizer) {
  c10::Dict<std::string, torch::Tensor> dict;
  const auto& state = optimizer.state();
  // Cloned: a view would carry its whole storage into the file.
  const auto saved = [](const torch::Tensor& t) { return t.detach().cpu().clone(); };
  for (const auto& [name, param, stage] : params) {
    dict.insert("param/" + name, saved(param));
    const auto it = state.find(param.unsafeGetTensorImpl());
    if (it == state.end()) continue;
    const auto& adamw = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    dict.insert("exp_avg/" + name, saved(adamw.exp_avg()));
    dict.insert("exp_avg_sq/" + name, saved(adamw.exp_avg_sq()));
    dict.insert("step/" + name, torch::tensor(adamw.step(), torch::kLong));
  }
  return torch::pickle_save(dict);
}

/// The sidecar of unit file `file` in a .partial folder: its size and checksum, which finalising reads instead of
/// the tensor file (removed before the folder is renamed).
fs::path sum_path(const fs::path& file) { return fs::path(file.string() + ".sum"); }

/// Writes `bytes` to `path` and its sum beside it, each atomically.
void write_unit_file(const fs::path& path, const std::vector<char>& bytes) {
  const std::string_view view(bytes.data(), bytes.size());
  core::write_file_atomically(path, view);
  core::write_file_atomically(sum_path(path), fmt::format("{} {:016x}\n", bytes.size(), core::fnv1a64(view)));
}

/// The size and checksum write_unit_file recorded for `path`. Throws ppctl::Error naming the sum when it is
/// missing (the rank that holds the unit did not write it), CheckpointError when it is malformed.
std::pair<uint64_t, uint64_t> read_sum(const fs::path& path) {
  const auto text = core::read_file(sum_path(path));
  unsigned long long bytes = 0, checksum = 0;
  if (std::sscanf(text.c_str(), "%llu %llx", &bytes, &checksum) != 2) {
    throw CheckpointError(fmt::format("{} is not '<bytes> <fnv1a64>' (a bug: ppctl wrote it)", sum_path(path).string()));
  }
  return {bytes, checksum};
}

[[noreturn]] void corrupt(const fs::path& file, const std::string& why) {
  throw_corrupt_checkpoint(file, why);
}

/// Rank 0, once every unit file is in `partial`: meta.json, the rename, `latest`, pruning.
void finalize(const CheckpointWriter& writer, const fs::path& partial, int64_t step, double lr,
              int64_t tensor_parallel) {
  const auto& spec = writer.spec;
  CheckpointMeta meta;
  meta.step = step;
  meta.model = spec.model;
  meta.tie_embeddings = spec.model.tie_embeddings;
  meta.sequences_per_step = writer.sequences_per_step;
  meta.next_sample = step * writer.sequences_per_step;
  meta.data_counts = data::training_position(spec, meta.next_sample).counts;
  meta.data_sources = data::describe_sources(spec);
  meta.seed = spec.train.seed;
  meta.eval_fraction = spec.data.eval_fraction;
  meta.stages = spec.pipeline.stages;
  meta.tensor_parallel = tensor_parallel;
  meta.lr = lr;
  meta.schedule = CheckpointSchedule{spec.optimizer.lr_schedule, spec.optimizer.lr, spec.optimizer.min_lr,
                                     spec.optimizer.warmup_steps,
                                     writer.total_steps > 0 ? writer.total_steps : spec.train.steps};
  meta.run_hash = run_spec_hash(spec, writer.sequences_per_step);
  if (const char* job = std::getenv("SLURM_JOB_ID")) meta.slurm_job_id = job;
  for (const auto& name : checkpoint_files(spec.model.layers, tensor_parallel)) {
    meta.files[name] = read_sum(partial / name);  // throws naming a file a rank did not write
  }
  for (const auto& name : checkpoint_files(spec.model.layers, tensor_parallel)) fs::remove(sum_path(partial / name));
  core::write_file_atomically(partial / kMetaFile, checkpoint_meta_text(meta));

  const fs::path dir = spec.checkpoint.dir;
  const fs::path final_path = dir / checkpoint_name(step);
  fs::path replaced;
  if (fs::exists(final_path)) {  // a checkpoint of this step from an earlier run: kept until ours is in place
    replaced = dir / fmt::format("{}.replaced.{}", checkpoint_name(step), ::getpid());
    fs::rename(final_path, replaced);
  }
  fs::rename(partial, final_path);
  core::sync_directory(dir);
  core::write_file_atomically(dir / kLatestFile, checkpoint_name(step) + "\n");
  if (!replaced.empty()) fs::remove_all(replaced);

  // Keep the newest checkpoint.keep complete checkpoints; drop leftovers of interrupted saves.
  std::vector<std::pair<int64_t, fs::path>> complete;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (name.size() > std::strlen(kPartialSuffix) &&
        name.compare(name.size() - std::strlen(kPartialSuffix), std::string::npos, kPartialSuffix) == 0) {
      fs::remove_all(entry.path());
    } else if (const int64_t s = step_of(name); s >= 0 && entry.is_directory()) {
      complete.emplace_back(s, entry.path());
    }
  }
  std::sort(complete.begin(), complete.end());
  const auto keep = static_cast<size_t>(spec.checkpoint.keep);
  for (size_t i = 0; i + keep < complete.size(); ++i) {
    if (complete[i].first != step) fs::remove_all(complete[i].second);
  }
}

}  // namespace

void save_checkpoint(const CheckpointWriter& writer, int64_t step, double lr) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path dir = writer.spec.checkpoint.dir;
  const fs::path partial = dir / (checkpoint_name(step) + kPartialSuffix);
  PPCTL_ASSERT(!writer.stages.empty(), "a rank without stages saves a checkpoint");
  // Every stage of a rank shares its tensor-parallel group.
  const model::TensorParallel& tp = writer.stages.front()->tensor_parallel();
  const bool first_tp = tp.rank == 0;
  if (first_tp && writer.rank == 0) {
    fs::create_directories(dir);
    fs::remove_all(partial);  // a leftover of an interrupted save of this step
    fs::create_directories(partial);
  }
  // The folder exists for every rank: tp rank 0's pipeline waits for its rank 0, the other tp ranks for their tp
  // rank 0.
  if (first_tp && writer.comm) writer.comm->barrier();
  if (tp.group) tp.group->barrier();
  int64_t written = 0;
  const auto write = [&](const std::string& name, const std::vector<UnitParameter>& params) {
    write_unit_file(partial / name, unit_bytes(params, writer.optimizer));
    ++written;
    if (writer.crash_after_files && writer.crash_after_files->first == step &&
        writer.crash_after_files->second == written) {
      spdlog::warn("fault injection: killing this worker after {} checkpoint file(s) of step {}", written, step);
      std::raise(SIGKILL);
    }
  };
  for (const auto& [unit, params] : parameters_by_unit(writer.stages)) {
    if (tp.size == 1) {
      write(shard_file(unit, 1, 0), params);
      continue;
    }
    std::vector<UnitParameter> split, replicated;
    for (const auto& p : params) (model::parameter_split(p.name).replicated() ? replicated : split).push_back(p);
    write(shard_file(unit, tp.size, tp.rank), split);
    if (first_tp) write(replicated_file(unit, tp.size), replicated);  // the same on every tp rank: written once
  }
  // Every tp rank of this stage has written; then every stage of tp rank 0's pipeline.
  if (tp.group) tp.group->barrier();
  if (!first_tp) return;
  if (writer.comm) writer.comm->barrier();
  if (writer.rank != 0) return;
  finalize(writer, partial, step, lr, tp.size);
  spdlog::info("checkpoint of step {} written to {} in {:.2f} s", step,
               (dir / checkpoint_name(step)).string(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

/// Throws CheckpointError when the folder `folder` or a regular file in it cannot be opened for reading
/// (permissions): refused before any worker starts, as bad input, not later as a worker's failure.
static void check_checkpoint_readable(const fs::path& folder) {
  const auto refuse = [](const fs::path& what, int error) {
    throw CheckpointError(fmt::format("{} cannot be read: {} (fix: check its permissions; resuming reads every "
                                      "file of the checkpoint)",
                                      what.string(), std::strerror(error)));
  };
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    if (errno == EACCES || errno == EPERM) refuse(folder, errno);
    return;  // missing or not a folder: resolve_checkpoint says so
  }
  ::close(dir);
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(folder, ignored)) {
    if (!entry.is_regular_file(ignored)) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) refuse(entry.path(), errno);
    ::close(fd);
  }
}

fs::path resolve_checkpoint(const fs::path& path) {
  std::error_code ignored;
  check_checkpoint_readable(path);
  if (fs::exists(path / kMetaFile, ignored)) return path;
  if (!fs::is_directory(path, ignored)) {
    throw CheckpointError(fmt::format(
        "no checkpoint at {}: no such folder (fix: pass checkpoint.dir of an earlier run, or one of "
        "its step-NNNNNNNN folders)",
        path.string()));
  }
  const auto name = path.filename().string();
  if (name.size() > std::strlen(kPartialSuffix) &&
      name.compare(name.size() - std::strlen(kPartialSuffix), std::string::npos, kPartialSuffix) == 0) {
    throw CheckpointError(fmt::format(
        "{} is an incomplete checkpoint (no {}): it was being written when the job stopped (fix: "
        "resume from the latest complete one: --resume {})",
        path.string(), kMetaFile, path.parent_path().string()));
  }
  const fs::path latest = path / kLatestFile;
  if (!fs::exists(latest, ignored)) {
    throw CheckpointError(fmt::format(
        "no checkpoint at {}: it holds neither {} nor {} (fix: name a checkpoint.dir that has been "
        "written to, or one of its step-NNNNNNNN folders)",
        path.string(), kLatestFile, kMetaFile));
  }
  std::string target = core::read_file(latest);
  target.erase(target.find_last_not_of(" \n\r\t") + 1);
  const fs::path resolved = path / target;
  if (target.empty() || step_of(target) < 0 || !fs::exists(resolved / kMetaFile, ignored)) {
    std::vector<std::string> available;
    for (const auto& entry : fs::directory_iterator(path, ignored)) {
      const auto entry_name = entry.path().filename().string();
      if (step_of(entry_name) >= 0 && fs::exists(entry.path() / kMetaFile, ignored)) available.push_back(entry_name);
    }
    std::sort(available.begin(), available.end());
    throw CheckpointError(fmt::format(
        "{} names '{}', which is not a complete checkpoint (fix: pass one that is with --resume "
        "{}/step-NNNNNNNN; complete ones here: {})",
        latest.string(), target, path.string(), available.empty() ? "none" : fmt::format("{}", fmt::join(available, ", "))));
  }
  check_checkpoint_readable(resolved);
  return resolved;
}

CheckpointMeta read_checkpoint_meta(const fs::path& checkpoint) {
  const fs::path file = checkpoint / kMetaFile;
  const CheckpointMeta meta = parse_checkpoint_meta(core::read_file(file), file);
  for (const auto& name : checkpoint_files(meta.model.layers, meta.tensor_parallel)) {
    const auto it = meta.files.find(name);
    if (it == meta.files.end()) corrupt(file, fmt::format("does not list the unit file {}", name));
    std::error_code error;
    const auto size = fs::file_size(checkpoint / name, error);
    if (error) corrupt(checkpoint / name, fmt::format("is missing ({})", error.message()));
    if (size != it->second.first) {
      corrupt(checkpoint / name,
              fmt::format("has {} bytes where {} records {} (truncated or replaced)", size, kMetaFile,
                          it->second.first));
    }
  }
  return meta;
}

void verify_checkpoint_files(const fs::path& checkpoint, const CheckpointMeta& meta) {
  for (const auto& [name, recorded] : meta.files) {
    const auto bytes = core::read_file(checkpoint / name);
    if (bytes.size() != recorded.first || core::fnv1a64(bytes) != recorded.second) {
      corrupt(checkpoint / name, "does not match the checksum in meta.json (altered or damaged)");
    }
  }
}

void check_checkpoint_dir_writable(const fs::path& dir, const std::string& location) {
  const fs::path probe = dir / fmt::format(".write-test.{}", ::getpid());
  try {
    fs::create_directories(dir);
    core::write_file_atomically(probe, "ppctl\n");
    fs::remove(probe);
  } catch (const std::exception& e) {
    std::error_code ignored;
    fs::remove(probe, ignored);
    throw CheckpointError(fmt::format(
        "{}checkpoint.dir {} cannot hold checkpoints: {} (fix: choose a folder you can write to, on a "
        "file system with room for the model and its optimizer state)",
        location.empty() ? "" : location + ": ", dir.string(), e.what()));
  }
}

void load_checkpoint(const fs::path& checkpoint, const CheckpointMeta& meta,
                     const std::vector<model::StageModule>& stages, torch::optim::Optimizer& optimizer) {
  torch::NoGradGuard no_grad;
  UnitReader reader(checkpoint, meta);
  for (const auto& [unit, params] : parameters_by_unit(stages)) {
    for (const auto& [name, param, stage] : params) {
      const auto& tp = stage->tensor_parallel();
      const auto whole = stage->whole_sizes(name, param.sizes());
      // A tied head copy saved with one stage (where the head used the embedding itself) comes from the embedding:
      // both copies are kept identical, AdamW state included (the same split: vocabulary rows).
      std::string source_unit = unit, source = name;
      auto value = reader.find(unit, "param/" + name, whole, tp.size, tp.rank);
      if (!value && meta.tie_embeddings && name == "lm_head.weight") {
        source_unit = "embedding";
        source = "tok_embed.weight";
      }
      const auto entry = [&](const std::string& kind) {
        return reader.find(source_unit, kind + source, whole, tp.size, tp.rank);
      };
      if (!value) value = reader.get(source_unit, "param/" + source, whole, tp.size, tp.rank);
      param.copy_(*value);
      const auto exp_avg = entry("exp_avg/");
      const auto exp_avg_sq = entry("exp_avg_sq/");
      const auto steps = entry("step/");
      if (!exp_avg || !exp_avg_sq || !steps) continue;  // saved before AdamW's first step
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(steps->item<int64_t>());
      state->exp_avg(exp_avg->to(param.device()).clone());
      state->exp_avg_sq(exp_avg_sq->to(param.device()).clone());
      optimizer.state()[param.unsafeGetTensorImpl()] = std::move(state);
    }
    reader.release();  // one unit's files at a time
  }
  const auto& tp = stages.front()->tensor_parallel();
  uint64_t all = 0;
  for (const auto& [name, recorded] : meta.files) all += recorded.first;
  spdlog::info("checkpoint {} (saved at tensor_parallel {}) loaded at tp rank {} of {}: {} unit file(s), {:.2f} MiB "
               "read of the checkpoint's {:.2f} MiB",
               checkpoint.string(), meta.tensor_parallel, tp.rank, tp.size, reader.files_read().size(),
               static_cast<double>(reader.bytes_read()) / (1024.0 * 1024.0),
               static_cast<double>(all) / (1024.0 * 1024.0));
}

}  // namespace ppctl::checkpoint
