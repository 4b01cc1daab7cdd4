// Per-layer times from a costs file or from a previous run's run directory.
#include "schedule/layer_costs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "config/load.hpp"
#include "core/error.hpp"
#include "plan/cost_file.hpp"
#include "schedule/job_program.hpp"
#include "schedule/split_time.hpp"

namespace ppctl::schedule {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_text(const fs::path& path) {
  std::error_code ignored;
  if (!fs::is_regular_file(path, ignored)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// "model.hidden 64 there, 32 here" for every cost-relevant field on which the two specs differ.
std::vector<std::string> model_differences(const config::JobSpec& run, const config::JobSpec& job) {
  std::vector<std::string> out;
  const auto field = [&](const char* name, auto there, auto here) {
    if (there != here) out.push_back(fmt::format("{} {} there, {} here", name, there, here));
  };
  field("model.arch", config::to_string(run.model.arch), config::to_string(job.model.arch));
  field("model.layers", run.model.layers, job.model.layers);
  field("model.hidden", run.model.hidden, job.model.hidden);
  field("model.heads", run.model.heads, job.model.heads);
  field("model.kv_heads", config::kv_heads_of(run.model), config::kv_heads_of(job.model));
  field("model.ffn_hidden", config::ffn_hidden_of(run.model), config::ffn_hidden_of(job.model));
  field("model.vocab_size", run.model.vocab_size, job.model.vocab_size);
  field("model.seq_len", run.model.seq_len, job.model.seq_len);
  return out;
}

/// Notes on runtime settings that change how long the same model takes.
std::vector<std::string> runtime_differences(const config::JobSpec& run, const config::JobSpec& job) {
  std::vector<std::string> out;
  const auto field = [&](const char* name, const std::string& there, const std::string& here) {
    if (there != here) {
      out.push_back(fmt::format("the run had {} {}, this job {}: its times may not carry over", name, there, here));
    }
  };
  field("runtime.device", config::to_string(run.runtime.device), config::to_string(job.runtime.device));
  field("runtime.precision", config::to_string(run.runtime.precision), config::to_string(job.runtime.precision));
  field("train.recompute", config::to_string(run.train.recompute), config::to_string(job.train.recompute));
  field("runtime.threads_per_worker", std::to_string(run.runtime.threads_per_worker),
        std::to_string(job.runtime.threads_per_worker));
  field("pipeline.data_parallel", std::to_string(run.pipeline.data_parallel), std::to_string(job.pipeline.data_parallel));
  // Each F, B and I holds its tp collectives and 1/t of the work: times at another t (or with the sequence split
  // another way) are not this job's, whatever the `tp comm` line assumes.
  const auto tp = [](const config::JobSpec& spec) { return std::max<int64_t>(spec.pipeline.tensor_parallel, 1); };
  field("pipeline.tensor_parallel", std::to_string(tp(run)), std::to_string(tp(job)));
  const auto splits_sequence = [&](const config::JobSpec& spec) {
    return tp(spec) > 1 && spec.pipeline.sequence_parallel ? "true" : "false";
  };
  if (tp(run) == tp(job)) field("pipeline.sequence_parallel", splits_sequence(run), splits_sequence(job));
  return out;
}

/// The block ranges the run laid out: what plan::make_layout gives for its spec (balance auto
/// simulated over its program, as every worker did).
std::vector<plan::LayerRange> run_split(const config::JobSpec& run) {
  if (run.pipeline.balance != "auto" || !run.pipeline.layers_per_stage.empty()) return plan::spec_split(run);
  const auto program = job_program(run, nullptr);
  std::vector<plan::LayerRange> split;
  for (const auto& stage : job_layout(run, program).stages) split.push_back(stage.layers);
  return split;
}

}  // namespace

std::vector<plan::PieceTime> trace_stage_times(const std::string& trace_text, const std::string& source,
                                               int64_t num_stages, int64_t& first_step, int64_t& last_step) {
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(trace_text);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number beyond double (1e999)
    throw PlanError(fmt::format("{}: not a trace (not JSON: {}) (fix: give the run directory of a finished "
                                "`ppctl train`, whose launcher merged trace.json)",
                                source, e.what()));
  }
  // durations[stage][kind]: per step, the action durations in ms (kind = ActionKind F, B, I, W).
  std::map<int64_t, std::array<std::map<int64_t, std::vector<double>>, 4>> durations;
  const auto* events = trace.is_object() && trace.contains("traceEvents") ? &trace["traceEvents"] : nullptr;
  if (events == nullptr || !events->is_array()) {
    throw PlanError(fmt::format("{}: no traceEvents list (fix: give the run directory of a `ppctl train`)", source));
  }
  std::vector<int64_t> steps;
  for (const auto& e : *events) {
    if (!e.is_object() || e.value("ph", "") != "X" || !e.contains("args") || !e["args"].is_object()) continue;
    const std::string cat = e.value("cat", "");
    const auto kind = cat == "F" ? 0 : cat == "B" ? 1 : cat == "I" ? 2 : cat == "W" ? 3 : -1;
    const auto& args = e["args"];
    if (kind < 0 || !args.contains("stage") || !args.contains("step") || !e.contains("dur")) continue;
    if (!args["stage"].is_number_integer() || !args["step"].is_number_integer() || !e["dur"].is_number()) continue;
    const auto step = args["step"].get<int64_t>();
    durations[args["stage"].get<int64_t>()][static_cast<size_t>(kind)][step].push_back(e["dur"].get<double>() / 1000.0);
    steps.push_back(step);
  }
  if (steps.empty()) {
    throw PlanError(fmt::format("{}: no F, B, I or W actions traced (fix: train with observe.trace_steps >= 2 and "
                                "give that run directory)",
                                source));
  }
  first_step = *std::min_element(steps.begin(), steps.end());
  last_step = *std::max_element(steps.begin(), steps.end());
  if (last_step > first_step) ++first_step;  // the first step carries start-up costs
  std::vector<plan::PieceTime> out;
  for (int64_t s = 0; s < num_stages; ++s) {
    std::array<std::optional<double>, 4> kind_median;
    for (size_t k = 0; k < 4; ++k) {
      std::vector<double> used;
      for (const auto& [step, values] : durations[s][k]) {
        if (step >= first_step) used.insert(used.end(), values.begin(), values.end());
      }
      if (!used.empty()) kind_median[k] = median(used);
    }
    const bool split_backward = kind_median[2] && kind_median[3];
    if (!kind_median[0] || (!kind_median[1] && !split_backward)) {
      throw PlanError(fmt::format("{}: stage {} has no traced {} (the trace has stages {}; the run's spec has {}) "
                                  "(fix: give the run directory of a finished run of this spec)",
                                  source, s, kind_median[0] ? "backward" : "forward",
                                  durations.empty() ? "none" : fmt::format("0-{}", durations.rbegin()->first),
                                  num_stages));
    }
    out.push_back({*kind_median[0], kind_median[1] ? *kind_median[1] : *kind_median[2] + *kind_median[3]});
  }
  return out;
}

std::optional<double> trace_post_ms(const std::string& trace_text, int64_t first_step) {
  const auto trace = nlohmann::json::parse(trace_text);
  std::vector<double> durations;
  for (const auto& e : trace.value("traceEvents", nlohmann::json::array())) {
    if (!e.is_object() || e.value("ph", "") != "X" || !e.contains("args") || !e["args"].is_object()) continue;
    const std::string cat = e.value("cat", "");
    if ((cat != "send" && cat != "recv") || !e.contains("dur") || !e["dur"].is_number()) continue;
    const auto& step = e["args"].value("step", nlohmann::json());
    if (!step.is_number_integer() || step.get<int64_t>() < first_step) continue;
    durations.push_back(e["dur"].get<double>() / 1000.0);
  }
  if (durations.empty()) return std::nullopt;
  return median(durations);
}

/// The longest step time metrics_step_ms takes, ms (about 11.6 days; the spec's bound on any cost in ms).
constexpr double kMaxStepMs = 1e9;

std::optional<double> metrics_step_ms(const std::string& metrics_text, int64_t first_step) {
  std::vector<double> steps;
  std::istringstream lines(metrics_text);
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || record.value("event", "") != "step" || record.value("skipped", false)) continue;
    const auto& step = record.value("step", nlohmann::json());
    const auto& seconds = record.value("step_time_s", nlohmann::json());
    if (!step.is_number_integer() || step.get<int64_t>() < first_step || !seconds.is_number()) continue;
    const double ms = seconds.get<double>() * 1000.0;
    if (ms > 0.0 && ms <= kMaxStepMs) steps.push_back(ms);  // a hand-edited 0, negative, huge or NaN: not a step
  }
  if (steps.empty()) return std::nullopt;
  return median(steps);
}

