// Tests for train/resume: resuming is refused when the learning-rate schedule's horizon would change the
// rate of a step still to train (issue 12, fault 4), and allowed when every remaining rate is kept. Torch-free.
#include <catch2/catch_test_macros.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint_meta.hpp"
#include "support/checkpoint_meta.hpp"
#include "support/temp_dir.hpp"
#include "optim/lr_schedule.hpp"
#include "train/resume.hpp"

namespace ppctl {
using test::has;
using test::meta_of;
using test::refusal;
using test::spec_of;

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

  auto j = nlohmann::json::parse(
      checkpoint::checkpoint_meta_text(meta_of(spec_of(dir, 10, "lr_schedule: cosine"), 4, 10)));
  j.erase("schedule");
  const auto old = checkpoint::parse_checkpoint_meta(j.dump(), "meta.json");
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
                              optim::learning_rate(longer_warmup.optimizer, 1, 20),
                              optim::learning_rate(saved.optimizer, 1, 10))));
  CHECK(optim::learning_rate(longer_warmup.optimizer, 1, 20) != optim::learning_rate(saved.optimizer, 1, 10));
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

}  // namespace ppctl
