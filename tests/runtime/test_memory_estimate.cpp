// The memory estimate (plan/memory_estimate.hpp, schedule/memory_plan.hpp) against the executor's
// measured bytes: each rank's real stages run its real action list for one step on the CPU, with
// the neighbouring ranks replaced by a communicator whose receives deliver random tensors, and the
// counting allocator reports what forwards keep for their backwards (StepResult::kept_bytes) and the
// step's high-water mark (StepResult::peak_bytes). Over schedules x recompute modes x pipeline sizes
// the kept estimate is within 20 % on every rank and orders the ranks the same way, and the plan's
// total (static + peak) is within 10 % of static + the measured peak. Prints the comparison table
// (docs/measurements.md).
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <stdexcept>

#include "comm/communicator.hpp"
#include "plan/layout.hpp"
#include "runtime/executor.hpp"
#include "schedule/job_program.hpp"
#include "schedule/memory_plan.hpp"
#include "support/memory_spec.hpp"

using namespace ppctl;

namespace {

/// Stands in for the other ranks: a receive fills its buffer with N(0, 1) values at once, a send
/// completes at once but, as under Gloo, poll cannot tell (the executor frees it at its release point). Collectives are not used by a step.
class LoopbackCommunicator : public comm::Communicator {
 public:
  LoopbackCommunicator(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  comm::PendingOp isend(const at::Tensor&, int peer, int64_t, std::string what) override {
    return {nullptr, std::move(what), peer};
  }
  comm::PendingOp irecv(at::Tensor& tensor, int peer, int64_t tag, std::string what) override {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(tag + 1));
    tensor.normal_(0.0, 1.0, gen);
    return {nullptr, std::move(what), peer};
  }
  void wait(const comm::PendingOp&) override {}
  bool poll(const comm::PendingOp&) override { return false; }  // as Gloo: no test of a send
  void barrier() override { throw std::logic_error("no barrier in a step"); }
  std::vector<int64_t> all_gather(int64_t) override { throw std::logic_error("no all_gather in a step"); }
  std::vector<double> all_reduce_sum(const std::vector<double>&) override {
    throw std::logic_error("no all_reduce in a step");
  }
  void all_reduce_sum_inplace(at::Tensor&) override { throw std::logic_error("no all_reduce in a step"); }
  comm::PendingOp all_reduce_sum_async(at::Tensor&, std::string) override {
    throw std::logic_error("no all_reduce in a step");
  }
  comm::PendingOp reduce_scatter_sum_async(at::Tensor&, std::string) override {
    throw std::logic_error("no reduce-scatter in a step");
  }
  comm::PendingOp all_gather_inplace_async(at::Tensor&, std::string) override {
    throw std::logic_error("no all-gather in a step");
  }

 private:
  int rank_, world_size_;
};

/// One case of the grid.
struct Case {
  std::string schedule;
  int64_t stages;
  std::string recompute;  // none, full, blocks
  int64_t every = 1;
  std::string precision = "fp32";
  std::string arch = "gpt2";
  double dropout = 0.0;
};

config::JobSpec spec_of(const Case& c) {
  auto spec = test::memory_test_spec();
  spec.model.arch = c.arch == "llama" ? config::Arch::Llama : config::Arch::Gpt2;
  spec.model.tie_embeddings = spec.model.arch == config::Arch::Gpt2;
  if (c.arch == "llama") spec.model.kv_heads = 2;
  spec.model.dropout = c.dropout;
  spec.pipeline.stages = c.stages;
  spec.pipeline.microbatches = 8;
  if (c.schedule == "gpipe") spec.pipeline.schedule = config::ScheduleKind::GPipe;
  if (c.schedule == "1f1b") spec.pipeline.schedule = config::ScheduleKind::OneFOneB;
  if (c.schedule == "zb-h1") spec.pipeline.schedule = config::ScheduleKind::ZBH1;
  if (c.schedule == "interleaved-1f1b") {
    spec.pipeline.schedule = config::ScheduleKind::Interleaved1F1B;
    spec.pipeline.virtual_stages = 2;
  }
  if (c.schedule == "zbv") {
    spec.pipeline.schedule = config::ScheduleKind::ZBV;
    spec.pipeline.virtual_stages = 2;
  }
  spec.train.recompute = c.recompute == "full"     ? config::Recompute::Full
                         : c.recompute == "blocks" ? config::Recompute::Blocks
                                                   : config::Recompute::None;
  spec.train.recompute_every = c.every;
  spec.runtime.precision = c.precision == "bf16" ? config::Precision::Bf16 : config::Precision::Fp32;
  return spec;
}

/// What one step of a rank measures: StepResult's kept and peak bytes above the step's start, and
/// the static bytes the executor does not see (weights, the gradient buffer, AdamW's two moments).
struct Measured {
  int64_t kept = 0;
  int64_t peak = 0;
  int64_t fixed = 0;
};

/// One step of `rank`'s actions in `spec`'s program, its gradients allocated beforehand as the
/// trainer's gradient buffer is (backwards then add into them in place).
Measured measure_step(const config::JobSpec& spec, const schedule::Program& program, const plan::Layout& layout,
                      int rank) {
  std::map<int64_t, model::StageModule> stages;
  int64_t weight_bytes = 0;
  for (const auto& s : layout.stages) {
    if (s.rank != rank) continue;
    model::StageModule stage(spec.model, s, /*seed=*/7);
    stage->set_precision(spec.runtime.precision);
    for (auto& p : stage->parameters()) {
      p.mutable_grad() = torch::zeros_like(p);
      weight_bytes += static_cast<int64_t>(p.nbytes());
    }
    stages.emplace(s.stage, stage);
  }
  LoopbackCommunicator comm(rank, static_cast<int>(program.num_ranks()));
  const auto& m = spec.model;
  runtime::Executor executor(stages, program, rank, &comm, {spec.pipeline.micro_batch_size, m.seq_len, m.hidden},
                             torch::kCPU, {spec.train.recompute, spec.train.recompute_every},
                             runtime::p2p_torch_dtype(spec.runtime));  // bf16 transfers under bf16, as workers
  const runtime::MicrobatchSource data = [&](int64_t microbatch) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(100 + microbatch));
    auto tokens = torch::randint(0, m.vocab_size, {spec.pipeline.micro_batch_size, m.seq_len + 1}, gen, torch::kLong);
    return runtime::MicrobatchData{tokens.slice(1, 0, m.seq_len), tokens.slice(1, 1, m.seq_len + 1)};
  };
  const double scale = 1.0 / static_cast<double>(spec.pipeline.microbatches);
  const auto step =
      executor.run_step(program.ranks.at(static_cast<size_t>(rank)), data, {true, 7, 0, 0}, scale);
  return {step.kept_bytes, step.peak_bytes, 4 * weight_bytes};
}

