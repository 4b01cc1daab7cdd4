// Executor: runs one rank's compute and communication actions for one training step, keeping for
// each backward what the recomputation policy says and rebuilding the rest.
#include "runtime/executor.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>

#include "core/check.hpp"

namespace ppctl::runtime {

using schedule::Action;
using schedule::ActionKind;

namespace {

/// CPU time the calling thread has used so far, ms.
double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return 1e3 * static_cast<double>(now.tv_sec) + 1e-6 * static_cast<double>(now.tv_nsec);
}

}  // namespace

Executor::Executor(std::map<int64_t, model::StageModule> stages, const schedule::Program& program,
                   int rank, comm::Communicator* comm, std::vector<int64_t> activation_shape,
                   torch::Device device, RecomputePolicy recompute, torch::Dtype p2p_dtype)
    : stages_(std::move(stages)),
      program_(program),
      rank_(rank),
      comm_(comm),
      activation_shape_(std::move(activation_shape)),
      device_(device),
      recompute_(recompute),
      p2p_dtype_(p2p_dtype),
      memory_(device) {
  for (const auto& [index, stage] : stages_) {
    segment_starts_[index] = recompute_.mode == config::Recompute::Blocks
                                 ? stage->segment_starts(recompute_.every)
                                 : std::vector<int64_t>{0};
  }
}

double step_loss(const StepResult& result) {
  return result.loss_count > 0 ? result.loss_sum / static_cast<double>(result.loss_count) : 0.0;
}

torch::Dtype p2p_torch_dtype(const config::RuntimeSpec& runtime) {
  return config::p2p_dtype_of(runtime) == config::P2pDtype::Bf16 ? torch::kBFloat16 : torch::kFloat;
}

