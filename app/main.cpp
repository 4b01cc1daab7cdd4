// ppctl-torch, the full ppctl command line: `plan`, `train`, `verify`, `data prepare`, `export` and the internal
// `worker` (the light `ppctl` runs `plan` itself and execs this for everything else, app/light_main.cpp). Parses
// arguments, calls lib/, maps exceptions to exit codes (0 ok, 1 runtime failure, 2 bad input, 3 verify mismatch,
// a failed worker's code otherwise).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <signal.h>
#include <unistd.h>

#include "checkpoint/checkpoint.hpp"
#include "cli_checks.hpp"
#include "comm/error_text.hpp"
#include "comm/launch_env.hpp"
#include "config/load.hpp"
#include "command_line.hpp"
#include "help_command.hpp"
#include "core/echo.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "interop/hf_export.hpp"
#include "job/local_job.hpp"
#include "job/prepared_job.hpp"
#include "job/shared_run_dir.hpp"
#include "job/verify.hpp"
#include "job/worker.hpp"
#include "job/worker_failure.hpp"
#include "job/worker_handover.hpp"
#include "launch/sibling.hpp"
#include "launch/stop_signals.hpp"
#include "launch/worker_signals.hpp"
#include "observe/progress.hpp"
#include "observe/run_dir.hpp"
#include "plan/parallel.hpp"
#include "schedule/split_time.hpp"
#include "plan_command.hpp"
#include "prepare/prepare.hpp"
#include "prepare/prepare_error.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/report.hpp"
#include "schedule/simulate.hpp"
#include "train/resume.hpp"