std::string name_of(const Case& c) {
  std::string mode = c.recompute == "blocks" ? fmt::format("blocks/{}", c.every) : c.recompute;
  return fmt::format("{} {} p{} {} {}{}", c.arch, c.schedule, c.stages, mode, c.precision,
                     c.dropout > 0 ? " dropout" : "");
}

/// Runs `c` on every rank, checks each rank's kept bytes within `tolerance` and the order of ranks,
/// the estimate's total (static + peak) within `peak_tolerance` of static + the measured peak, and
/// the peak alone within twice that. Returns the table rows "case | rank | in flight | kept est | kept meas | ratio | peak est |
/// peak meas | ratio | total ratio".
std::string check_case(const Case& c, double tolerance, double peak_tolerance) {
  const auto spec = spec_of(c);
  const auto program = schedule::job_program(spec);
  const auto layout = plan::make_layout(spec, &program.stage_to_rank);
  const auto estimate = schedule::estimate_memory(spec, layout, program);
  std::vector<int64_t> measured;
  std::string rows;
  for (int r = 0; r < program.num_ranks(); ++r) {
    const auto& e = estimate[static_cast<size_t>(r)];
    const auto got = measure_step(spec, program, layout, r);
    measured.push_back(got.kept);
    const double est = static_cast<double>(e.activations);
    const double ratio = est / static_cast<double>(got.kept);
    const double peak_ratio = static_cast<double>(e.peak) / static_cast<double>(got.peak);
    const double total_ratio = static_cast<double>(e.total()) / static_cast<double>(got.fixed + got.peak);
    rows += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.3f} | {:.1f} | {:.1f} | {:.3f} | {:.1f} | {:.3f} |\n",
                        name_of(c), r, e.in_flight, est / 1024.0, static_cast<double>(got.kept) / 1024.0, ratio,
                        static_cast<double>(e.peak) / 1024.0, static_cast<double>(got.peak) / 1024.0, peak_ratio,
                        static_cast<double>(got.fixed + got.peak) / 1024.0, total_ratio);
    INFO(name_of(c) << " rank " << r << ": kept estimate " << est << " B, measured " << got.kept << " B; peak "
                    << e.peak << " B, measured " << got.peak << " B; static " << e.fixed.total() << " B, measured "
                    << got.fixed << " B");
    CHECK(std::abs(ratio - 1.0) <= tolerance);
    CHECK(e.fixed.total() == got.fixed);  // 16 B per parameter, as the trainer allocates them
    CHECK(std::abs(total_ratio - 1.0) <= peak_tolerance);
    CHECK(std::abs(peak_ratio - 1.0) <= 2 * peak_tolerance);
  }
  // The same order: wherever the estimate tells two ranks apart by more than 5 %, so do the measurements.
  for (size_t a = 0; a < measured.size(); ++a) {
    for (size_t b = 0; b < measured.size(); ++b) {
      if (static_cast<double>(estimate[a].activations) > 1.05 * static_cast<double>(estimate[b].activations)) {
        INFO(name_of(c) << ": ranks " << a << " and " << b);
        CHECK(measured[a] > measured[b]);
      }
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("estimated activations per rank match the executor's measured bytes") {
  at::set_num_threads(1);
  std::vector<Case> cases;
  for (const std::string schedule : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv"}) {
    for (const int64_t stages : {2, 4}) {
      for (const auto& [mode, every] : std::vector<std::pair<std::string, int64_t>>{
               {"none", 1}, {"full", 1}, {"blocks", 1}, {"blocks", 2}}) {
        cases.push_back({schedule, stages, mode, every});
      }
    }
  }
  for (const std::string mode : {"none", "full"}) {  // bf16 autocast, and llama (GQA), on a few
    cases.push_back({"1f1b", 4, mode, 1, "bf16"});
    cases.push_back({"1f1b", 4, mode, 1, "fp32", "llama"});
    cases.push_back({"zbv", 2, mode, 1, "bf16", "llama"});
  }
  cases.push_back({"1f1b", 2, "none", 1, "fp32", "gpt2", 0.1});  // dropout masks
  cases.push_back({"1f1b", 2, "none", 1, "bf16", "llama", 0.1});
  std::string table =
      "| case | pp rank | in flight | kept estimate KiB | kept measured KiB | estimate / measured | peak estimate KiB "
      "| peak measured KiB | estimate / measured | static + peak measured KiB | estimate / measured |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : cases) table += check_case(c, 0.20, 0.10);
  std::cout << table;
}
