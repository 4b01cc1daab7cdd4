// Tests for train/checkpoint_meta: meta.json round trip and checked parsing, and the resume check's
// learning-rate schedule horizon (issue 12, fault 4). Torch-free.
#include <catch2/catch_test_macros.hpp>
#include <fmt/format.h>

#include <climits>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "config/load.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"
#include "train/checkpoint_meta.hpp"
#include "train/lr_schedule.hpp"

namespace ppctl {
namespace {

/// A spec of a 4-layer model trained for `steps` steps with `optimizer` (YAML flow-map items).
config::JobSpec spec_of(const test::TempDir& dir, int64_t steps, const std::string& optimizer) {
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
train::CheckpointMeta meta_of(const config::JobSpec& spec, int64_t step, int64_t total_steps) {
  train::CheckpointMeta meta;
  meta.step = step;
  meta.model = spec.model;
  meta.tie_embeddings = spec.model.tie_embeddings;
  meta.sequences_per_step = 8;
  meta.next_sample = step * 8;
  meta.seed = spec.train.seed;
  meta.stages = 2;
  meta.lr = 3e-4;
  meta.schedule = train::CheckpointSchedule{spec.optimizer.lr_schedule, spec.optimizer.lr, spec.optimizer.min_lr,
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

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("meta.json round trip keeps every field, the schedule included") {
  const test::TempDir dir;
  const auto spec = spec_of(dir, 10, "lr: 0.003, lr_schedule: cosine, min_lr: 0.0003, warmup_steps: 2");
  const auto meta = meta_of(spec, 4, 10);
  const auto back = train::parse_checkpoint_meta(train::checkpoint_meta_text(meta), dir.path / "meta.json");
  CHECK(back.step == 4);
  CHECK(back.next_sample == 32);
  CHECK(back.files == meta.files);
  REQUIRE(back.schedule.has_value());
  CHECK(back.schedule->lr_schedule == config::LrSchedule::Cosine);
  CHECK(back.schedule->lr == 0.003);
  CHECK(back.schedule->min_lr == 0.0003);
  CHECK(back.schedule->warmup_steps == 2);
  CHECK(back.schedule->steps == 10);
}

TEST_CASE("resuming a decaying schedule with another horizon is refused, naming the field and the fix") {
  const test::TempDir dir;
  const auto cosine = "lr: 0.003, lr_schedule: cosine, min_lr: 0.0003";
  const auto spec = spec_of(dir, 10, cosine);
  const auto meta = meta_of(spec, 10, 10);
  // The case: a cosine run over 10 steps resumed with steps: 20 restarted its decay.
  const auto longer = spec_of(dir, 20, cosine);
  const auto text = refusal([&] { train::check_resumable(meta, longer, 8, 20, "ckpt/step-00000010"); });
  CHECK(has(text, "train.steps is 10 in the checkpoint ckpt/step-00000010 but 20 now"));
  CHECK(has(text, "fix: resume with train.steps: 10"));
  // Stopped half way (the checkpoint of step 4 of 10): the same horizon continues, another does not.
  const auto half = meta_of(spec, 4, 10);
  CHECK_NOTHROW(train::check_resumable(half, spec, 8, 10, "ckpt"));
  CHECK(has(refusal([&] { train::check_resumable(half, spec, 8, 6, "ckpt"); }), "train.steps is 10"));
  // The other fields that decide the rate.
  const auto other = [&](const std::string& optimizer) { return spec_of(dir, 10, optimizer); };
  CHECK(has(refusal([&] { train::check_resumable(half, other("lr: 0.003, lr_schedule: linear, min_lr: 0.0003"),
                                                 8, 10, "ckpt"); }),
            "optimizer.lr_schedule is cosine in the checkpoint"));
  CHECK(has(refusal([&] { train::check_resumable(half, other("lr: 0.002, lr_schedule: cosine, min_lr: 0.0003"),
                                                 8, 10, "ckpt"); }),
            "optimizer.lr is 0.003 in the checkpoint"));
  CHECK(has(refusal([&] { train::check_resumable(half, other("lr: 0.003, lr_schedule: cosine, min_lr: 0"), 8, 10,
                                                 "ckpt"); }),
            "optimizer.min_lr is 0.0003 in the checkpoint"));
  CHECK(has(refusal([&] { train::check_resumable(half, other(std::string(cosine) + ", warmup_steps: 3"), 8, 10,
                                                 "ckpt"); }),
            "optimizer.warmup_steps is 0 in the checkpoint"));
  // A finished decaying run does not suggest raising train.steps (that would be refused).
  const auto done = refusal([&] { train::check_resumable(meta, spec, 8, 10, "ckpt"); });
  CHECK(has(done, "its cosine schedule has ended"));
  CHECK(!has(done, "raise train.steps"));
}

TEST_CASE("a constant schedule resumes with more steps; an old checkpoint without a schedule still loads") {
  const test::TempDir dir;
  const auto spec = spec_of(dir, 10, "lr: 0.001, warmup_steps: 2");
  const auto meta = meta_of(spec, 10, 10);
  const auto longer = spec_of(dir, 20, "lr: 0.001, warmup_steps: 2");
  CHECK_NOTHROW(train::check_resumable(meta, longer, 8, 20, "ckpt"));
  CHECK(has(refusal([&] { train::check_resumable(meta, spec_of(dir, 20, "lr: 0.002"), 8, 20, "ckpt"); }),
            "optimizer.lr is 0.001"));

  auto j = nlohmann::json::parse(train::checkpoint_meta_text(meta_of(spec_of(dir, 10, "lr_schedule: cosine"), 4, 10)));
  j.erase("schedule");
  const auto old = train::parse_checkpoint_meta(j.dump(), "meta.json");
  CHECK(!old.schedule.has_value());
  CHECK_NOTHROW(train::check_resumable(old, spec_of(dir, 20, "lr_schedule: cosine"), 8, 20, "ckpt"));
}

TEST_CASE("a changed schedule resumes when every remaining step keeps its rate, else the first differing step is named") {
  const test::TempDir dir;
  const auto saved = spec_of(dir, 10, "lr: 0.001, warmup_steps: 2");
  const auto longer_warmup = spec_of(dir, 20, "lr: 0.001, warmup_steps: 5");
  // Constant after both warmups (steps 11..20 of a run saved after step 10): every rate is lr, so it continues.
  CHECK_NOTHROW(train::check_resumable(meta_of(saved, 10, 10), longer_warmup, 8, 20, "ckpt"));
  // Saved after step 1, step 2 would still warm up under warmup 5: refused, naming that step and both rates.
  const auto text = refusal([&] { train::check_resumable(meta_of(saved, 1, 10), longer_warmup, 8, 20, "ckpt"); });
  CHECK(has(text, "optimizer.warmup_steps is 2 in the checkpoint ckpt but 5 now"));
  CHECK(has(text, fmt::format("step 2 would train at rate {:g} instead of {:g}",
                              train::learning_rate(longer_warmup.optimizer, 1, 20),
                              train::learning_rate(saved.optimizer, 1, 10))));
  CHECK(train::learning_rate(longer_warmup.optimizer, 1, 20) != train::learning_rate(saved.optimizer, 1, 10));
  CHECK(has(text, "fix: resume with optimizer.warmup_steps: 2, or start"));  // a constant rate has no horizon
  // Saved after step 3 with warmup 5 resumed with warmup 4: steps 4 and 5 differ; the first one is named.
  const auto w5 = spec_of(dir, 10, "lr: 0.001, warmup_steps: 5");
  CHECK(has(refusal([&] { train::check_resumable(meta_of(w5, 3, 10), spec_of(dir, 10, "lr: 0.001, warmup_steps: 4"),
                                                 8, 10, "ckpt"); }),
            fmt::format("step 4 would train at rate {:g} instead of {:g}", 0.001, 0.0008)));
  // A cosine schedule with min_lr = lr never decays: after both warmups its rate is lr, like a constant one.
  const auto flat = spec_of(dir, 10, "lr: 0.001, lr_schedule: cosine, min_lr: 0.001, warmup_steps: 2");
  CHECK_NOTHROW(train::check_resumable(meta_of(flat, 4, 10), spec_of(dir, 10, "lr: 0.001, warmup_steps: 3"), 8, 10,
                                       "ckpt"));
}

TEST_CASE("malformed meta.json values are refused with a CheckpointError naming the file") {
  const test::TempDir dir;
  const auto spec = spec_of(dir, 10, "lr: 0.001");
  const auto good = nlohmann::json::parse(train::checkpoint_meta_text(meta_of(spec, 4, 10)));
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = good;
    edit(j);
    return refusal([&] { train::parse_checkpoint_meta(j.dump(), "ckpt/meta.json"); });
  };
  // Kinds the fuzz target found or could find: numbers that do not convert, products that overflow,
  // sums that overflow, checksums out of range, layer counts no file list supports, bad schedules.
  CHECK(has(refused([](auto& j) { j["step"] = 1e30; }), "holds 1e+30 where an integer belongs"));
  CHECK(has(refused([](auto& j) { j["model"]["layers"] = 2.5; }), "where an integer belongs"));
  CHECK(has(refused([](auto& j) {
              j["step"] = int64_t{1} << 62;
              j["sequences_per_step"] = 8;
            }),
            "holds values no checkpoint has"));
  CHECK(has(refused([](auto& j) {
              j["data"]["sources"] = {"a", "b"};
              j["data"]["counts"] = {INT64_MAX, 33};
            }),
            "per-source counts do not sum"));
  CHECK(has(refused([](auto& j) { j["files"]["head.pt"]["fnv1a64"] = "1ffffffffffffffff"; }), "malformed checksum"));
  CHECK(has(refused([](auto& j) { j["files"]["head.pt"]["fnv1a64"] = "12zz"; }), "malformed checksum"));
  CHECK(has(refused([](auto& j) { j["model"]["layers"] = INT64_MAX; }), "fewer than model.layers"));
  CHECK(has(refused([](auto& j) { j["schedule"]["min_lr"] = 5.0; }), "a learning-rate schedule no run has"));
  CHECK(has(refused([](auto& j) { j["schedule"]["lr_schedule"] = "step"; }), "unknown schedule.lr_schedule 'step'"));
  CHECK(has(refused([](auto& j) { j = nlohmann::json::array(); }), "cannot be read as checkpoint metadata"));
  CHECK(has(refusal([] { train::parse_checkpoint_meta("{\"format\": ", "ckpt/meta.json"); }), "ckpt/meta.json"));
}

}  // namespace ppctl

namespace ppctl {
namespace {

/// The message throw_corrupt_checkpoint gives for `file`.
std::string corrupt_message(const std::filesystem::path& file) {
  try {
    train::throw_corrupt_checkpoint(file, "is damaged");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a corrupt checkpoint's fix names another checkpoint beside it, or says there is none", "[checkpoint]") {
  const test::TempDir dir;
  const auto make = [&](const std::string& name, bool complete) {
    std::filesystem::create_directories(dir.path / name);
    if (complete) std::ofstream(dir.path / name / "meta.json") << "{}";
  };
  make("step-00000004", true);
  const auto file = dir.path / "step-00000004" / "meta.json";
  CHECK(corrupt_message(file).find("no other checkpoint is beside " + (dir.path / "step-00000004").string()) !=
        std::string::npos);
  make("step-00000006", true);  // only a newer one
  CHECK(corrupt_message(file).find("--resume " + (dir.path / "step-00000006").string()) != std::string::npos);
  make("step-00000001", true);
  make("step-00000002", true);
  make("step-00000003", false);  // no meta.json: not a complete checkpoint
  make("other", true);
  const std::string message = corrupt_message(file);
  CHECK(message.find("checkpoint file " + file.string() + " is damaged") != std::string::npos);
  CHECK(message.find("--resume " + (dir.path / "step-00000002").string() + ")") != std::string::npos);
}

}  // namespace ppctl