StepResult Executor::run_step(const schedule::RankProgram& actions, const MicrobatchSource& data,
                              const model::DropoutContext& dropout, double loss_scale) {
  StepResult result;
  memory_.reset_peak();
  const int64_t start_bytes = memory_.read().live;
  const int64_t start_gradient_bytes = gradient_bytes();
  size_t position = 0;
  if (release_points_of_ != std::pair{actions.data(), actions.size()}) {
    const auto forward_kind = [](const Action& a) {
      return a.kind == ActionKind::F || a.kind == ActionKind::SEND_F || a.kind == ActionKind::RECV_F;
    };
    release_points_ = schedule::send_release_points(program_, rank_, actions,
                                                    forward_only_ ? +forward_kind : nullptr);
    release_points_of_ = {actions.data(), actions.size()};
  }
  step_ = dropout.step;
  tracing_ = !forward_only_ && trace_ != nullptr && trace_->active(step_);  // eval is not traced
  const auto step_start = std::chrono::steady_clock::now();
  try {
    for (; position < actions.size(); ++position) {
      const auto& action = actions[position];
      if (progress_ != nullptr) progress_->store(static_cast<int64_t>(position), std::memory_order_relaxed);
      const auto start = std::chrono::steady_clock::now();
      const bool compute = schedule::is_compute(action.kind);
      const double cpu_start = compute ? thread_cpu_ms() : 0.0;
      const double waited_before = receive_wait_ms_;
      const double gathered_before = gather_wait_ms_;
      position_ = position;
      execute(action, data, dropout, loss_scale, result);
      release_completed_sends(position);
      if (reduction_ != nullptr && !forward_only_) reduction_->poll();
      result.live_sends = std::max(result.live_sends, static_cast<int64_t>(sends_.size()));
      result.in_flight = std::max(result.in_flight, static_cast<int64_t>(slots_.size()));
      const int64_t held = memory_.read().live - start_bytes;
      result.held_bytes = std::max(result.held_bytes, held);
      result.kept_bytes =
          std::max(result.kept_bytes,
                   held - communication_bytes() - (gradient_bytes() - start_gradient_bytes));
      if (!compute) {
        if (tracing_ && action.kind != ActionKind::REDUCE_GRAD) {  // that one's span is traced at the end
          trace_->add(TraceRecorder::Kind::Post, step_, action, start, std::chrono::steady_clock::now());
        }
        continue;
      }
      const auto end = std::chrono::steady_clock::now();
      const double waited = receive_wait_ms_ - waited_before;
      const double gathered = gather_wait_ms_ - gathered_before;
      const auto kind = static_cast<size_t>(action.kind);
      result.compute_ms[kind] +=
          std::chrono::duration<double, std::milli>(end - start).count() - waited - gathered;
      result.compute_cpu_ms[kind] += thread_cpu_ms() - cpu_start;
      result.compute_count[kind] += 1;
      result.receive_wait_ms += waited;
      result.gather_wait_ms += gathered;
      if (tracing_) {
        trace_->add(TraceRecorder::Kind::Compute, step_, action, waited > 0 || gathered > 0 ? last_wait_end_ : start,
                    end);
      }
    }
    const auto sends_start = std::chrono::steady_clock::now();
    for (auto& send : sends_) comm_->wait(send.op);
    const auto sends_end = std::chrono::steady_clock::now();
    if (tracing_ && !sends_.empty()) {
      trace_->add(TraceRecorder::Kind::Wait, step_, {}, sends_start, sends_end, "wait sends");
    }
    sends_.clear();
    if (reduction_ != nullptr && !forward_only_) {
      reduction_->finish();
      const auto reduced = std::chrono::steady_clock::now();
      result.reduce_wait_ms = std::chrono::duration<double, std::milli>(reduced - sends_end).count();
      if (tracing_) {
        trace_->add(TraceRecorder::Kind::Wait, step_, {}, sends_end, reduced, "wait gradient reduction");
        for (const auto& span : reduction_->spans()) {
          trace_->add(TraceRecorder::Kind::Collective, step_, {ActionKind::REDUCE_GRAD, span.stage, 0}, span.start,
                      span.end);
        }
      }
    }
    if (tracing_) trace_->add(TraceRecorder::Kind::Step, step_, {}, step_start, std::chrono::steady_clock::now());
  } catch (const std::exception&) {
    std::string row;
    for (size_t i = 0; i < actions.size(); ++i) {
      const auto text = schedule::to_string(actions[i]);
      row += (i == position) ? fmt::format(" [{}]", text) : " " + text;
    }
    if (position == actions.size()) row += " [end: waiting for sends and the gradient reduction]";
    spdlog::error("step {} failed at action {} of {}; this rank's actions:{}", dropout.step + 1,
                  position, actions.size(), row);
    sends_.clear();
    recvs_.clear();
    losses_.clear();
    slots_.clear();
    outputs_.clear();
    input_grads_.clear();
    throw;
  }
  collect_losses(result);
  PPCTL_ASSERT(recvs_.empty(), "receives posted but never consumed in this step");
  PPCTL_ASSERT(slots_.empty() && outputs_.empty() && input_grads_.empty(),
               "activations or gradients left over at the end of the step");
  result.peak_bytes = memory_.read().peak - start_bytes;
  if (forward_only_) return result;
  max_memory_.kept_bytes = std::max(max_memory_.kept_bytes, result.kept_bytes);
  max_memory_.held_bytes = std::max(max_memory_.held_bytes, result.held_bytes);
  max_memory_.peak_bytes = std::max(max_memory_.peak_bytes, result.peak_bytes);
  max_memory_.live_sends = std::max(max_memory_.live_sends, result.live_sends);
  max_memory_.in_flight = std::max(max_memory_.in_flight, result.in_flight);
  return result;
}

void Executor::collect_losses(StepResult& result) {
  if (losses_.empty()) return;
  std::vector<torch::Tensor> values;
  for (const auto& entry : losses_) values.push_back(entry.second);
  const auto host = torch::stack(values).to(torch::kCPU, torch::kDouble);  // the step's one synchronisation
  const auto* sums = host.data_ptr<double>();
  for (size_t i = 0; i < losses_.size(); ++i) {
    if (!std::isfinite(sums[i]) && result.first_nonfinite_microbatch < 0) {
      result.first_nonfinite_microbatch = losses_[i].first;
    }
    result.loss_sum += sums[i];
  }
  losses_.clear();
}

StepResult Executor::run_forward_only(const schedule::RankProgram& actions,
                                      const MicrobatchSource& data) {
  schedule::RankProgram forward;
  for (const auto& action : actions) {
    if (action.kind == ActionKind::F || action.kind == ActionKind::SEND_F ||
        action.kind == ActionKind::RECV_F) {
      forward.push_back(action);
    }
  }
  torch::NoGradGuard no_grad;
  forward_only_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{forward_only_};
  return run_step(forward, data, model::DropoutContext{false, 0, 0, 0}, 1.0);
}