namespace {

/// A training process (launcher, worker, torchrun-style rank) outlives the reader of its output: with `ppctl
/// train job.yaml 2>&1 | tee train.log` over ssh, a dropped connection hangs up tee and ppctl together, and the
/// next log line killed every process by SIGPIPE (exit 141, no checkpoint) before the SIGHUP could stop the run
/// at a step boundary. With SIGPIPE ignored a write to the closed pipe fails quietly; the logs go on in the run
/// directory (launcher.log, rank*.log).
void outlive_closed_output() { ::signal(SIGPIPE, SIG_IGN); }

using ppctl::app::kExitBadInput;
using ppctl::app::kExitFailure;
using ppctl::app::not_started;
using ppctl::launch::self_executable;

/// A SIGINT/SIGTERM caught (launch::StopSignalScope) before any worker started: logs the
/// "interrupted" line (into the run directory's launcher.log too, when it exists) and returns
/// 128 + signal; 0 when none was caught.
int interrupted_before_start(const std::optional<std::string>& run_dir) {
  const int sig = ppctl::launch::StopSignalScope::caught();
  if (sig == 0) return 0;
  spdlog::warn("interrupted ({}) before any worker started{}", ppctl::launch::stop_signal_name(sig),
               run_dir ? "; run directory: " + *run_dir : std::string());
  spdlog::default_logger()->flush();
  return 128 + sig;
}

/// `--resume auto`: the latest checkpoint in checkpoint.dir when this run wrote it (checkpoint::run_mismatch),
/// nothing (a fresh start) when there is none yet. Throws ppctl::CheckpointError when it is another run's.
std::optional<std::filesystem::path> latest_of_this_run(const ppctl::config::JobSpec& spec, int64_t sequences_per_step) {
  if (spec.checkpoint.dir.empty()) {
    spdlog::warn("--resume auto: {} sets no checkpoint.dir, so there is nothing to resume and this run cannot be "
                 "resumed either: starting from step 1 (fix: set checkpoint.dir)", spec.source);
    return std::nullopt;
  }
  std::error_code ignored;
  if (!std::filesystem::exists(std::filesystem::path(spec.checkpoint.dir) / "latest", ignored)) {
    spdlog::info("--resume auto: no checkpoint in {} yet: starting from step 1", spec.checkpoint.dir);
    return std::nullopt;
  }
  const auto checkpoint = ppctl::checkpoint::resolve_checkpoint(spec.checkpoint.dir);
  const auto meta = ppctl::checkpoint::read_checkpoint_meta(checkpoint);
  const char* job = std::getenv("SLURM_JOB_ID");
  const auto hash = ppctl::checkpoint::run_spec_hash(spec, sequences_per_step);
  if (const auto why = ppctl::checkpoint::run_mismatch(meta, hash, job ? job : "")) {
    throw ppctl::CheckpointError(fmt::format(
        "--resume auto: the latest checkpoint in checkpoint.dir, {} (step {}), is not this run's: {} (fix: to "
        "continue it anyway pass --resume {}; to start this run afresh set checkpoint.dir to another folder, or "
        "remove {})",
        checkpoint.string(), meta.step, *why, spec.checkpoint.dir, spec.checkpoint.dir));
  }
  return checkpoint;
}

/// Where `--resume` continues from (resolve_resume).
struct ResumePoint {
  std::optional<std::string> folder;  ///< the checkpoint folder; nullopt: a fresh start (or nothing to do)
  bool complete = false;  ///< --resume auto and this run's latest checkpoint is at train.steps: nothing to do
};

/// `--resume [PATH]` or `--resume auto`: the checkpoint folder to continue from (PATH, else checkpoint.dir's
/// latest; with auto only this run's, latest_of_this_run), checked against the spec before anything starts;
/// no folder for a fresh start (auto, and no checkpoint yet). With auto, a checkpoint of this run already at
/// train.steps means the run is complete (a job requeued after its last checkpoint): `complete`, logged, and
/// the caller starts nothing and exits 0; given a PATH, that is refused as there is nothing to train.
/// `check_every_file`: also read every unit file and compare its checksum (the local launcher, once, before it
/// spawns); a worker launched by torchrun or Slurm does not, since then every rank would read the whole
/// checkpoint: each checks the checksum of every file it reads (checkpoint::UnitReader), after meta.json's sizes
/// here. Throws ppctl::CheckpointError.
ResumePoint resolve_resume(const ppctl::job::PreparedJob& planned, const std::string& path, int64_t dp,
                           bool check_every_file) {
  const auto& spec = planned.spec;
  const int64_t sequences_per_step = dp * spec.pipeline.microbatches * spec.pipeline.micro_batch_size;
  if (path.empty() && spec.checkpoint.dir.empty()) {
    throw ppctl::CheckpointError(fmt::format(
        "--resume without a folder continues from checkpoint.dir, but {} sets none (fix: add "
        "checkpoint: {{dir: ...}} to the spec, or pass --resume CHECKPOINT_FOLDER)",
        spec.source));
  }
  std::filesystem::path checkpoint;
  if (path == ppctl::app::kResumeAuto) {
    const auto latest = latest_of_this_run(spec, sequences_per_step);
    if (!latest) return {};
    checkpoint = *latest;
    const auto meta = ppctl::checkpoint::read_checkpoint_meta(checkpoint);
    if (meta.step >= spec.train.steps) {
      spdlog::info("--resume auto: this run is complete: its latest checkpoint, {}, is at step {} and train.steps "
                   "(or --steps) is {}; nothing to train, nothing started (to train on, raise train.steps or pass "
                   "--steps above {})",
                   checkpoint.string(), meta.step, spec.train.steps, meta.step);
      return {std::nullopt, true};
    }
  } else {
    checkpoint = ppctl::checkpoint::resolve_checkpoint(path.empty() ? spec.checkpoint.dir : path);
  }
  const auto meta = ppctl::checkpoint::read_checkpoint_meta(checkpoint);
  if (check_every_file) ppctl::checkpoint::verify_checkpoint_files(checkpoint, meta);
  ppctl::train::check_resumable(meta, spec, sequences_per_step, spec.train.steps, checkpoint);
  spdlog::info("resuming from {} (step {}, saved with {} stage(s))", checkpoint.string(), meta.step,
               meta.stages);
  return {std::filesystem::absolute(checkpoint).string()};
}

/// `ppctl train` under torchrun-style variables or Slurm: this process is one worker (rank 0 hosts
/// the rendezvous store). The spec is validated completely here, in every worker, before any
/// connection; a bad environment is bad input (exit 2).
int train_as_one_worker(const std::string& spec_path, std::optional<int64_t> steps,
                        const std::optional<std::string>& resume, const std::string& run_dir,
                        const ppctl::comm::EnvMap& env, ppctl::comm::LaunchMode mode) {
  ppctl::comm::RendezvousInfo info;
  try {
    info = ppctl::comm::external_identity(env, mode);
  } catch (const ppctl::CommError& e) {
    std::cerr << "error: " << e.what() << "\nnothing was started\n";
    return kExitBadInput;
  }
  ppctl::core::setup_logging(info.rank);
  // Each rank gets the signal itself (torchrun's agent, srun): the job stops at the next step (train.on_signal).
  const ppctl::launch::WorkerSignalScope stop_signals(info.rank, std::nullopt, ppctl::launch::torchrun_agent_pid());
  auto planned = ppctl::job::prepare_job(spec_path, {steps});
  info.job_id += ", " + ppctl::job::job_fingerprint(planned);
  // pipeline.data_parallel 0: dp comes from WORLD_SIZE. The plan (plan.txt, the memory table and its
  // warning, the global batch) is made for that dp, not for 1.
  const auto dp = ppctl::plan::resolve_data_parallel(
      planned.spec, info.world_size, mode == ppctl::comm::LaunchMode::Slurm ? "SLURM_NTASKS" : "WORLD_SIZE");
  ppctl::plan::check_tensor_parallel_per_node(planned.spec, info.ranks_per_node, info.ranks_per_node_source);
  planned.spec.pipeline.data_parallel = dp;
  planned.layout = ppctl::schedule::job_layout(planned.spec, planned.program);
  if (info.rank == 0) ppctl::schedule::log_memory_warnings(planned.spec, planned.layout, planned.program);
  if (const auto w = ppctl::job::external_restart_warning(planned.spec, ppctl::comm::to_string(mode));
      w && info.rank == 0) spdlog::warn("{}", *w);
  spdlog::info("launched by {}: rank {} of {} (local rank {}), {}; rendezvous {}:{}{}",
               ppctl::comm::to_string(mode), info.rank, info.world_size, info.local_rank,
               planned.layout.grid().describe(), info.master_addr, info.master_port,
               info.host_store ? " (hosted here)" : "");
  ppctl::job::WorkerOptions options;
  options.spec_path = spec_path;
  options.steps = steps;
  options.identity = info;
  options.texts = ppctl::job::JobTexts{planned.spec_text, planned.schedule_text};  // read and validated above
  if (resume) {
    const auto point = resolve_resume(planned, *resume, dp, /*check_every_file=*/false);
    if (point.complete) return 0;  // every rank reads the same checkpoint.dir, so every rank ends here
    options.resume_from = point.folder.value_or("");
  }
  // The run directory: rank 0 makes it and publishes its path through the store (shared_run_dir.hpp).
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(planned.spec.runtime.comm_timeout_s * 1000.0));
  std::optional<ppctl::job::SharedRunDirectory> shared;
  int code = 0;
  try {
    if (info.world_size > 1) options.store = std::make_shared<ppctl::comm::JobStore>(info, timeout);
    shared = ppctl::job::share_run_directory(options.store.get(), info.rank, planned, spec_path, run_dir, timeout);
    options.run_dir = shared->path;
    code = ppctl::job::run_worker(options);
  } catch (const ppctl::job::RunDirectoryError& e) {  // --run-dir or observe.runs_dir unusable
    return not_started(e);
  } catch (const std::exception& e) {  // bad input found by this worker (a checkpoint, data): exit 2
    code = ppctl::job::report_worker_failure(e, false);
  }
  if (shared && shared->made) {  // rank 0: merge the trace parts (after a failure, give the others 3 s)
    ppctl::job::finish_shared_run_directory(
        *shared->made, static_cast<int>(planned.program.num_ranks()), planned.spec.observe.trace_steps > 0,
        code == 0 || ppctl::launch::WorkerSignalScope::caught() != 0 || code == ppctl::launch::kExitStoppedResumable
            ? std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(10))
            : std::chrono::seconds(3),
        planned.layout.data_parallel, planned.layout.tensor_parallel);
  }
  return code;
}

