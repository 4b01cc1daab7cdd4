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
#include <cstring>
#include <regex>

#include "core/atomic_file.hpp"
#include "core/check.hpp"
#include "core/error.hpp"
#include "data/dataset.hpp"

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

/// This rank's parameters grouped by unit file name (e.g. "block3.pt" -> its parameters), in the same order on
/// every tp rank of a stage (the gathers of unit_bytes are collectives).
std::map<std::string, std::vector<UnitParameter>> parameters_by_file(const std::vector<model::StageModule>& stages) {
  std::map<std::string, std::vector<UnitParameter>> files;
  for (const auto& stage : stages) {
    for (const auto& item : stage->named_parameters()) {
      files[checkpoint_unit(item.key()) + ".pt"].push_back({item.key(), item.value(), stage.get()});
    }
  }
  return files;
}

/// One unit file's bytes: its parameters and their AdamW state, whole (gathered over the stage's tensor-parallel
/// ranks at t > 1: every one of them calls this for the same unit), on the CPU.
std::vector<char> unit_bytes(const std::vector<UnitParameter>& params, const torch::optim::Optimizer& optimizer) {
  c10::Dict<std::string, torch::Tensor> dict;
  const auto& state = optimizer.state();
  for (const auto& [name, param, stage] : params) {
    const auto whole = [&](const torch::Tensor& t) { return stage->whole_of(name, t.detach()).cpu().clone(); };
    dict.insert("param/" + name, whole(param));
    const auto it = state.find(param.unsafeGetTensorImpl());
    if (it == state.end()) continue;
    const auto& adamw = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    dict.insert("exp_avg/" + name, whole(adamw.exp_avg()));
    dict.insert("exp_avg_sq/" + name, whole(adamw.exp_avg_sq()));
    dict.insert("step/" + name, torch::tensor(adamw.step(), torch::kLong));
  }
  return torch::pickle_save(dict);
}

[[noreturn]] void corrupt(const fs::path& file, const std::string& why) {
  throw_corrupt_checkpoint(file, why);
}