std::string Executor::memory_report() const {
  const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  auto mode = config::to_string(recompute_.mode);
  if (recompute_.mode == config::Recompute::Blocks) {
    mode += fmt::format(" every {}", recompute_.every);
  }
  return fmt::format(
      "recompute {}: kept for backward up to {:.1f} MiB; tensors held between actions up to {:.1f} "
      "MiB, peak {:.1f} MiB above the step's start; at most {} send(s) in flight; at most {} microbatch(es) in "
      "flight (forward run, backward not finished)",
      mode, mib(max_memory_.kept_bytes), mib(max_memory_.held_bytes), mib(max_memory_.peak_bytes),
      max_memory_.live_sends, max_memory_.in_flight);
}

int64_t Executor::communication_bytes() const {
  int64_t bytes = 0;
  for (const auto& send : sends_) bytes += static_cast<int64_t>(send.buffer.nbytes());
  for (const auto& [key, recv] : recvs_) bytes += static_cast<int64_t>(recv.buffer.nbytes());
  return bytes;
}

int64_t Executor::gradient_bytes() const {
  int64_t bytes = 0;
  for (const auto& [index, stage] : stages_) {
    for (const auto& param : stage->parameters()) {
      if (param.grad().defined()) bytes += static_cast<int64_t>(param.grad().nbytes());
    }
  }
  return bytes;
}

void Executor::release_completed_sends(size_t position) {
  const auto& received = release_points_.at(position);
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(),
                              [&](const PendingSend& send) {
                                if (std::find(received.begin(), received.end(), send.position) != received.end()) {
                                  comm_->wait(send.op);  // the peer has it: completes at once
                                  return true;
                                }
                                return comm_->poll(send.op);
                              }),
               sends_.end());
}

void Executor::release_sent_output(const Key& key) {
  auto slot = slots_.find(key);
  if (slot == slots_.end() || slot->second.segments.empty()) return;  // forward only: no slot
  auto& output = slot->second.segments.back().output;
  if (!output.defined()) return;  // recomputed: F kept no graph, nor its output
  // The root's data is replaced by an empty tensor; its grad_fn and the shape autograd recorded
  // for it stay, so the backward seeded with the received gradient runs as before.
  output.set_data(torch::empty({0}, output.options()));
}

int Executor::rank_of(int64_t stage) const {
  return static_cast<int>(program_.stage_to_rank.at(static_cast<size_t>(stage)));
}

torch::Tensor Executor::take_received(const Action& consumer, ActionKind recv_kind) {
  auto it = recvs_.find({static_cast<int>(recv_kind), consumer.stage, consumer.microbatch});
  PPCTL_ASSERT(it != recvs_.end(),
               fmt::format("{} needs a posted receive", schedule::to_string(consumer)));
  const auto start = std::chrono::steady_clock::now();
  comm_->wait(it->second.op);
  last_wait_end_ = std::chrono::steady_clock::now();
  receive_wait_ms_ += std::chrono::duration<double, std::milli>(last_wait_end_ - start).count();
  if (tracing_) {
    trace_->add(TraceRecorder::Kind::Wait, step_, {recv_kind, consumer.stage, consumer.microbatch},
                start, last_wait_end_);
  }
  auto tensor = std::move(it->second.buffer);
  recvs_.erase(it);
  return tensor.to(torch::kFloat);  // bf16 on the wire: back to the stage's float32 (no-op otherwise)
}

