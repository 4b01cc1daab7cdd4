// Evaluation on the held-out split: the eval loss does not depend on the pipeline split, is logged
// when due, and running it changes nothing in training.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <fmt/format.h>

#include <map>
#include <regex>
#include <sstream>

#include "support/tiny_job.hpp"
#include "train/eval.hpp"

namespace fs = std::filesystem;
using namespace ppctl;
using namespace ppctl::test;

namespace {

/// The logged lines `eval after step S: loss L` as S -> L.
std::map<int64_t, double> eval_losses(const std::string& output) {
  static const std::regex line(R"(eval after step (\d+): loss (\S+))");
  std::map<int64_t, double> losses;
  std::istringstream in(output);
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (std::regex_search(text, m, line)) losses[std::stoll(m[1])] = std::stod(m[2]);
  }
  return losses;
}

Run run_eval_job(const std::string& name, int64_t stages, int64_t microbatches, int64_t micro_batch_size,
                 int64_t interval) {
  Job job{stages, microbatches, micro_batch_size, 5};
  job.data = ", eval_fraction: 0.1";
  job.train = ", log_interval: 1";
  if (interval > 0) job.sections = fmt::format("eval: {{interval: {}, batches: 2}}\n", interval);
  const auto run = run_job(make_job(job, fresh_dir(name)), {});
  INFO(run.output);
  REQUIRE(run.result.exit_code == 0);
  return run;
}

}  // namespace

TEST_CASE("eval runs every eval.interval steps and after the last") {
  config::EvalSpec eval;
  CHECK_FALSE(train::eval_due(eval, 5, 5));  // interval 0: never
  eval.interval = 2;
  CHECK(train::eval_due(eval, 2, 5));
  CHECK_FALSE(train::eval_due(eval, 3, 5));
  CHECK(train::eval_due(eval, 4, 5));
  CHECK(train::eval_due(eval, 5, 5));
}

TEST_CASE("the eval loss does not depend on the pipeline split, and evaluating changes no training step") {
  // The same global batch of 8 sequences: 1 stage x m 2 x 4, 2 stages x m 4 x 2, 4 stages x m 8 x 1.
  const auto one = run_eval_job("eval_p1", 1, 2, 4, 2);
  const auto two = run_eval_job("eval_p2", 2, 4, 2, 2);
  const auto four = run_eval_job("eval_p4", 4, 8, 1, 2);
  const auto reference = eval_losses(one.output);
  REQUIRE(reference.size() == 3);  // after steps 2, 4 and 5
  for (const auto* run : {&two, &four}) {
    const auto losses = eval_losses(run->output);
    REQUIRE(losses.size() == 3);
    for (const auto& [step, loss] : reference) {
      INFO("step " << step);
      CHECK(std::abs(losses.at(step) - loss) <= 1e-4);  // logged with 4 decimals
    }
  }
  CHECK(reference.at(2) > reference.at(5));  // the model learns, and eval sees it

  const auto without = logged_steps(run_eval_job("eval_off", 2, 4, 2, 0).output);
  const auto with = logged_steps(two.output);
  REQUIRE(without.size() == 5);
  for (const auto& [step, logged] : without) {
    INFO("step " << step);
    CHECK(with.at(step).loss == logged.loss);
    CHECK(with.at(step).grad_norm == logged.grad_norm);
  }
  CHECK(eval_losses(run_eval_job("eval_off_check", 1, 2, 4, 0).output).empty());
}