int cmd_train(const std::string& spec_path, std::optional<int64_t> steps,
              std::optional<std::string> resume, const std::string& run_dir, bool force_local,
              const std::string& dump_gradients = "") {
  outlive_closed_output();
  const auto env = ppctl::comm::environment_map();
  const auto mode = ppctl::comm::detect_launch_mode(env);
  if (mode != ppctl::comm::LaunchMode::Local && !force_local) {
    return train_as_one_worker(spec_path, steps, resume, run_dir, env, mode);
  }
  // Before anything is written: a Ctrl-C now lets the current write finish, then ends the run.
  const ppctl::launch::StopSignalScope stop_signals;
  const auto planned = ppctl::job::prepare_job(spec_path, {steps});  // --steps validated with the spec
  ppctl::job::check_device_available(planned.spec);
  std::vector<std::string> extra;
  if (steps) {
    extra = {"--steps", std::to_string(*steps)};
    spdlog::info("--steps {} overrides train.steps", *steps);
  }
  if (resume) {
    const auto point = resolve_resume(planned, *resume, planned.layout.data_parallel, /*check_every_file=*/true);
    if (point.complete) return 0;
    if (point.folder) {
      extra.push_back("--resume");
      extra.push_back(*point.folder);
    }
  }
  if (!planned.spec.checkpoint.dir.empty()) {
    ppctl::checkpoint::check_checkpoint_dir_writable(planned.spec.checkpoint.dir,
                                                     ppctl::job::spec_field_location(planned, "checkpoint.dir"));
    // A fresh start into a folder that holds an earlier run's checkpoints: they are kept, and this run's join
    // them (`latest` then names this run's), which is rarely what was meant.
    std::error_code ec;
    const auto latest = std::filesystem::path(planned.spec.checkpoint.dir) / "latest";
    if (!resume && std::filesystem::exists(latest, ec)) {
      std::ifstream in(latest);
      std::string name;
      std::getline(in, name);
      spdlog::warn("checkpoint.dir {} already holds checkpoints of an earlier run (latest: {}); this run starts at "
                   "step 1 and writes its own beside them (fix: `--resume auto` to continue that run, or another "
                   "checkpoint.dir to keep them apart)",
                   ppctl::core::echo_label(planned.spec.checkpoint.dir), ppctl::core::echo_label(name));
    }
  }
  if (!dump_gradients.empty()) {  // testing: every worker dumps step 1's gradients and stops
    extra.push_back("--dump-gradients");
    extra.push_back(std::filesystem::absolute(dump_gradients).string());
  }
  const auto plan_text = ppctl::job::run_plan_text(planned);  // with its memory WARNING lines
  const std::string& spec_text = planned.spec_text;
  if (const int code = interrupted_before_start(std::nullopt)) return code;
  ppctl::observe::RunDirectory run;
  try {
    run = ppctl::observe::create_run_directory(planned.spec, spec_text, plan_text, run_dir);
  } catch (const ppctl::Error& e) {  // --run-dir or observe.runs_dir unusable: bad input
    return not_started(e);
  }
  std::cerr << ppctl::job::run_start_text(spec_path, spec_text, plan_text);
  spdlog::info("run directory: {}", run.path);
  if (const int code = interrupted_before_start(run.path)) return code;
  // The workers read the validated texts from the run directory (config.yaml, a custom schedule.csv).
  auto worker_env = ppctl::job::hand_over_to_workers(planned, run.path);
  for (auto& variable : ppctl::observe::run_directory_env(run)) worker_env.push_back(std::move(variable));
  const int world_size = static_cast<int>(planned.layout.world_size);
  const auto result = ppctl::job::run_local_job(planned.spec, world_size, self_executable(),
                                                spec_path, extra, worker_env);
  // With data or tensor parallelism only tp rank 0 of replica 0 (its pipeline ranks) traces and writes metrics.
  ppctl::observe::finish_run_directory(run, static_cast<int>(planned.program.num_ranks()),
                                       planned.spec.observe.trace_steps > 0, planned.layout.data_parallel,
                                       planned.layout.tensor_parallel);
  if (result.exit_code == 0) {
    spdlog::info("training finished: {}", result.message);
  } else if (result.stop_signal != 0) {
    spdlog::warn("training stopped: {}", result.message);
  } else {
    spdlog::error("training failed: {}", result.message);
  }
  return result.exit_code;
}