void Executor::execute(const Action& action, const MicrobatchSource& data,
                       const model::DropoutContext& dropout, double loss_scale, StepResult& result) {
  const auto key = Key{action.stage, action.microbatch};
  const auto tag = [&] { return schedule::message_tag(action, program_.num_microbatches); };
  const auto text = schedule::to_string(action);

  switch (action.kind) {
    case ActionKind::RECV_F:
    case ActionKind::RECV_B: {
      const bool forward = action.kind == ActionKind::RECV_F;
      const int peer = rank_of(action.stage + (forward ? -1 : 1));
      auto buffer = torch::empty(activation_shape_, torch::dtype(p2p_dtype_).device(device_));
      auto op = comm_->irecv(buffer, peer, tag(),
                             fmt::format("receive of {} {}", text, forward ? "activation" : "gradient"));
      recvs_[{static_cast<int>(action.kind), action.stage, action.microbatch}] = {std::move(op),
                                                                                  std::move(buffer)};
      return;
    }
    case ActionKind::SEND_F:
    case ActionKind::SEND_B: {
      const bool forward = action.kind == ActionKind::SEND_F;
      auto& store = forward ? outputs_ : input_grads_;
      auto it = store.find(key);
      PPCTL_ASSERT(it != store.end(), fmt::format("{} has nothing to send", text));
      PPCTL_ASSERT(it->second.scalar_type() == torch::kFloat,
                   fmt::format("{} sends a {} tensor; stages hand on float32", text,
                               c10::toString(it->second.scalar_type())));
      // The float32 tensor itself, or (bf16 on the wire) its bf16 copy; the receiver casts it back.
      auto tensor = it->second.detach().to(p2p_dtype_).contiguous();
      store.erase(it);
      result.sent_bytes += static_cast<int64_t>(tensor.nbytes());
      const int peer = rank_of(action.stage + (forward ? 1 : -1));
      auto op = comm_->isend(tensor, peer, tag(),
                             fmt::format("send of {} {}", text, forward ? "activation" : "gradient"));
      sends_.push_back({position_, std::move(op), std::move(tensor)});
      if (forward) release_sent_output(key);
      return;
    }
    case ActionKind::REDUCE_GRAD:
      if (reduction_ != nullptr && !forward_only_) reduction_->start(action.stage);
      return;
    case ActionKind::F:
      forward(action, data, dropout, loss_scale, result);
      return;
    case ActionKind::B:
      backward(action, /*split=*/false);
      return;
    case ActionKind::I:
      backward(action, /*split=*/true);
      return;
    case ActionKind::W:
      backward_weight(action);
      return;
  }
}

void Executor::forward(const Action& action, const MicrobatchSource& data,
                       const model::DropoutContext& dropout, double loss_scale,
                       StepResult& result) {
  const auto key = Key{action.stage, action.microbatch};
  // Without recomputation the input is a leaf of the graph F builds; with it, the backward makes
  // its own leaf from the kept input.
  const bool keep_graph = recompute_.mode == config::Recompute::None;
  const bool last = action.stage == program_.num_stages - 1;
  // Every stage reads the microbatch: the first its token ids, the last its targets, all of them the positions
  // and documents of packed data (attention must stay within a conversation on every stage).
  const auto batch = data(action.microbatch);
  torch::Tensor input;
  if (action.stage == 0) {
    PPCTL_ASSERT(batch.tokens.defined(), fmt::format("{} without token ids", schedule::to_string(action)));
    input = batch.tokens.to(device_);
  } else if (rank_of(action.stage - 1) == rank_) {
    auto prev = outputs_.find({action.stage - 1, action.microbatch});
    PPCTL_ASSERT(prev != outputs_.end(),
                 fmt::format("{} before its previous stage", schedule::to_string(action)));
    input = prev->second.detach().requires_grad_(keep_graph);
    outputs_.erase(prev);
  } else {
    input = take_received(action, ActionKind::RECV_F).requires_grad_(keep_graph);
  }

  Slot slot;
  slot.stage = action.stage;
  model::DropoutContext microbatch_dropout = dropout;
  microbatch_dropout.microbatch += action.microbatch;  // the step's base (replica offset) + microbatch
  const auto on_device = [&](const torch::Tensor& t) { return t.defined() ? t.to(device_) : t; };
  slot.context = stages_.at(action.stage)->context(microbatch_dropout, batch.positions, batch.documents, device_);
  slot.loss_scale = loss_scale;
  int64_t targets = 0;
  if (last) {
    PPCTL_ASSERT(batch.targets.defined(), fmt::format("{} without targets", schedule::to_string(action)));
    slot.targets = batch.targets.to(device_);
    slot.target_mask = on_device(batch.target_mask);
    // counted on the CPU, before the copy: no device synchronisation
    targets = batch.target_mask.defined() ? static_cast<int64_t>(batch.target_mask.sum().item<double>())
                                          : batch.targets.numel();
  }

  if (gather_ != nullptr) {  // this step's weights, after the input's wait
    const auto start = std::chrono::steady_clock::now();
    const bool in_flight = gather_->ready(action.stage);
    const auto end = std::chrono::steady_clock::now();
    const double waited = std::chrono::duration<double, std::milli>(end - start).count();
    // Counted and traced only when an all-gather was in flight: a call that only looked is no wait, however
    // long a loaded machine made it (a threshold on its duration was: it counted preemptions as waits).
    if (in_flight) {
      last_wait_end_ = end;
      gather_wait_ms_ += waited;
      if (tracing_) trace_->add(TraceRecorder::Kind::Wait, step_, action, start, end, "wait parameter all-gather");
    }
  }

  std::optional<torch::NoGradGuard> no_grad;
  if (!keep_graph) no_grad.emplace();
  const auto& starts = segment_starts_.at(action.stage);
  const int64_t parts = stages_.at(action.stage)->num_parts();
  torch::Tensor x = input;
  torch::Tensor loss;
  for (size_t j = 0; j < starts.size(); ++j) {
    Segment segment{starts[j], j + 1 < starts.size() ? starts[j + 1] : parts, x, {}};
    x = run_segment(slot, segment.begin, segment.end, x, &loss);
    if (keep_graph) segment.output = x;
    slot.segments.push_back(std::move(segment));
  }
  if (last) {
    losses_.emplace_back(action.microbatch, loss);
    result.loss_count += targets;
    result.loss_microbatches += 1;
  } else {
    outputs_[key] = x;
  }
  if (!forward_only_) slots_[key] = std::move(slot);
}

