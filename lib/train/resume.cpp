// Whether a job can resume from a checkpoint (resume.hpp): the learning-rate part reads the
// checkpoint's recorded schedule and compares the rate of every step still to train.
#include "train/resume.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "optim/lr_schedule.hpp"

namespace ppctl::train {
namespace fs = std::filesystem;
using checkpoint::CheckpointMeta;
using checkpoint::check_continues;

namespace {

bool decays(config::LrSchedule schedule) { return schedule != config::LrSchedule::Constant; }

/// The first optimizer step (from 0) in [from, to) whose learning rate differs between `saved` over
/// `saved_steps` steps and `now` over `now_steps` (optim/lr_schedule.hpp), or none. After both warmups a
/// schedule that cannot decay (constant, or min_lr = lr) keeps one rate, so the scan stops there when both
/// are such; decaying schedules with other parameters differ within a step or two (their decay progress
/// differs), so the scan is short unless the rates really are equal.
std::optional<int64_t> first_differing_step(const config::OptimizerSpec& saved, int64_t saved_steps,
                                            const config::OptimizerSpec& now, int64_t now_steps, int64_t from,
                                            int64_t to) {
  const auto flat = [](const config::OptimizerSpec& o) { return !decays(o.lr_schedule) || o.min_lr == o.lr; };
  const int64_t warm = std::max(saved.warmup_steps, now.warmup_steps);
  for (int64_t step = from; step < to; ++step) {
    if (optim::learning_rate(saved, step, saved_steps) != optim::learning_rate(now, step, now_steps)) return step;
    if (step >= warm && flat(saved) && flat(now)) return std::nullopt;
  }
  return std::nullopt;
}

/// The learning-rate part of check_resumable (see there).
void check_schedule(const CheckpointMeta& meta, const config::JobSpec& spec, int64_t total_steps,
                    const fs::path& checkpoint) {
  if (!meta.schedule) {
    spdlog::warn("{}: the checkpoint {} predates recorded learning-rate schedules (older ppctl): the schedule of {} "
                 "applies from step {} on, unchecked (it continues only if optimizer.* and train.steps are those "
                 "the checkpoint was trained with)",
                 spec.source, checkpoint.string(), spec.source, meta.step + 1);
    return;
  }
  const auto& saved = *meta.schedule;
  const auto& now = spec.optimizer;
  struct Field {
    const char* name;
    std::string saved, wanted;
    bool matters;  // min_lr and the step count shape only a decaying schedule
  };
  const bool decaying = decays(saved.lr_schedule) || decays(now.lr_schedule);
  const Field fields[] = {
      {"optimizer.lr_schedule", config::to_string(saved.lr_schedule), config::to_string(now.lr_schedule), true},
      {"optimizer.lr", fmt::format("{:g}", saved.lr), fmt::format("{:g}", now.lr), true},
      {"optimizer.warmup_steps", std::to_string(saved.warmup_steps), std::to_string(now.warmup_steps), true},
      {"optimizer.min_lr", fmt::format("{:g}", saved.min_lr), fmt::format("{:g}", now.min_lr), decaying},
      {"train.steps", std::to_string(saved.steps), std::to_string(total_steps), decaying},
  };
  std::vector<std::string> changes, fixes;
  bool steps_changed = false;
  for (const auto& f : fields) {
    if (!f.matters || f.saved == f.wanted) continue;
    const bool steps = std::string_view(f.name) == "train.steps";
    steps_changed = steps_changed || steps;
    changes.push_back(fmt::format("{} is {} in the checkpoint {} but {} now{}", f.name, f.saved, checkpoint.string(),
                                  f.wanted, steps ? " (train.steps or --steps)" : ""));
    fixes.push_back(fmt::format("{}: {}", f.name, f.saved));
  }
  if (changes.empty()) return;
  // What the run was heading for: the saved schedule; what it would get: the spec's. Only the rates of the
  // steps still to train matter, so a change that leaves all of them equal is accepted.
  config::OptimizerSpec heading = now;
  heading.lr_schedule = saved.lr_schedule;
  heading.lr = saved.lr;
  heading.min_lr = saved.min_lr;
  heading.warmup_steps = saved.warmup_steps;
  const auto step = first_differing_step(heading, saved.steps, now, total_steps, meta.step, total_steps);
  if (!step) {
    spdlog::info("{}: {}: the learning rate of every step still to train (from step {}) is unchanged",
                 spec.source, fmt::join(changes, "; "), meta.step + 1);
    return;
  }
  throw CheckpointError(fmt::format(
      "{}: {}: the {} learning-rate schedule would not continue (step {} would train at rate {:g} instead of {:g}, "
      "the rate the run was heading for) (fix: resume with {}{}, or start a new run with another checkpoint.dir)",
      spec.source, fmt::join(changes, "; "), config::to_string(saved.lr_schedule), *step + 1,
      optim::learning_rate(now, *step, total_steps), optim::learning_rate(heading, *step, saved.steps), fmt::join(fixes, " and "),
      steps_changed ? " and no other --steps" : ""));
}

}  // namespace

void check_resumable(const CheckpointMeta& meta, const config::JobSpec& spec, int64_t sequences_per_step,
                     int64_t total_steps, const fs::path& checkpoint) {
  check_continues(meta, spec, sequences_per_step, checkpoint);
  check_schedule(meta, spec, total_steps, checkpoint);
  if (meta.step >= total_steps) {
    throw CheckpointError(fmt::format(
        "{}: the checkpoint {} is at step {}, and train.steps (or --steps) is {}: nothing is left to "
        "train (fix: {})",
        spec.source, checkpoint.string(), meta.step, total_steps,
        meta.schedule && decays(meta.schedule->lr_schedule)
            ? fmt::format("its {} schedule has ended, so the run is complete; to train on, start a new run with "
                          "another checkpoint.dir", config::to_string(meta.schedule->lr_schedule))
            : fmt::format("raise train.steps or pass --steps above {}", meta.step)));
  }
}

}  // namespace ppctl::train