int cmd_verify(const std::string& spec_path, double tolerance) {
  const auto planned = ppctl::job::prepare_job(spec_path);
  ppctl::job::check_device_available(planned.spec);
  const auto report = ppctl::job::verify_job(planned, self_executable(), spec_path, tolerance);
  std::cout << report.text;
  return report.exit_code;
}

/// A worker logs every failure itself (rank-prefixed) and tells the launcher its cause; the
/// launcher then names the rank and stops the job. Bad input exits 2 (not restarted).
int cmd_worker(const ppctl::job::WorkerOptions& options) {
  const char* rank = std::getenv("RANK");
  const auto rank_number = rank ? std::optional<int>(std::atoi(rank)) : std::nullopt;
  ppctl::core::setup_logging(rank_number);
  outlive_closed_output();
  // The local launcher forwards the stop signals it gets and ends the job with SIGTERM (worker_signals.hpp).
  const ppctl::launch::WorkerSignalScope stop_signals(rank_number, getppid());
  try {
    return ppctl::job::run_worker(options);
  } catch (const std::exception& e) {
    return ppctl::job::report_worker_failure(e, true);
  }
}

/// `ppctl data prepare`: bad input (prepare::PrepareError) exits 2 with nothing written; a stop signal
/// (SIGINT, SIGTERM, SIGHUP, ...) stops it before the next document with its temporaries removed: 128 + signal.
int cmd_data_prepare(ppctl::prepare::PrepareOptions options, const std::string& input_format,
                     const std::string& append_eod_id) {
  if (!append_eod_id.empty()) options.eod_id = std::stoll(append_eod_id);  // checked by integer_check
  options.progress = ppctl::observe::stderr_is_terminal();
  const ppctl::launch::StopSignalScope stop_signals;
  options.stop_signal = [] { return ppctl::launch::StopSignalScope::caught(); };
  try {
    options.input.format = ppctl::prepare::parse_input_format(input_format);
    std::cout << ppctl::prepare::format_prepare_report(ppctl::prepare::prepare_dataset(options)) << '\n';
  } catch (const ppctl::prepare::PrepareError& e) {
    std::cerr << "error: " << e.what() << "\nnothing was written\n";
    return kExitBadInput;
  } catch (const ppctl::prepare::PrepareInterrupted& e) {
    std::cerr << "interrupted (" << ppctl::launch::stop_signal_name(e.signal()) << ") " << e.what()
              << ": the temporary files were removed and nothing was written\n";
    return 128 + e.signal();
  }
  return 0;
}

