// Tests for config/load: a valid YAML job spec -> JobSpec, every field read back, the documented defaults,
// the ends of closed ranges, enum spellings, and the fields of train, optimizer, eval, checkpoint, observe
// and runtime. The rules' messages are in test_load_rules.cpp and the other test_load_*.cpp files.
#include <catch2/catch_test_macros.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "support/load_helpers.hpp"

namespace fs = std::filesystem;
using namespace ppctl::config;
using namespace ppctl::config::load_test;

// ------------------------------------------------------------------------------------------------------------
// Valid specs.

TEST_CASE("a full valid spec round-trips every field", "[config]") {
  const TempDir dir;
  const fs::path a = dir.write("text/a.txt");
  const fs::path b = dir.write("text/b.txt");
  const fs::path extra = dir.write("extra.bin");
  const std::string yaml = R"(# a full spec
model:
  vocab_size: 512
  layers: 12
  hidden: 96
  heads: 6
  seq_len: 64
  dropout: 0.25
pipeline:
  stages: 3
  schedule: gpipe
  microbatches: 8
  micro_batch_size: 2
data:
  path:
    - text/*.txt
    - )" + extra.string() + R"(
optimizer:
  lr: 3.0e-4
  betas: [0.8, 0.99]
  eps: 1e-6
  weight_decay: 0
train:
  steps: 250
  seed: 9223372036854775807
  log_interval: 5
runtime:
  device: cuda
  backend: nccl
  master_addr: node01
  master_port: 29500
  comm_timeout_s: 12.5
  threads_per_worker: 2
)";
  const JobSpec spec = parse_ok(yaml, dir.str());
  CHECK(spec.source == "job.yaml");
  CHECK(spec.model.vocab_size == 512);
  CHECK(spec.model.layers == 12);
  CHECK(spec.model.hidden == 96);
  CHECK(spec.model.heads == 6);
  CHECK(spec.model.seq_len == 64);
  CHECK(spec.model.dropout == 0.25);
  CHECK(spec.pipeline.stages == 3);
  CHECK(spec.pipeline.schedule == ScheduleKind::GPipe);
  CHECK(spec.pipeline.microbatches == 8);
  CHECK(spec.pipeline.micro_batch_size == 2);
  CHECK(spec.data.paths == std::vector<std::string>{"text/*.txt", extra.string()});
  CHECK(spec.data.files == std::vector<std::string>{extra.string(), a.string(), b.string()});
  CHECK(spec.optimizer.lr == 3.0e-4);
  CHECK(spec.optimizer.beta1 == 0.8);
  CHECK(spec.optimizer.beta2 == 0.99);
  CHECK(spec.optimizer.eps == 1e-6);
  CHECK(spec.optimizer.weight_decay == 0.0);
  CHECK(spec.train.steps == 250);
  CHECK(spec.train.seed == 9223372036854775807ULL);
  CHECK(spec.train.log_interval == 5);
  CHECK(spec.runtime.device == Device::Cuda);
  CHECK(spec.runtime.backend == Backend::Nccl);
  CHECK(spec.runtime.master_addr == "node01");
  CHECK(spec.runtime.master_port == 29500);
  CHECK(spec.runtime.comm_timeout_s == 12.5);
  CHECK(spec.runtime.threads_per_worker == 2);
}

TEST_CASE("omitted keys take the documented defaults", "[config]") {
  const JobSpec spec = parse_ok("data:\n  path: corpus.txt\n");
  CHECK(spec.model.vocab_size == 256);
  CHECK(spec.model.layers == 4);
  CHECK(spec.model.hidden == 128);
  CHECK(spec.model.heads == 4);
  CHECK(spec.model.seq_len == 128);
  CHECK(spec.model.dropout == 0.0);
  CHECK(spec.pipeline.stages == 1);
  CHECK(spec.pipeline.schedule == ScheduleKind::OneFOneB);
  CHECK(spec.pipeline.microbatches == 1);
  CHECK(spec.pipeline.micro_batch_size == 1);
  CHECK(spec.pipeline.virtual_stages == 1);
  CHECK(spec.pipeline.microbatch_group_size == 0);
  CHECK(spec.pipeline.schedule_file.empty());
  CHECK(spec.data.paths == std::vector<std::string>{"corpus.txt"});
  CHECK(spec.data.files == std::vector<std::string>{(corpus_dir().path() / "corpus.txt").string()});
  CHECK(spec.optimizer.lr == 1e-3);
  CHECK(spec.optimizer.beta1 == 0.9);
  CHECK(spec.optimizer.beta2 == 0.95);
  CHECK(spec.optimizer.eps == 1e-8);
  CHECK(spec.optimizer.weight_decay == 0.1);
  CHECK(spec.train.steps == 100);
  CHECK(spec.train.seed == 0);
  CHECK(spec.train.log_interval == 10);
  CHECK(spec.runtime.device == Device::Cpu);
  CHECK(spec.runtime.backend == Backend::Auto);
  CHECK(spec.runtime.master_addr == "127.0.0.1");
  CHECK(spec.runtime.master_port == 0);
  CHECK(spec.runtime.comm_timeout_s == 300.0);
  CHECK(spec.runtime.threads_per_worker == 1);
}

TEST_CASE("empty sections and a partly filled section keep the other defaults", "[config]") {
  const JobSpec spec = parse_ok(with_data("model:\npipeline: {}\ntrain:\n  steps: 7\n"));
  CHECK(spec.model.layers == 4);
  CHECK(spec.pipeline.stages == 1);
  CHECK(spec.train.steps == 7);
  CHECK(spec.train.log_interval == 10);
}

TEST_CASE("the ends of every range are accepted where the range is closed", "[config][range]") {
  const JobSpec high = parse_ok(with_data(R"(model: {vocab_size: 1000000, layers: 10000, hidden: 65536, heads: 65536,
        seq_len: 1000000, dropout: 0.999}
pipeline: {stages: 1024, microbatches: 1000000, micro_batch_size: 1000000}
optimizer: {lr: 10, betas: [0.999, 0.999], eps: 1, weight_decay: 10}
train: {steps: 1000000000, seed: 9223372036854775807, log_interval: 1000000000}
runtime: {master_port: 65535, comm_timeout_s: 86400, threads_per_worker: 1024}
)"));
  CHECK(high.model.vocab_size == 1000000);
  CHECK(high.model.layers == 10000);
  CHECK(high.model.heads == 65536);
  CHECK(high.pipeline.stages == 1024);
  CHECK(high.optimizer.lr == 10.0);
  CHECK(high.train.steps == 1000000000);
  CHECK(high.runtime.master_port == 65535);
  CHECK(high.runtime.comm_timeout_s == 86400.0);
  CHECK(high.runtime.threads_per_worker == 1024);

  const JobSpec low = parse_ok(with_data(R"(model: {vocab_size: 256, layers: 1, hidden: 1, heads: 1, seq_len: 1, dropout: 0}
pipeline: {stages: 1, microbatches: 1, micro_batch_size: 1}
optimizer: {lr: 1e-12, betas: [0, 0], eps: 1e-30, weight_decay: 0}
train: {steps: 1, seed: 0, log_interval: 1}
runtime: {master_port: 0, comm_timeout_s: 0.001, threads_per_worker: 1}
)"));
  CHECK(low.model.vocab_size == 256);
  CHECK(low.model.hidden == 1);
  CHECK(low.optimizer.beta1 == 0.0);
  CHECK(low.optimizer.lr == 1e-12);
  CHECK(low.runtime.comm_timeout_s == 0.001);
}

TEST_CASE("enum values parse and print with the same spelling", "[config][enum]") {
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe, ScheduleKind::Interleaved1F1B,
                            ScheduleKind::ZBH1, ScheduleKind::ZBV, ScheduleKind::ZBAuto}) {
    CHECK(parse_ok(with_data("pipeline: {schedule: " + to_string(kind) + "}\n")).pipeline.schedule == kind);
  }
  CHECK(to_string(ScheduleKind::Interleaved1F1B) == "interleaved-1f1b");
  CHECK(to_string(ScheduleKind::ZBH1) == "zb-h1");
  CHECK(to_string(ScheduleKind::ZBV) == "zbv");
  CHECK(to_string(ScheduleKind::ZBAuto) == "zb-auto");
  CHECK(to_string(ScheduleKind::Custom) == "custom");
  for (Device device : {Device::Cpu, Device::Cuda}) {
    CHECK(parse_ok(with_data("runtime: {device: " + to_string(device) + "}\n")).runtime.device == device);
  }
  for (Backend backend : {Backend::Auto, Backend::Gloo}) {
    CHECK(parse_ok(with_data("runtime: {backend: " + to_string(backend) + "}\n")).runtime.backend == backend);
  }
  for (Overlong rule : {Overlong::Error, Overlong::Drop, Overlong::Truncate}) {
    CHECK(parse_ok("data: {path: corpus.txt, overlong: " + to_string(rule) + "}\n").data.overlong == rule);
  }
  CHECK(parse_ok(with_data("")).data.overlong == Overlong::Error);
  CHECK(to_string(ScheduleKind::OneFOneB) == "1f1b");
  CHECK(to_string(ScheduleKind::GPipe) == "gpipe");
  CHECK(to_string(Device::Cpu) == "cpu");
  CHECK(to_string(Device::Cuda) == "cuda");
  CHECK(to_string(Backend::Auto) == "auto");
  CHECK(to_string(Backend::Gloo) == "gloo");
  CHECK(to_string(Backend::Nccl) == "nccl");
}

// ------------------------------------------------------------------------------------------------------------
// Fields of the optimizer, train, eval, checkpoint, observe and runtime sections.

TEST_CASE("training-step fields: LR schedule, clipping, non-finite policy, recomputation", "[config]") {
  const auto spec = parse_job_spec(with_data("optimizer: {lr: 0.01, lr_schedule: cosine, warmup_steps: 20, "
                                             "min_lr: 0.001, clip_grad_norm: 1.5}\n"
                                             "train: {on_nonfinite: skip, recompute: blocks, recompute_every: 2}\n"),
                                   "job.yaml", corpus_dir().str());
  CHECK(spec.optimizer.lr_schedule == ppctl::config::LrSchedule::Cosine);
  CHECK(spec.optimizer.warmup_steps == 20);
  CHECK(spec.optimizer.min_lr == 0.001);
  CHECK(spec.optimizer.clip_grad_norm == 1.5);
  CHECK(spec.train.on_nonfinite == ppctl::config::NonFinitePolicy::Skip);
  CHECK(spec.train.recompute == ppctl::config::Recompute::Blocks);
  CHECK(spec.train.recompute_every == 2);

  const auto defaults = parse_job_spec(with_data(""), "job.yaml", corpus_dir().str());
  CHECK(defaults.optimizer.lr_schedule == ppctl::config::LrSchedule::Constant);
  CHECK(defaults.optimizer.clip_grad_norm == 0.0);
  CHECK(defaults.train.on_nonfinite == ppctl::config::NonFinitePolicy::Stop);
  CHECK(defaults.train.recompute == ppctl::config::Recompute::None);

  check(only_problem(with_data("optimizer: {lr: 0.01, lr_schedule: cosine,\n  min_lr: 0.1}\n")), 2,
        "optimizer.min_lr", "0.1", "must not exceed optimizer.lr (0.01)");
  check(only_problem(with_data("train: {recompute: some}\n")), 1, "train.recompute", "\"some\"",
        "must be one of none, full, blocks");
  check(only_problem(with_data("optimizer: {clip_grad_norm: -1}\n")), 1, "optimizer.clip_grad_norm", "-1",
        "must be in [0, 1000000]");
}

TEST_CASE("the learning-rate schedule fits in train.steps; min_lr only with a decaying schedule", "[config]") {
  // Constant: warmup may take every step (its last step reaches lr), not more.
  parse_ok(with_data("optimizer: {warmup_steps: 10}\ntrain: {steps: 10}\n"));
  auto m = only_problem(with_data("optimizer: {warmup_steps: 50}\ntrain: {steps: 10}\n"));
  check(m, 1, "optimizer.warmup_steps", "50",
        "must not exceed train.steps (10): the run would end during warmup, before reaching optimizer.lr");
  CHECK(m.hint == "lower optimizer.warmup_steps to at most 10, or raise train.steps to at least 50");
  // Default train.steps (100) is named as such through the rule's value.
  m = only_problem(with_data("optimizer: {warmup_steps: 101}\n"));
  CHECK(m.rule.find("train.steps (100)") != std::string::npos);
  // Cosine and linear need at least one step after warmup to decay to min_lr.
  for (const std::string schedule : {"cosine", "linear"}) {
    parse_ok(with_data("optimizer: {lr_schedule: " + schedule + ", warmup_steps: 9, min_lr: 0}\ntrain: {steps: 10}\n"));
    m = only_problem(with_data("optimizer: {lr_schedule: " + schedule + ", warmup_steps: 10}\ntrain: {steps: 10}\n"));
    check(m, 1, "optimizer.warmup_steps", "10",
          "must be below train.steps (10) for lr_schedule " + schedule +
              ": warmup would take every step, so the decay to optimizer.min_lr never happens");
    CHECK(m.hint == "lower optimizer.warmup_steps to at most 9, or raise train.steps to at least 11");
  }
  m = only_problem(with_data("optimizer: {lr_schedule: cosine, warmup_steps: 3}\ntrain: {steps: 1}\n"));
  CHECK(m.hint == "set optimizer.warmup_steps: 0, or raise train.steps to at least 4");
  // min_lr is a decay floor: written with a constant schedule, it would be ignored.
  m = only_problem(with_data("optimizer: {lr: 0.01,\n  min_lr: 0.001}\n"));
  check(m, 2, "optimizer.min_lr", "0.001", "applies only to lr_schedule cosine or linear (lr_schedule is constant, "
        "the default)");
  CHECK(m.hint == "remove optimizer.min_lr, or set optimizer.lr_schedule: cosine (or linear)");
}

TEST_CASE("eval and checkpoint sections: defaults, values, and the keys they need", "[config]") {
  const auto defaults = parse_job_spec(with_data(""), "job.yaml", corpus_dir().str());
  CHECK(defaults.eval.interval == 0);
  CHECK(defaults.data.eval_fraction == 0.0);
  CHECK(defaults.checkpoint.dir.empty());

  const auto spec = parse_job_spec(
      "data: {path: corpus.txt, eval_fraction: 0.05}\neval: {interval: 50, batches: 3}\n"
      "checkpoint: {dir: ckpt/run1, interval: 100, keep: 2}\n",
      "job.yaml", corpus_dir().str());
  CHECK(spec.data.eval_fraction == 0.05);
  CHECK(spec.eval.interval == 50);
  CHECK(spec.eval.batches == 3);
  CHECK(spec.checkpoint.dir == (corpus_dir().path() / "ckpt/run1").string());  // against the spec's folder
  CHECK(spec.checkpoint.interval == 100);
  CHECK(spec.checkpoint.keep == 2);

  check(only_problem(with_data("eval: {interval: 10}\n")), 1, "eval.interval", "10",
        "needs held-out text, but data.eval_fraction is 0");
  check(only_problem(with_data("checkpoint: {interval: 10}\n")), 1, "checkpoint.interval", "10",
        "needs checkpoint.dir (the folder to write checkpoints to)");
  check(only_problem("data: {path: corpus.txt, eval_fraction: 0.6}\n"), 1, "data.eval_fraction", "0.6",
        "must be in [0, 0.5]");
  check(only_problem(with_data("checkpoint: {dir: corpus.txt}\n")), 1, "checkpoint.dir", "\"corpus.txt\"",
        "names a file, not a folder");

  const TempDir small;
  small.write("short.txt", std::string(20, 'x'));  // one sequence of 16 + 1 bytes
  const auto no_training = only_problem(
      "model: {seq_len: 16}\ndata: {path: short.txt, eval_fraction: 0.1}\n", small.str());
  check(no_training, 2, "data.eval_fraction", "0.1",
        "leaves no training sequence: the text holds 1 sequence(s) of model.seq_len + 1 bytes and 1 "
        "would be held out");
}

TEST_CASE("observe fields: runs folder, traced steps, peak TFLOP/s, TensorBoard", "[config]") {
  const auto spec = parse_job_spec(with_data("observe: {runs_dir: /srv/runs, trace_steps: 0, peak_tflops: 2.5}\n"),
                                   "job.yaml", corpus_dir().str());
  CHECK(spec.observe.runs_dir == "/srv/runs");
  CHECK(spec.observe.trace_steps == 0);
  CHECK(spec.observe.peak_tflops == 2.5);

  const auto defaults = parse_job_spec(with_data(""), "job.yaml", corpus_dir().str());
  CHECK(defaults.observe.runs_dir == "runs");
  CHECK(defaults.observe.trace_steps == 20);
  CHECK(defaults.observe.peak_tflops == 0.0);
  CHECK(defaults.observe.tensorboard);
  CHECK_FALSE(parse_job_spec(with_data("observe: {tensorboard: false}\n"), "job.yaml", corpus_dir().str())
                  .observe.tensorboard);
  check(only_problem(with_data("observe: {tensorboard: maybe}\n")), 1, "observe.tensorboard", "\"maybe\"",
        "must be true or false");

  check(only_problem(with_data("observe: {trace_steps: -1}\n")), 1, "observe.trace_steps", "-1",
        "must be in [0, 1000000]");
  check(only_problem(with_data("observe: {peak_tflops: -2}\n")), 1, "observe.peak_tflops", "-2",
        "must be in [0, 1000000]");
  check(only_problem(with_data("observe: {runs_dir: \"\"}\n")), 1, "observe.runs_dir", "\"\"",
        "must be a non-empty folder");
}

TEST_CASE("restart fields: train.max_restarts and train.restart_backoff_s", "[config]") {
  const auto defaults = parse_job_spec(with_data(""), "job.yaml", corpus_dir().str());
  CHECK(defaults.train.max_restarts == 0);
  CHECK(defaults.train.restart_backoff_s == 1.0);
  const auto spec = parse_job_spec(with_data("train: {max_restarts: 3, restart_backoff_s: 0.5}\n"), "job.yaml",
                                   corpus_dir().str());
  CHECK(spec.train.max_restarts == 3);
  CHECK(spec.train.restart_backoff_s == 0.5);
  check(only_problem(with_data("train: {max_restarts: -1}\n")), 1, "train.max_restarts", "-1",
        "must be in [0, 1000]");
  check(only_problem(with_data("train: {restart_backoff_s: 4000}\n")), 1, "train.restart_backoff_s", "4000",
        "must be in [0, 3600]");
}

TEST_CASE("runtime.device_memory_gib: GiB of one worker's device, 0 (not given) by default", "[config]") {
  CHECK(parse_job_spec(with_data("runtime: {device_memory_gib: 79.6}\n"), "job.yaml", corpus_dir().str())
            .runtime.device_memory_gib == 79.6);
  CHECK(parse_job_spec(with_data(""), "job.yaml", corpus_dir().str()).runtime.device_memory_gib == 0.0);
  check(only_problem(with_data("runtime: {device_memory_gib: -1}\n")), 1, "runtime.device_memory_gib", "-1",
        "must be in [0, 1000000]");
}

TEST_CASE("runtime.cpu_binding: cores by default, or none", "[config]") {
  CHECK(parse_job_spec(with_data(""), "job.yaml", corpus_dir().str()).runtime.cpu_binding == CpuBinding::Cores);
  CHECK(parse_job_spec(with_data("runtime: {cpu_binding: none}\n"), "job.yaml", corpus_dir().str())
            .runtime.cpu_binding == CpuBinding::None);
  const Message typo = only_problem(with_data("runtime: {cpu_binding: off}\n"));
  check(typo, 1, "runtime.cpu_binding", "\"off\"", "must be one of cores, none");
  CHECK(typo.hint == "did you mean 'none'?");
}
