// The executor: walks one rank's action list for one step, keeping activations and gradients per
// (stage, microbatch). It has no schedule-specific branches: every schedule is just a Program.
#pragma once

#include <torch/torch.h>

#include <array>
#include <functional>
#include <map>
#include <vector>

#include "comm/communicator.hpp"
#include "model/gpt.hpp"
#include "schedule/action.hpp"

namespace ppctl::runtime {

/// The data one microbatch needs: token ids [micro_batch_size, seq_len] int64 for the first stage,
/// next-token targets of the same shape for the last stage (either may be undefined elsewhere).
struct MicrobatchData {
  torch::Tensor tokens;
  torch::Tensor targets;
};

/// Returns the data of microbatch j of the current step.
using MicrobatchSource = std::function<MicrobatchData(int64_t microbatch)>;

/// What one step produced on this rank.
struct StepResult {
  double loss_sum = 0.0;   ///< sum over this rank's last-stage microbatches of the mean token loss (nats)
  int64_t loss_count = 0;  ///< how many microbatches contributed (0 unless this rank holds the last stage)
  std::array<double, 4> compute_ms{};   ///< wall time spent in F, B, I, W actions (index = ActionKind)
  std::array<int64_t, 4> compute_count{};  ///< how many of each ran
  double receive_wait_ms = 0.0;  ///< time blocked waiting for receives (not counted as compute)
};

/// Runs Programs made by schedule::generate on the stages this rank holds.
/// Split backward (zero-bubble schedules): I computes only d loss / d input, keeping the graph;
/// W later accumulates the weight gradients (autograd restricted to the stage's parameters).
/// Together they equal B exactly, so every schedule meets the same gradient oracle.
class Executor {
 public:
  /// `stages`: the modules of this rank, keyed by stage index (one, or several for virtual stages).
  /// `program`: the whole job's program (for stage_to_rank and geometry).
  /// `activation_shape`: [micro_batch_size, seq_len, hidden] of every tensor crossing stages (float32).
  /// `comm` may be null when every stage is on this rank.
  Executor(std::map<int64_t, model::StageModule> stages, const schedule::Program& program, int rank,
           comm::Communicator* comm, std::vector<int64_t> activation_shape, torch::Device device);

  /// Executes `actions` (this rank's list) for one step; gradients accumulate into the modules'
  /// .grad, each microbatch's loss multiplied by `loss_scale` (1/m for the mean over the batch).
  /// Every receive is waited with the communicator's timeout; all sends are complete on return.
  /// On failure logs this rank's action list with the failing action marked, then rethrows.
  StepResult run_step(const schedule::RankProgram& actions, const MicrobatchSource& data,
                      const model::DropoutContext& dropout, double loss_scale);

 private:
  struct Slot;  // per (stage, microbatch) tensors
  void execute(const schedule::Action& action, const MicrobatchSource& data,
               const model::DropoutContext& dropout, double loss_scale, StepResult& result);
  torch::Tensor take_received(const schedule::Action& consumer, schedule::ActionKind recv_kind);
  /// d loss / d output of (stage, mb) for B and I: from the local next stage, from a receive, or
  /// undefined on the last stage (whose "output" is the scaled loss itself).
  torch::Tensor output_grad(const schedule::Action& action);
  using TensorMap = std::map<std::pair<int64_t, int64_t>, torch::Tensor>;
  /// The stored output and input of (stage, mb) of a backward action; asserts its forward ran.
  struct ForwardState {
    std::pair<int64_t, int64_t> key;
    TensorMap::iterator output;
    TensorMap::iterator input;
  };
  ForwardState forward_state(const schedule::Action& action);
  void backward_full(const schedule::Action& action);
  void backward_input(const schedule::Action& action);
  void backward_weight(const schedule::Action& action);

  std::map<int64_t, model::StageModule> stages_;
  const schedule::Program& program_;
  int rank_;
  comm::Communicator* comm_;
  std::vector<int64_t> activation_shape_;
  torch::Device device_;

  std::map<std::pair<int64_t, int64_t>, torch::Tensor> inputs_;       // stage input (leaf with grad)
  std::map<std::pair<int64_t, int64_t>, torch::Tensor> outputs_;      // stage output or scaled loss
  std::map<std::pair<int64_t, int64_t>, torch::Tensor> input_grads_;  // d loss / d input, to send
  std::map<std::pair<int64_t, int64_t>, torch::Tensor> output_grads_; // kept from I for W (split backward)
  struct PendingRecv {
    comm::PendingOp op;
    torch::Tensor buffer;
  };
  std::map<std::tuple<int, int64_t, int64_t>, PendingRecv> recvs_;  // (kind, stage, mb)
  std::vector<std::pair<comm::PendingOp, torch::Tensor>> sends_;
  double receive_wait_ms_ = 0.0;  // running total of time spent in receive waits
};

}  // namespace ppctl::runtime