GivenLayerCosts run_layer_costs(const std::string& run_dir, const config::JobSpec& spec, bool any_micro_batch_size) {
  const fs::path dir(run_dir);
  const auto config_text = read_text(dir / "config.yaml");
  if (!config_text) {
    throw PlanError(fmt::format("run directory {}: no config.yaml, so not a ppctl run directory (fix: give the "
                                "folder `ppctl train` printed as 'run directory: ...', or a costs file)",
                                run_dir));
  }
  const std::string base = fs::absolute(spec.source.empty() ? "." : spec.source).parent_path().string();
  config::JobSpec run;
  try {
    run = config::parse_job_spec(*config_text, (dir / "config.yaml").string(), base);
  } catch (const ConfigError& e) {
    throw PlanError(fmt::format("run directory {}: its config.yaml is not a valid job spec here (paths taken "
                                "relative to {}): {} (fix: take costs from a run of this spec, or give a costs file)",
                                run_dir, base, e.problems().front()));
  }
  auto differ = model_differences(run, spec);
  if (!any_micro_batch_size && run.pipeline.micro_batch_size != spec.pipeline.micro_batch_size) {
    differ.push_back(fmt::format("pipeline.micro_batch_size {} there, {} here", run.pipeline.micro_batch_size,
                                 spec.pipeline.micro_batch_size));
  }
  if (!differ.empty()) {
    throw PlanError(fmt::format("run directory {} ran another model: {}; its times do not fit this job (fix: take "
                                "costs from a run with this model and micro batch size, or give a costs file)",
                                run_dir, fmt::join(differ, "; ")));
  }
  const auto trace_text = read_text(dir / "trace.json");
  if (!trace_text) {
    throw PlanError(fmt::format("run directory {} has no trace.json: {} (fix: train with observe.trace_steps >= 2, "
                                "e.g. `observe: {{trace_steps: 5}}`, and give that run directory)",
                                run_dir,
                                run.observe.trace_steps == 0 ? "its observe.trace_steps is 0, so no step was traced"
                                                             : "the run left no trace (it may have failed early)"));
  }
  std::vector<plan::LayerRange> split;
  try {
    split = run_split(run);
  } catch (const Error& e) {
    throw PlanError(fmt::format("run directory {}: its layout cannot be laid out again: {} (fix: give a costs file)",
                                run_dir, e.what()));
  }
  GivenLayerCosts out;
  int64_t first = 0, last = 0;
  const auto times = trace_stage_times(*trace_text, (dir / "trace.json").string(),
                                       static_cast<int64_t>(split.size()), first, last);
  std::vector<int64_t> counts;
  for (size_t s = 0; s < split.size(); ++s) {
    out.measured.push_back({split[s].size(), times[s]});
    counts.push_back(split[s].size());
  }
  const auto flop = plan::flop_layer_costs(spec.model);
  try {
    out.times = plan::fit_layer_times(out.measured, spec.model.layers, flop.embedding / flop.block, out.notes);
  } catch (const PlanError& e) {
    throw PlanError(fmt::format("run directory {}: {}", run_dir, e.what()));
  }
  out.source = fmt::format("run directory {} (trace.json steps {}-{}, median per action; its split [{}])", run_dir,
                           first, last, fmt::join(counts, ", "));
  out.micro_batch_size = run.pipeline.micro_batch_size;
  out.transfer_post_ms = trace_post_ms(*trace_text, first);
  // The first step carries start-up costs: never part of the measured step, even when it is all that was traced.
  const int64_t from = std::max<int64_t>(first, 2);
  if (const auto metrics = read_text(dir / "metrics.jsonl")) {
    out.step_ms = metrics_step_ms(*metrics, from);
    if (!out.step_ms)
      out.no_step = fmt::format("its metrics.jsonl has no step record from step {} on with a step_time_s in (0, 1e6] s "
                                "(a run of one step, or the file is damaged)",
                                from);
  } else {
    out.no_step = "it has no metrics.jsonl";
  }
  if (first == last) out.notes.push_back("one step traced: its times include start-up costs");
  for (auto& note : runtime_differences(run, spec)) out.notes.push_back(std::move(note));
  out.run = std::move(run);
  return out;
}

GivenLayerCosts given_layer_costs(const std::string& source, const config::JobSpec& spec, bool any_micro_batch_size) {
  std::error_code ignored;
  if (fs::is_directory(source, ignored)) return run_layer_costs(source, spec, any_micro_batch_size);
  GivenLayerCosts out;
  out.times = plan::read_cost_file(source, spec.model.layers);
  out.source = "costs file " + source;
  out.micro_batch_size = out.times.micro_batch_size > 0 ? out.times.micro_batch_size : spec.pipeline.micro_batch_size;
  if (!any_micro_batch_size && out.micro_batch_size != spec.pipeline.micro_batch_size) {
    throw PlanError(fmt::format("costs file {}: micro_batch_size {}, but the spec's pipeline.micro_batch_size is {}: "
                                "its times per microbatch do not fit this job (fix: measure at the spec's micro "
                                "batch size, or use it as a second probe of `ppctl plan --tune`)",
                                source, out.micro_batch_size, spec.pipeline.micro_batch_size));
  }
  return out;
}

}  // namespace ppctl::schedule
