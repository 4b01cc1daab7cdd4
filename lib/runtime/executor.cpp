// Executor: runs one rank's compute and communication actions for one training step.
#include "runtime/executor.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "core/check.hpp"

namespace ppctl::runtime {

using schedule::Action;
using schedule::ActionKind;

Executor::Executor(std::map<int64_t, model::StageModule> stages, const schedule::Program& program,
                   int rank, comm::Communicator* comm, std::vector<int64_t> activation_shape,
                   torch::Device device)
    : stages_(std::move(stages)),
      program_(program),
      rank_(rank),
      comm_(comm),
      activation_shape_(std::move(activation_shape)),
      device_(device) {}

StepResult Executor::run_step(const schedule::RankProgram& actions, const MicrobatchSource& data,
                              const model::DropoutContext& dropout, double loss_scale) {
  StepResult result;
  size_t position = 0;
  try {
    for (; position < actions.size(); ++position) {
      const auto& action = actions[position];
      if (!schedule::is_compute(action.kind)) {
        execute(action, data, dropout, loss_scale, result);
        continue;
      }
      const auto start = std::chrono::steady_clock::now();
      const double waited_before = receive_wait_ms_;
      execute(action, data, dropout, loss_scale, result);
      const double waited = receive_wait_ms_ - waited_before;
      const auto kind = static_cast<size_t>(action.kind);
      result.compute_ms[kind] +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() -
          waited;
      result.compute_count[kind] += 1;
      result.receive_wait_ms += waited;
    }
    for (auto& [op, tensor] : sends_) comm_->wait(op);
  } catch (const std::exception&) {
    std::string row;
    for (size_t i = 0; i < actions.size(); ++i) {
      const auto text = schedule::to_string(actions[i]);
      row += (i == position) ? fmt::format(" [{}]", text) : " " + text;
    }
    if (position == actions.size()) row += " [end: waiting for sends]";
    spdlog::error("step {} failed at action {} of {}; this rank's actions:{}", dropout.step,
                  position, actions.size(), row);
    sends_.clear();
    recvs_.clear();
    inputs_.clear();
    outputs_.clear();
    input_grads_.clear();
    output_grads_.clear();
    throw;
  }
  sends_.clear();
  PPCTL_ASSERT(recvs_.empty(), "receives posted but never consumed in this step");
  PPCTL_ASSERT(outputs_.empty() && inputs_.empty() && input_grads_.empty() && output_grads_.empty(),
               "activations or gradients left over at the end of the step");
  return result;
}

torch::Tensor Executor::take_received(const Action& consumer, ActionKind recv_kind) {
  auto it = recvs_.find({static_cast<int>(recv_kind), consumer.stage, consumer.microbatch});
  PPCTL_ASSERT(it != recvs_.end(),
               fmt::format("{} needs a posted receive", schedule::to_string(consumer)));
  const auto start = std::chrono::steady_clock::now();
  comm_->wait(it->second.op);
  receive_wait_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  auto tensor = std::move(it->second.buffer);
  recvs_.erase(it);
  return tensor;
}

void Executor::execute(const Action& action, const MicrobatchSource& data,
                       const model::DropoutContext& dropout, double loss_scale, StepResult& result) {
  const auto key = std::make_pair(action.stage, action.microbatch);
  const int64_t last_stage = program_.num_stages - 1;
  const auto rank_of = [&](int64_t stage) {
    return static_cast<int>(program_.stage_to_rank.at(static_cast<size_t>(stage)));
  };
  const auto tag = [&] { return schedule::message_tag(action, program_.num_microbatches); };
  const auto text = schedule::to_string(action);

  switch (action.kind) {
    case ActionKind::RECV_F:
    case ActionKind::RECV_B: {
      const bool forward = action.kind == ActionKind::RECV_F;
      const int peer = rank_of(action.stage + (forward ? -1 : 1));
      auto buffer = torch::empty(activation_shape_, torch::dtype(torch::kFloat).device(device_));
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
      auto tensor = forward ? it->second.detach().contiguous() : it->second.contiguous();
      if (!forward) input_grads_.erase(it);
      const int peer = rank_of(action.stage + (forward ? 1 : -1));
      auto op = comm_->isend(tensor, peer, tag(),
                             fmt::format("send of {} {}", text, forward ? "activation" : "gradient"));
      sends_.emplace_back(std::move(op), std::move(tensor));
      return;
    }
    case ActionKind::F: {
      auto& stage = stages_.at(action.stage);
      torch::Tensor input;
      if (action.stage == 0) {
        input = data(action.microbatch).tokens.to(device_);
      } else if (rank_of(action.stage - 1) == rank_) {
        auto prev = outputs_.find({action.stage - 1, action.microbatch});
        PPCTL_ASSERT(prev != outputs_.end(), fmt::format("{} before its previous stage", text));
        input = prev->second.detach().requires_grad_(true);
      } else {
        input = take_received(action, ActionKind::RECV_F).requires_grad_(true);
      }
      model::DropoutContext ctx = dropout;
      ctx.microbatch = action.microbatch;
      auto output = stage->forward(input, ctx);
      if (action.stage == last_stage) {
        auto targets = data(action.microbatch).targets.to(device_);
        auto loss = stage->loss(output, targets);
        result.loss_sum += loss.item<double>();
        result.loss_count += 1;
        output = loss * loss_scale;
      }
      inputs_[key] = input;
      outputs_[key] = output;
      return;
    }
    case ActionKind::B:
      backward_full(action);
      return;
    case ActionKind::I:
      backward_input(action);
      return;
    case ActionKind::W:
      backward_weight(action);
      return;
  }
}

torch::Tensor Executor::output_grad(const Action& action) {
  const auto text = schedule::to_string(action);
  if (action.stage == program_.num_stages - 1) return {};
  if (program_.stage_to_rank.at(static_cast<size_t>(action.stage + 1)) == rank_) {
    auto next = input_grads_.find({action.stage + 1, action.microbatch});
    PPCTL_ASSERT(next != input_grads_.end(), fmt::format("{} before the next stage's backward", text));
    auto grad = next->second;
    input_grads_.erase(next);
    return grad;
  }
  return take_received(action, ActionKind::RECV_B);
}

namespace {

/// Gradients to seed autograd with: none for the last stage's scalar loss (implicitly 1).
std::vector<torch::Tensor> seed_gradients(const torch::Tensor& grad) {
  return grad.defined() ? std::vector<torch::Tensor>{grad} : std::vector<torch::Tensor>{};
}

}  // namespace

Executor::ForwardState Executor::forward_state(const Action& action) {
  const auto key = std::make_pair(action.stage, action.microbatch);
  auto out = outputs_.find(key);
  auto in = inputs_.find(key);
  PPCTL_ASSERT(out != outputs_.end() && in != inputs_.end(),
               fmt::format("{} before its forward", schedule::to_string(action)));
  return {key, out, in};
}

void Executor::backward_full(const Action& action) {
  const auto state = forward_state(action);
  torch::autograd::backward({state.output->second}, seed_gradients(output_grad(action)));
  if (action.stage > 0) input_grads_[state.key] = state.input->second.grad();
  outputs_.erase(state.output);
  inputs_.erase(state.input);
}

void Executor::backward_input(const Action& action) {
  const auto state = forward_state(action);
  const auto grad = output_grad(action);
  if (action.stage > 0) {
    // Only d loss / d input; the graph stays for W. Parameters' .grad are untouched.
    input_grads_[state.key] = torch::autograd::grad({state.output->second}, {state.input->second},
                                                    seed_gradients(grad), /*retain_graph=*/true)[0];
  }
  output_grads_[state.key] = grad;
  inputs_.erase(state.input);
}

void Executor::backward_weight(const Action& action) {
  const auto key = std::make_pair(action.stage, action.microbatch);
  auto out = outputs_.find(key);
  auto grad = output_grads_.find(key);
  PPCTL_ASSERT(out != outputs_.end() && grad != output_grads_.end(),
               fmt::format("{} before its I", schedule::to_string(action)));
  const auto params = stages_.at(action.stage)->parameters();
  torch::autograd::backward({out->second}, seed_gradients(grad->second), /*retain_graph=*/false,
                            /*create_graph=*/false, params);
  outputs_.erase(out);
  output_grads_.erase(grad);
}

}  // namespace ppctl::runtime
