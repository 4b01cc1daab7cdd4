// Global gradient norm, non-finite detection and clipping (see grad_norm.hpp).
#include "optim/grad_norm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

#include "core/check.hpp"
#include "launch/stop_signals.hpp"

namespace ppctl::optim {
namespace {

/// The smallest value above 0 in `values`, or 0 when there is none (the "first microbatch + 1" entries).
double smallest_positive(const std::vector<double>& values) {
  double smallest = 0.0;
  for (const double v : values) {
    if (v > 0.0 && (smallest == 0.0 || v < smallest)) smallest = v;
  }
  return smallest;
}

/// Indices i with a non-finite values[i] (or, when `flags`, values[i] != 0).
std::vector<int64_t> marked(const std::vector<double>& values, bool flags) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (flags ? values[i] != 0.0 : !std::isfinite(values[i]))
      out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

std::string stage_list(const std::vector<int64_t>& stages) {
  return fmt::format("{} {}", stages.size() == 1 ? "stage" : "stages", fmt::join(stages, ", "));
}

}  // namespace

double GradientStats::norm() const {
  return std::sqrt(std::accumulate(sum_squares.begin(), sum_squares.end(), 0.0));
}

bool GradientStats::finite() const {
  return marked(sum_squares, false).empty() && marked(loss_nonfinite, true).empty();
}

std::string GradientStats::describe_nonfinite() const {
  std::vector<std::string> parts;
  const auto losses = marked(loss_nonfinite, true);
  const auto grads = marked(sum_squares, false);
  if (!losses.empty()) {
    parts.push_back("non-finite loss on " + stage_list(losses));
    // The first microbatch of the step that showed it (its number counts every replica's microbatches).
    if (const double first = smallest_positive(loss_microbatch); first > 0.0) parts.back() += fmt::format(" (first in microbatch {} of the step)", static_cast<int64_t>(first) - 1);
  }
  if (!grads.empty()) parts.push_back("non-finite gradients on " + stage_list(grads));
  if (const auto replicas = marked(replica_nonfinite, true);
      !replicas.empty() && replicas.size() < replica_nonfinite.size()) {  // named only when not all
    parts.back() += fmt::format(" (dp {} {})", replicas.size() == 1 ? "replica" : "replicas",
                                fmt::join(replicas, ", "));
  }
  return fmt::format("{}", fmt::join(parts, " and "));
}

GradientStats local_gradient_stats(const std::vector<model::StageModule>& stages,
                                   const std::map<int64_t, std::vector<torch::Tensor>>& owned, int64_t num_stages,
                                   double loss_sum, int64_t loss_count, int64_t nonfinite_microbatch) {
  GradientStats stats;
  stats.sum_squares.assign(static_cast<size_t>(num_stages), 0.0);
  stats.loss_nonfinite.assign(static_cast<size_t>(num_stages), 0.0);
  stats.loss_microbatch.assign(static_cast<size_t>(num_stages), 0.0);
  for (const auto& [stage, gradients] : owned) {
    const auto index = static_cast<size_t>(stage);
    PPCTL_ASSERT(index < stats.sum_squares.size(), "stage index beyond the job's stages");
    // Accumulated on the device in fp64 (a NaN or inf entry makes the sum non-finite); one
    // transfer per stage.
    torch::Tensor sum;
    for (const auto& grad : gradients) {
      if (!grad.defined()) continue;
      auto squares = grad.detach().to(torch::kDouble).square().sum();
      sum = sum.defined() ? sum + squares : squares;
    }
    if (sum.defined()) stats.sum_squares[index] = sum.item<double>();
  }
  for (const auto& stage : stages) {
    // Every tp rank of the head computes the same loss: rank 0 of the group reports it, so that the sums over the
    // tensor-parallel group (reduce_gradient_stats) count it once.
    if (stage->tensor_parallel().rank != 0) continue;
    if (stage->has_head() && loss_count > 0 && !std::isfinite(loss_sum)) {
      stats.loss_nonfinite[static_cast<size_t>(stage->layout().stage)] = 1.0;
      if (nonfinite_microbatch >= 0) {
        stats.loss_microbatch[static_cast<size_t>(stage->layout().stage)] = static_cast<double>(nonfinite_microbatch + 1);
      }
    }
  }
  return stats;
}

bool counts_in_norm(const model::StageModuleImpl& stage, const std::string& name) {
  return stage.tensor_parallel().rank == 0 || !model::parameter_split(name).replicated();
}

std::map<int64_t, std::vector<torch::Tensor>> stage_gradients(const std::vector<model::StageModule>& stages) {
  std::map<int64_t, std::vector<torch::Tensor>> gradients;
  for (const auto& stage : stages) {
    auto& list = gradients[stage->layout().stage];
    // A tied embedding counts once: on the first stage, not again as the last stage's copy. At t > 1 a parameter
    // every tp rank holds whole (norms, positions, row-parallel biases) counts on tp rank 0 only, a split one on
    // every rank (its shard): summed over the tensor-parallel group, each entry counts once.
    const auto copy = stage->has_head() ? stage->tied_weight() : torch::Tensor();
    for (const auto& item : stage->named_parameters()) {
      const auto& p = item.value();
      if (copy.defined() && p.is_same(copy)) continue;
      if (!counts_in_norm(*stage, item.key())) continue;
      list.push_back(p.grad());
    }
  }
  return gradients;
}

GradientStats local_gradient_stats(const std::vector<model::StageModule>& stages,
                                   int64_t num_stages, double loss_sum, int64_t loss_count,
                                   int64_t nonfinite_microbatch) {
  return local_gradient_stats(stages, stage_gradients(stages), num_stages, loss_sum, loss_count, nonfinite_microbatch);
}

void GradientStats::request_stop(int sig) {
  stop_requests.resize(std::size(launch::kStopSignals), 0.0);
  for (size_t k = 0; k < std::size(launch::kStopSignals); ++k)
    if (launch::kStopSignals[k] == sig) stop_requests[k] = 1.0;
}

int GradientStats::stop_signal() const {
  for (size_t k = 0; k < stop_requests.size() && k < std::size(launch::kStopSignals); ++k)
    if (stop_requests[k] > 0.0) return launch::kStopSignals[k];
  return 0;
}

void reduce_gradient_stats(GradientStats& stats, const std::vector<comm::Communicator*>& groups) {
  const size_t n = stats.sum_squares.size();
  stats.loss_microbatch.resize(n, 0.0);
  stats.stop_requests.resize(std::size(launch::kStopSignals), 0.0);
  for (auto* group : groups) {
    // One stage holds the head, so each loss entry is summed from one rank: the sum is that rank's value.
    std::vector<double> values = stats.sum_squares;
    values.insert(values.end(), stats.loss_nonfinite.begin(), stats.loss_nonfinite.end());
    values.insert(values.end(), stats.loss_microbatch.begin(), stats.loss_microbatch.end());
    values.insert(values.end(), stats.stop_requests.begin(), stats.stop_requests.end());
    values = group->all_reduce_sum(values);
    const auto at = [&](size_t k) { return values.begin() + static_cast<std::ptrdiff_t>(k * n); };
    stats.sum_squares.assign(at(0), at(1));
    stats.loss_nonfinite.assign(at(1), at(2));
    stats.loss_microbatch.assign(at(2), at(3));
    stats.stop_requests.assign(at(3), values.end());
  }
}

void agree_over_replicas(GradientStats& stats, comm::Communicator& data_parallel, int64_t dp_rank,
                         int64_t dp_size) {
  const size_t n = stats.sum_squares.size();
  const auto dp = static_cast<size_t>(dp_size);
  stats.loss_microbatch.resize(n, 0.0);
  // Per stage two flags, per replica one flag and the first microbatch with a non-finite loss (+ 1); then
  // the stop requests (summed: every replica's ranks then agree).
  stats.stop_requests.resize(std::size(launch::kStopSignals), 0.0);
  std::vector<double> flags(2 * n + 2 * dp, 0.0);
  flags.insert(flags.end(), stats.stop_requests.begin(), stats.stop_requests.end());
  for (size_t s = 0; s < n; ++s) {
    flags[s] = std::isfinite(stats.sum_squares[s]) ? 0.0 : 1.0;
    flags[n + s] = stats.loss_nonfinite[s];
  }
  flags[2 * n + static_cast<size_t>(dp_rank)] = stats.finite() ? 0.0 : 1.0;
  for (const double m : stats.loss_microbatch) {  // the loss lives on one stage: at most one is set
    if (m > 0.0) flags[2 * n + dp + static_cast<size_t>(dp_rank)] = m;
  }
  flags = data_parallel.all_reduce_sum(flags);
  const auto requests = flags.begin() + static_cast<std::ptrdiff_t>(2 * n + 2 * dp);
  stats.stop_requests.assign(requests, flags.end());
  const double first = smallest_positive({flags.begin() + static_cast<std::ptrdiff_t>(2 * n + dp), requests});
  for (size_t s = 0; s < n; ++s) {
    if (flags[s] != 0.0 && std::isfinite(stats.sum_squares[s]))
      stats.sum_squares[s] = std::numeric_limits<double>::quiet_NaN();
    stats.loss_nonfinite[s] = flags[n + s] != 0.0 ? 1.0 : 0.0;
    stats.loss_microbatch[s] = stats.loss_nonfinite[s] != 0.0 ? first : 0.0;
  }
  stats.replica_nonfinite.assign(flags.begin() + static_cast<std::ptrdiff_t>(2 * n),
                                 flags.begin() + static_cast<std::ptrdiff_t>(2 * n + dp));
}

void sum_over_shards(GradientStats& stats, comm::Communicator& data_parallel) {
  stats.sum_squares = data_parallel.all_reduce_sum(stats.sum_squares);
}

double clip_coefficient(double norm, double max_norm) {
  return std::min(1.0, max_norm / (norm + 1e-6));
}

void scale_gradients(const std::vector<model::StageModule>& stages, double factor) {
  torch::NoGradGuard no_grad;
  for (const auto& stage : stages) {
    for (auto& p : stage->parameters()) {
      if (p.grad().defined()) p.grad().mul_(factor);
    }
  }
}

}  // namespace ppctl::optim
