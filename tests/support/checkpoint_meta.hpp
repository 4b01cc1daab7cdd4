// Test support: a small job spec and the meta.json a run of it writes, for the checkpoint-metadata and
// resume tests (tests/checkpoint/test_checkpoint_meta.cpp, tests/train/test_resume.cpp). Torch-free.
#pragma once

#include <catch2/catch_test_macros.hpp>
#include <fmt/format.h>

#include <fstream>
#include <string>

#include "checkpoint/checkpoint_meta.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"

namespace ppctl::test {

/// A spec of a 4-layer model trained for `steps` steps with `optimizer` (YAML flow-map items).
inline config::JobSpec spec_of(const TempDir& dir, int64_t steps, const std::string& optimizer) {
  std::ofstream(dir.path / "corpus.txt") << "the quick brown fox jumps over the lazy dog\n";
  const auto path = dir.path / "job.yaml";
  std::ofstream(path) << fmt::format(
      "model: {{layers: 4, hidden: 32, heads: 4, seq_len: 16}}\n"
      "pipeline: {{stages: 2, schedule: 1f1b, microbatches: 4, micro_batch_size: 2}}\n"
      "data: {{path: corpus.txt}}\noptimizer: {{{}}}\ntrain: {{steps: {}, seed: 17}}\n",
      optimizer, steps);
  return config::load_job_spec(path.string());
}

/// The meta.json a run of `spec` writes after `step` steps of `total_steps` (8 sequences per step).
inline checkpoint::CheckpointMeta meta_of(const config::JobSpec& spec, int64_t step, int64_t total_steps) {
  checkpoint::CheckpointMeta meta;
  meta.step = step;
  meta.model = spec.model;
  meta.tie_embeddings = spec.model.tie_embeddings;
  meta.sequences_per_step = 8;
  meta.next_sample = step * 8;
  meta.seed = spec.train.seed;
  meta.stages = 2;
  meta.lr = 3e-4;
  meta.schedule = checkpoint::CheckpointSchedule{spec.optimizer.lr_schedule, spec.optimizer.lr, spec.optimizer.min_lr,
                                                 spec.optimizer.warmup_steps, total_steps};
  for (const char* name : {"embedding.pt", "block0.pt", "block1.pt", "block2.pt", "block3.pt", "head.pt"}) {
    meta.files[name] = {100, 0xfeedfacecafebeefULL};
  }
  return meta;
}

/// The message of the CheckpointError `f` throws (fails the test when it throws nothing).
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  FAIL("no CheckpointError");
  return {};
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace ppctl::test
