// Tests for observe/tensorboard_scalars: which tags a step, an evaluation and the end of a run give, with
// the numbers metrics.jsonl holds.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <map>
#include <string>

#include "observe/tensorboard_scalars.hpp"

using namespace ppctl::observe;

namespace {

std::map<std::string, double> by_tag(const std::vector<ppctl::interop::Scalar>& scalars) {
  std::map<std::string, double> out;
  for (const auto& s : scalars) CHECK(out.emplace(s.tag, s.value).second);  // no tag twice
  return out;
}

}  // namespace

TEST_CASE("a step's scalars are metrics.jsonl's numbers; MFU only with a peak", "[observe][tensorboard]") {
  StepMetrics m;
  m.step = 3;
  m.loss = 2.25;
  m.lr = 1e-3;
  m.grad_norm = 0.5;
  m.step_time_s = 0.25;
  m.tokens = 1000;
  m.model_flops = 4e12;
  m.devices = 2;
  m.peak_memory_bytes = 123456789;
  auto tags = by_tag(step_scalars(m));
  CHECK(tags == std::map<std::string, double>{{"train/loss", 2.25},
                                              {"train/lr", 1e-3},
                                              {"train/grad_norm", 0.5},
                                              {"train/tokens_per_s", 4000.0},
                                              {"train/step_time_s", 0.25},
                                              {"train/tflops", 8.0},
                                              {"memory/peak_bytes", 123456789.0}});
  m.peak_tflops = 16.0;
  tags = by_tag(step_scalars(m));
  REQUIRE(tags.count("train/mfu") == 1);
  CHECK(tags.at("train/mfu") == 0.5);

  m.loss = std::nan("");
  CHECK(std::isnan(by_tag(step_scalars(m)).at("train/loss")));
}

TEST_CASE("an evaluation gives eval/loss; the end gives the bubbles per rank", "[observe][tensorboard]") {
  CHECK(by_tag(eval_scalars(1.75)) == std::map<std::string, double>{{"eval/loss", 1.75}});

  RunSummary summary;
  CHECK(end_scalars(summary).empty());  // no timed step: no bubble report
  summary.bubbles = BubbleReport{{0.25, 0.5}, {0.2, 0.4}, {0.3, 0.6}, 10.0, 9.0};
  CHECK(by_tag(end_scalars(summary)) == std::map<std::string, double>{{"bubble/measured/rank0", 0.25},
                                                                      {"bubble/measured/rank1", 0.5},
                                                                      {"bubble/planned/rank0", 0.2},
                                                                      {"bubble/planned/rank1", 0.4},
                                                                      {"bubble/simulated/rank0", 0.3},
                                                                      {"bubble/simulated/rank1", 0.6}});
  CHECK(bubble_tag("planned", 12) == "bubble/planned/rank12");
}
