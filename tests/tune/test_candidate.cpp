// Tests of tune/candidate: the spec lines of a candidate, their application to a spec's YAML (validated by the
// loader's rules), and the reason a refused candidate is counted under.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>

#include "config/load.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"
#include "tune/candidate.hpp"

using namespace ppctl;
using Catch::Matchers::ContainsSubstring;

namespace {

const std::string kSpec = R"(model: {vocab_size: 256, layers: 6, hidden: 32, heads: 4, seq_len: 16}
pipeline: {stages: 2, microbatches: 4, micro_batch_size: 2, layers_per_stage: [2, 4]}
data: {path: corpus.txt}
train: {recompute: full, recompute_every: 2}
)";

/// The spec of kSpec as if read from dir/job.yaml (data: dir/corpus.txt).
config::JobSpec spec_in(const test::TempDir& dir) {
  test::write_checked(dir.path / "corpus.txt", std::string(4000, 'a'));
  return config::parse_job_spec(kSpec, (dir.path / "job.yaml").string(), dir.path.string());
}

}  // namespace

TEST_CASE("a candidate's changes select its knobs and remove the keys that would contradict them") {
  test::TempDir dir;
  const auto spec = spec_in(dir);
  const tune::Knobs knobs{config::ScheduleKind::ZBH1, 1, 8, 1, tune::Split::Auto, config::Recompute::None};
  const auto changes = tune::changes_of(knobs, spec);
  const tune::SpecEditor editor(kSpec, dir.path.string());
  const auto edited = editor.apply(changes);
  CHECK(edited.pipeline.schedule == config::ScheduleKind::ZBH1);
  CHECK(edited.pipeline.microbatches == 8);
  CHECK(edited.pipeline.micro_batch_size == 1);
  CHECK(edited.pipeline.balance == "auto");
  CHECK(edited.pipeline.layers_per_stage.empty());  // removed: it excludes balance auto
  CHECK(edited.train.recompute == config::Recompute::None);
  CHECK(edited.train.recompute_every == 2);  // the spec's, kept
  CHECK(edited.model.layers == 6);           // untouched sections stay
  const auto lines = tune::yaml_lines(changes);
  CHECK(lines ==
        "pipeline: {schedule: zb-h1, virtual_stages: 1, microbatches: 8, micro_batch_size: 1, balance: auto}\n"
        "train: {recompute: none}\n"
        "# remove: pipeline.layers_per_stage\n");
  CHECK(tune::describe(knobs) == "zb-h1, m 8 x mbs 1, auto split, recompute none");
}

TEST_CASE("a candidate that breaks a spec rule is refused by the loader, counted by field and rule") {
  test::TempDir dir;
  const auto spec = spec_in(dir);
  const tune::SpecEditor editor(kSpec, dir.path.string());
  // v 4 needs 2 x 4 = 8 blocks; the model has 6.
  const tune::Knobs knobs{config::ScheduleKind::Interleaved1F1B, 4, 4, 2, tune::Split::Uniform,
                          config::Recompute::None};
  try {
    (void)editor.apply(tune::changes_of(knobs, spec));
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    const auto reason = tune::refusal_reason(e);
    CHECK_THAT(reason, ContainsSubstring("rule: "));
    CHECK_THAT(reason, !ContainsSubstring("candidate:"));  // no location
    CHECK_THAT(reason, !ContainsSubstring("(fix:"));
    CHECK_THAT(reason, !ContainsSubstring("value "));
  }
  // The same rule for another candidate gives the same reason, so that they count together.
  const tune::Knobs other{config::ScheduleKind::Interleaved1F1B, 4, 2, 4, tune::Split::Auto, config::Recompute::Full};
  std::string first, second;
  try {
    (void)editor.apply(tune::changes_of(knobs, spec));
  } catch (const ConfigError& e) {
    first = tune::refusal_reason(e);
  }
  try {
    (void)editor.apply(tune::changes_of(other, spec));
  } catch (const ConfigError& e) {
    second = tune::refusal_reason(e);
  }
  CHECK(!first.empty());
  CHECK(first == second);
}

TEST_CASE("SpecEditor refuses a spec that is not a YAML mapping") {
  CHECK_THROWS_AS(tune::SpecEditor("- just\n- a list\n", ""), ConfigError);
}

TEST_CASE("a candidate at another tp names it and the dp it leaves; at the spec's tp neither key is written") {
  config::JobSpec spec;
  tune::Knobs knobs{config::ScheduleKind::OneFOneB, 1, 16, 1, tune::Split::Uniform, config::Recompute::Full, 4, 2};
  CHECK(tune::describe(knobs) == "1f1b, m 16 x mbs 1, uniform split, recompute full, tp 4 x dp 2");
  CHECK_THAT(tune::yaml_lines(tune::changes_of(knobs, spec)),
             Catch::Matchers::ContainsSubstring("balance: uniform, tensor_parallel: 4, data_parallel: 2}"));
  knobs.tensor_parallel = knobs.data_parallel = 0;
  CHECK(tune::describe(knobs) == "1f1b, m 16 x mbs 1, uniform split, recompute full");
  CHECK_THAT(tune::yaml_lines(tune::changes_of(knobs, spec)), !Catch::Matchers::ContainsSubstring("parallel"));
}
