// Test support: a tiny GPT job written to a temporary folder and run in real worker processes, with
// everything the launcher and workers print captured, and the logged step lines parsed back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "launch/launcher.hpp"

namespace ppctl::test {

/// A tiny job: 4 blocks of width 32, sequences of 16 bytes, Gloo on the CPU, one thread per worker.
struct Job {
  int64_t stages = 2;
  int64_t microbatches = 4;
  int64_t micro_batch_size = 2;
  int64_t steps = 1;
  std::string optimizer = "";  // more optimizer keys, e.g. ", clip_grad_norm: 0.1"
  std::string train = "";      // more train keys
  std::string data = "";       // more data keys, e.g. ", eval_fraction: 0.1"
  std::string runtime = "";    // more runtime keys, e.g. ", precision: bf16"
  std::string sections = "";   // more sections, e.g. "checkpoint: {dir: ckpt}\n"
  std::string model = "";      // more model keys, e.g. ", arch: llama, kv_heads: 2"
  std::string pipeline = "";   // more pipeline keys, e.g. ", data_parallel: 2"
};

/// A fresh, empty folder <tmp>/ppctl_step_NAME_XXXXXX (mkdtemp), removed when the test process exits.
std::filesystem::path fresh_dir(const std::string& name);

/// Writes the corpus and DIR/job.yaml; returns the spec's path.
std::filesystem::path make_job(const Job& job, const std::filesystem::path& dir);

/// Replaces the first `from` in the spec file (it must be there: the test fails otherwise) by `to`, e.g.
/// edit_spec(spec, "schedule: 1f1b", "schedule: zbv, virtual_stages: 2"); returns the spec's path.
std::filesystem::path edit_spec(const std::filesystem::path& spec_path, const std::string& from, const std::string& to);

/// How a job ended and what its launcher and workers wrote (stdout and stderr together).
struct Run {
  launch::LaunchResult result;
  std::string output;
  double seconds = 0.0;
};

/// Runs the job in real worker processes (one per stage and dp replica) with the worker arguments `args`,
/// capturing everything the launcher and the workers print.
Run run_job(const std::filesystem::path& spec_path, const std::vector<std::string>& args);
/// The same, with the workers' run directory `run_dir` (created here; as `ppctl train` hands it to them in
/// PPCTL_RUN_DIR): rank0.log..., and the first replica's metrics.jsonl (metrics_steps reads it back).
Run run_job(const std::filesystem::path& spec_path, const std::vector<std::string>& args,
            const std::filesystem::path& run_dir);

/// The logged lines `step S/N | loss L | lr R | grad norm G | ...` as S -> (L, R, G, skipped); the
/// line may end with the achieved TFLOP/s and MFU before ` | skipped`.
struct LoggedStep {
  double loss, lr, grad_norm;
  bool skipped;
};
std::map<int64_t, LoggedStep> logged_steps(const std::string& output);

/// The steps of the run directory `run_dir`, read from its metrics.jsonl at full double precision (the log
/// lines round the loss to 4 decimals): loss, lr, grad_norm and skipped by step.
std::map<int64_t, LoggedStep> metrics_steps(const std::filesystem::path& run_dir);

/// The `tied embedding on stage S: fnv1a64 H, moments fnv1a64 M` lines' "fnv1a64 H, moments fnv1a64 M", one per
/// line, in order (each worker logs one per tied copy it holds).
std::vector<std::string> tied_hashes(const std::string& output);

/// The schedule families as `pipeline.schedule` values (with virtual_stages: 2 where the family needs it),
/// for GENERATE over every family at 2 ranks.
inline const std::vector<std::string> kScheduleFamilies{"1f1b", "gpipe", "zb-h1", "interleaved-1f1b, virtual_stages: 2",
                                                        "zbv, virtual_stages: 2"};

}  // namespace ppctl::test