/// An option whose text `parse` turns into `out`; parse errors (ppctl::Error) become CLI11
/// validation errors, so they are reported like any other bad argument (exit code 2).
template <typename Out, typename Parse>
void add_parsed_option(CLI::App* app, const std::string& name, Out& out, Parse parse,
                       const std::string& description, const std::string& type_name) {
  app->add_option_function<std::string>(
         name,
         [&out, parse](const std::string& text) {
           try {
             out = parse(text);
           } catch (const ppctl::Error& e) {
             throw CLI::ValidationError(e.what());
           }
         },
         description)
      ->type_name(type_name);
}

}  // namespace

int main(int argc, char** argv) {
  ppctl::core::setup_logging(std::nullopt);
  CLI::App app;
  ppctl::app::describe_ppctl(app);

  std::string spec_path;
  ppctl::app::PlanOptions plan_options;
  auto* plan = ppctl::app::add_plan_command(app, spec_path, plan_options);
  ppctl::app::HelpOptions help_options;
  auto* help = ppctl::app::add_help_command(app, help_options);

  std::optional<int64_t> steps;
  const auto [steps_lo, steps_hi] = ppctl::config::integer_field_range("train.steps");
  const CLI::Validator steps_check = ppctl::app::integer_check(steps_lo, steps_hi);
  auto* train = app.add_subcommand("train", "Train: spawn one worker per rank and supervise them");
  train->add_option("spec", spec_path, "Job spec (YAML)")->required();
  train->add_option("--steps", steps, "Override train.steps")
      ->check(steps_check);
  std::string resume_path;
  auto* resume = train->add_option(
      "--resume", resume_path,
      "Continue from a checkpoint: the latest in checkpoint.dir, or the checkpoint folder given; `auto`: "
      "the latest in checkpoint.dir if this run wrote it, else a fresh start when there is none "
      "(after the spec: ppctl train job.yaml --resume [FOLDER|auto])");
  resume->expected(0, 1)->type_name("[FOLDER|auto]");
  std::string run_dir;
  train->add_option("--run-dir", run_dir,
                    "Folder for this run's config, logs, metrics and trace (new or empty; default: "
                    "observe.runs_dir/<spec name>-<UTC time>)");
  std::string train_dump_gradients;
  train->add_option("--dump-gradients", train_dump_gradients,
                    "Testing: every worker writes step 1's gradients and loss to DIR/rank<R>.pt and stops")
      ->group("");  // hidden from --help
  bool force_local = false;
  train->add_flag("--local", force_local,
                  "Spawn every worker here even when RANK/WORLD_SIZE or SLURM_PROCID are set (by "
                  "default `ppctl train` then runs as that one worker)");

  double tolerance = 1e-5;
  auto* verify = app.add_subcommand(
      "verify", "Run one pipelined step and one unpipelined; compare every gradient and the loss");
  verify->add_option("spec", spec_path, "Job spec (YAML)")->required();
  verify->add_option("--tolerance", tolerance, "Largest accepted relative difference (default 1e-5)")
      ->check(ppctl::app::number_check(0.0, true));

  std::string export_checkpoint, export_hf_dir;
  uint64_t max_shard_bytes = ppctl::interop::kDefaultMaxShardBytes;
  auto* export_cmd = app.add_subcommand(
      "export", "Write a checkpoint as a Hugging Face model folder (config.json, model.safetensors, and the "
                "tokenizer files of model.init_from)");
  export_cmd->add_option("checkpoint", export_checkpoint, "Checkpoint folder, or a checkpoint.dir (its latest)")
      ->required();
  export_cmd->add_option("--hf", export_hf_dir, "Output folder (new or empty); appears complete or not at all")
      ->required();
  add_parsed_option(export_cmd, "--max-shard-size", max_shard_bytes, ppctl::interop::parse_shard_size,
                    "Largest shard of tensor data, e.g. 5GB (default), 200MiB, 4096; above it the weights "
                    "are sharded with model.safetensors.index.json",
                    "SIZE");

  ppctl::job::WorkerOptions worker_options;
  auto* worker = app.add_subcommand("worker", "Internal: run one rank (started by `ppctl train`)");
  worker->group("");  // hidden from --help
  worker->add_option("spec", worker_options.spec_path, "Job spec (YAML)")->required();
  worker->add_option("--steps", worker_options.steps, "Override train.steps")
      ->check(steps_check);
  worker->add_option("--dump-gradients", worker_options.dump_gradients_dir,
                     "Testing: write step 1's gradients (after clipping), loss and global "
                     "gradient norm to DIR/rank<R>.pt and stop");
  add_parsed_option(worker, "--inject-nan", worker_options.inject_nan, ppctl::train::parse_nan_injection,
                    "Fault injection for tests: fill stage STAGE's gradients with NaN after the "
                    "backward of step STEP (from 1), to exercise train.on_nonfinite; with REPLICA, on "
                    "that dp replica only; with TP_RANK, on that tensor-parallel rank only",
                    "STAGE:STEP[:REPLICA[:TP_RANK]]");
  worker->add_option("--resume", worker_options.resume_from, "Continue from this checkpoint folder");
  add_parsed_option(worker, "--inject-crash-in-checkpoint", worker_options.crash_in_checkpoint,
                    ppctl::train::parse_checkpoint_crash,
                    "Fault injection for tests: SIGKILL this worker after it wrote FILES files of "
                    "the checkpoint of step STEP",
                    "STEP:FILES");

  ppctl::prepare::PrepareOptions prepare_options;
  std::string input_format = "auto", append_eod_id;
  auto* data = app.add_subcommand("data", "Datasets: `ppctl data prepare` tokenizes text into an indexed dataset");
  data->require_subcommand(1);
  auto* prepare = data->add_subcommand(
      "prepare", "Tokenize text or JSONL files into a Megatron indexed dataset PREFIX.bin + PREFIX.idx "
                 "(+ PREFIX.tokenizer.json)");
  prepare->add_option("--input", prepare_options.inputs,
                      "Text or JSONL files, in this order (JSONL: one {\"text\": ...} object per line)")
      ->required()
      ->expected(1, CLI::detail::expected_max_vector_size);
  prepare->add_option("--output", prepare_options.output_prefix,
                      "Dataset prefix: writes PREFIX.bin, PREFIX.idx, PREFIX.tokenizer.json (the folder must exist)")
      ->required();
  prepare->add_option("--tokenizer", prepare_options.tokenizer,
                      "sentencepiece (with --model), bytes (ids 0-255), or PATH: a Hugging Face tokenizer.json "
                      "(byte-level BPE: GPT-2, Llama 3, Qwen2/3) or the model folder holding one (default "
                      "sentencepiece)")
      ->type_name("KIND|PATH");
  prepare->add_option("--model", prepare_options.model, "SentencePiece model file (.model, as spm_train writes it)");
  prepare->add_option("--input-format", input_format,
                      "auto (.jsonl/.json are JSONL, other files text), text, jsonl, or chat: one conversation "
                      "per JSONL line ({\"messages\": [{\"role\", \"content\"}, ...]} or {\"prompt\", "
                      "\"completion\"}), rendered by the model's chat template, with loss masks in "
                      "PREFIX.loss_mask.{bin,idx} (default auto)")
      ->check(CLI::IsMember({"auto", "text", "jsonl", "chat"}));
  prepare->add_option("--chat-template", prepare_options.chat.chat_template,
                      "Chat: the template, a .jinja file or a tokenizer_config.json (or a folder holding one) "
                      "(default: chat_template.jinja or tokenizer_config.json's chat_template beside --tokenizer)")
      ->type_name("FILE");
  std::string train_on = "assistant";
  prepare->add_option("--train-on", train_on,
                      "Chat: which tokens are targets: assistant (the assistant turns through their end-of-turn "
                      "token; default) or all")
      ->check(CLI::IsMember({"assistant", "all"}));
  prepare->add_option("--chat-date", prepare_options.chat.date,
                      "Chat: the date templates print with strftime_now (Llama 3.2, SmolLM3), recorded in the "
                      "sidecar (default today)")
      ->type_name("YYYY-MM-DD");
  prepare->add_option("--chat-context", prepare_options.chat.context,
                      "Chat: extra template variables as a JSON object, e.g. '{\"enable_thinking\": false}' "
                      "(default none: messages, add_generation_prompt and the special tokens only)")
      ->type_name("JSON");
  prepare->add_option("--json-key", prepare_options.input.json_key,
                      "JSONL: the field holding each document's text (default text)");
  prepare->add_option_function<std::string>(
      "--document-separator",
      [&prepare_options](const std::string& line) { prepare_options.input.document_separator = line; },
      "Text: a line equal to LINE ends a document (dropped; empty pieces skipped); '' = at empty lines, "
      "% = fortune files (default: each file is one document)")
      ->type_name("LINE");
  auto* append_eod = prepare->add_option(
      "--append-eod", append_eod_id,
      "Append an end-of-document id to every non-empty document: ID, or without one the model's eos id "
      "(tokenizer.json: the eos_token of the tokenizer_config.json beside it)");
  append_eod->expected(0, 1)->type_name("[ID]")->check(ppctl::app::integer_check(0, INT32_MAX));

  if (const auto code = ppctl::app::parse_arguments(app, argc, argv)) return *code;

  return ppctl::app::run_command([&]() -> int {
    if (*plan) return ppctl::app::run_plan(spec_path, plan_options);
    if (*help) return ppctl::app::run_help(help_options);
    if (*train) {
      return cmd_train(spec_path, steps,
                       resume->count() > 0 ? std::optional<std::string>(resume_path) : std::nullopt,
                       run_dir, force_local, train_dump_gradients);
    }
    if (*verify) return cmd_verify(spec_path, tolerance);
    if (*worker) return cmd_worker(worker_options);
    if (*prepare) {
      prepare_options.append_eod = append_eod->count() > 0;
      prepare_options.chat.train_on_all = train_on == "all";
      return cmd_data_prepare(prepare_options, input_format, append_eod_id);
    }
    if (*export_cmd) {
      const auto result = ppctl::interop::export_hf(export_checkpoint, export_hf_dir, max_shard_bytes);
      std::cout << fmt::format("exported step {} to {}: {} tensors, {:.1f} MB in {} file(s)\n", result.step,
                               result.folder.string(), result.tensors, static_cast<double>(result.bytes) / 1e6,
                               result.shards);
      if (!result.copied.empty()) {
        std::cout << fmt::format("copied from {}: {}\n", ppctl::core::echo_label(result.source.string()),
                                 fmt::join(result.copied, ", "));
      }
      return 0;
    }
    return kExitFailure;
  }, ppctl::comm::error_text);
}