/// Rank 0, once every unit file is in `partial`: meta.json, the rename, `latest`, pruning.
void finalize(const CheckpointWriter& writer, const fs::path& partial, int64_t step, double lr) {
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
  meta.lr = lr;
  meta.schedule = CheckpointSchedule{spec.optimizer.lr_schedule, spec.optimizer.lr, spec.optimizer.min_lr,
                                     spec.optimizer.warmup_steps,
                                     writer.total_steps > 0 ? writer.total_steps : spec.train.steps};
  meta.run_hash = run_spec_hash(spec, writer.sequences_per_step);
  if (const char* job = std::getenv("SLURM_JOB_ID")) meta.slurm_job_id = job;
  for (const auto& name : checkpoint_files(spec.model.layers)) {
    const auto bytes = core::read_file(partial / name);  // throws naming a file a rank did not write
    meta.files[name] = {bytes.size(), core::fnv1a64(bytes)};
  }
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

std::string checkpoint_unit(const std::string& parameter_name) {
  const auto prefix = parameter_name.substr(0, parameter_name.find('.'));
  if (prefix == "tok_embed" || prefix == "pos_embed") return "embedding";
  if (prefix == "ln_f" || prefix == "lm_head") return "head";
  PPCTL_ASSERT(prefix.rfind("block", 0) == 0 && prefix.size() > 5 &&
                   std::all_of(prefix.begin() + 5, prefix.end(), ::isdigit),
               fmt::format("parameter {} belongs to no checkpoint unit", parameter_name));
  return prefix;
}

std::vector<std::string> checkpoint_files(int64_t layers) {
  std::vector<std::string> files{"embedding.pt"};
  for (int64_t i = 0; i < layers; ++i) files.push_back(fmt::format("block{}.pt", i));
  files.emplace_back("head.pt");
  return files;
}

void save_checkpoint(const CheckpointWriter& writer, int64_t step, double lr) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path dir = writer.spec.checkpoint.dir;
  const fs::path partial = dir / (checkpoint_name(step) + kPartialSuffix);
  if (!writer.writes) {  // tp rank > 0: its shards gathered into tp rank 0's files, unit by unit
    for (const auto& [name, params] : parameters_by_file(writer.stages)) unit_bytes(params, writer.optimizer);
    return;
  }
  if (writer.rank == 0) {
    fs::create_directories(dir);
    fs::remove_all(partial);  // a leftover of an interrupted save of this step
    fs::create_directories(partial);
  }
  if (writer.comm) writer.comm->barrier();
  int64_t written = 0;
  for (const auto& [name, params] : parameters_by_file(writer.stages)) {
    const auto bytes = unit_bytes(params, writer.optimizer);
    core::write_file_atomically(partial / name, std::string_view(bytes.data(), bytes.size()));
    ++written;
    if (writer.crash_after_files && writer.crash_after_files->first == step &&
        writer.crash_after_files->second == written) {
      spdlog::warn("fault injection: killing this worker after {} checkpoint file(s) of step {}",
                   written, step);
      std::raise(SIGKILL);
    }
  }
  if (writer.comm) writer.comm->barrier();
  if (writer.rank != 0) return;
  finalize(writer, partial, step, lr);
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
  for (const auto& name : checkpoint_files(meta.model.layers)) {
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
  std::map<std::string, std::map<std::string, torch::Tensor>> units;  // file name -> its entries
  const auto unit = [&](const std::string& name) -> const std::map<std::string, torch::Tensor>& {
    if (const auto it = units.find(name); it != units.end()) return it->second;
    const fs::path file = checkpoint / name;
    const auto bytes = core::read_file(file);
    const auto& recorded = meta.files.at(name);
    if (bytes.size() != recorded.first || core::fnv1a64(bytes) != recorded.second) {
      corrupt(file, "does not match the checksum in meta.json (altered or damaged)");
    }
    std::map<std::string, torch::Tensor> dict;
    try {
      for (const auto& item :
           torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict()) {
        dict.emplace(item.key().toStringRef(), item.value().toTensor());
      }
    } catch (const std::exception&) {
      corrupt(file, "cannot be read as a dict of tensors");
    }
    return units[name] = std::move(dict);
  };
  for (const auto& [name, params] : parameters_by_file(stages)) {
    for (const auto& [param_name, param, stage] : params) {
      // A tied head copy saved with one stage (where the head used the embedding itself) comes
      // from the embedding: both copies are kept identical, AdamW state included.
      const bool from_embedding = meta.tie_embeddings && param_name == "lm_head.weight" &&
                                  unit(name).count("param/lm_head.weight") == 0;
      const std::string file_name = from_embedding ? "embedding.pt" : name;
      const std::string key = from_embedding ? "tok_embed.weight" : param_name;
      const auto& dict = unit(file_name);
      const auto tensor = [&](const std::string& prefix) -> std::optional<torch::Tensor> {
        const auto it = dict.find(prefix + key);
        if (it == dict.end()) return std::nullopt;
        return it->second;
      };
      const fs::path file = checkpoint / file_name;
      const auto value = tensor("param/");
      if (!value) corrupt(file, fmt::format("lacks the parameter {}", key));
      // Whole tensors in the file; this rank's shard of each at t > 1 (the whole file is read: see checkpoint.hpp).
      const auto shard = [&](const torch::Tensor& whole) { return stage->shard_of(param_name, whole); };
      const auto whole_shape = stage->whole_sizes(param_name, param.sizes());
      if (value->sizes() != whole_shape) {
        corrupt(file, fmt::format("holds {} with shape [{}] where the model has [{}]", key,
                                  fmt::join(value->sizes(), ", "), fmt::join(whole_shape, ", ")));
      }
      param.copy_(shard(*value));
      const auto exp_avg = tensor("exp_avg/");
      const auto exp_avg_sq = tensor("exp_avg_sq/");
      const auto steps = tensor("step/");
      if (!exp_avg || !exp_avg_sq || !steps) continue;  // saved before AdamW's first step
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(steps->item<int64_t>());
      state->exp_avg(shard(*exp_avg).to(param.device()).clone());
      state->exp_avg_sq(shard(*exp_avg_sq).to(param.device()).clone());
      optimizer.state()[param.unsafeGetTensorImpl()] = std::move(state);
    }
  }
}

}  // namespace ppctl::checkpoint