torch::Tensor Executor::run_segment(const Slot& slot, int64_t begin, int64_t end,
                                    const torch::Tensor& x, torch::Tensor* loss) {
  auto& stage = stages_.at(slot.stage);
  auto y = stage->forward_parts(x, begin, end, slot.context);
  if (!stage->has_head() || end < stage->num_parts()) return y;
  auto value = stage->loss_sum(y, slot.targets, slot.target_mask);
  if (loss != nullptr) *loss = value.detach();
  return value * slot.loss_scale;
}

torch::Tensor Executor::output_grad(const Action& action) {
  const auto text = schedule::to_string(action);
  if (action.stage == program_.num_stages - 1) return {};
  if (rank_of(action.stage + 1) == rank_) {
    auto next = input_grads_.find({action.stage + 1, action.microbatch});
    PPCTL_ASSERT(next != input_grads_.end(), fmt::format("{} before the next stage's backward", text));
    auto grad = next->second;
    input_grads_.erase(next);
    return grad;
  }
  return take_received(action, ActionKind::RECV_B);
}

std::map<Executor::Key, Executor::Slot>::iterator Executor::find_slot(const Action& action,
                                                                      bool after_input_backward) {
  auto it = slots_.find({action.stage, action.microbatch});
  const bool ready = it != slots_.end() && it->second.segments.empty() == after_input_backward;
  PPCTL_ASSERT(ready, fmt::format("{} before its {}", schedule::to_string(action),
                                  after_input_backward ? "I" : "forward"));
  return it;
}

void Executor::backward(const Action& action, bool split) {
  auto it = find_slot(action, /*after_input_backward=*/false);
  auto& slot = it->second;
  auto grad = output_grad(action);  // d loss / d output of the segment at hand, last to first
  for (auto segment = slot.segments.rbegin(); segment != slot.segments.rend(); ++segment) {
    const bool wants_input_grad = segment->begin > 0 || action.stage > 0;  // not of token ids
    auto x = segment->input;
    auto y = segment->output;
    if (!y.defined()) {  // recompute the segment's graph from its kept input
      x = x.detach().requires_grad_(wants_input_grad);
      y = run_segment(slot, segment->begin, segment->end, x, nullptr);
    }
    *segment = {};  // from here the graph lives in x and y only
    // The last stage's last segment ends in the scaled loss: seed it with 1.
    if (!grad.defined()) grad = torch::ones_like(y);
    torch::Tensor input_grad;
    if (split) {
      // Only d loss / d input; the graph stays for W. Parameters' .grad are untouched.
      auto [into_input, weight_half] = SplitBackward::input_backward(y, grad, x);
      input_grad = std::move(into_input);
      slot.weight_halves.push_back(std::move(weight_half));
    } else {
      torch::autograd::backward({y}, {grad});
      if (wants_input_grad) input_grad = x.grad();
    }
    grad = input_grad;
  }
  slot.segments.clear();
  if (action.stage > 0) input_grads_[it->first] = grad;
  if (!split) slots_.erase(it);
}

void Executor::backward_weight(const Action& action) {
  auto it = find_slot(action, /*after_input_backward=*/true);
  for (auto& weight_half : it->second.weight_halves) weight_half.weight_backward();
  slots_.erase(it);
}

}  // namespace ppctl::runtime
