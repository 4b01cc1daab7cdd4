// The executor: walks one rank's action list for one step, keeping activations and gradients per
// (stage, microbatch). It has no schedule-specific branches: every schedule is just a Program.
#pragma once

#include <torch/torch.h>

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "config/job_spec.hpp"
#include "model/stage.hpp"
#include "runtime/grad_reduction.hpp"
#include "runtime/param_gather.hpp"
#include "runtime/memory.hpp"
#include "runtime/split_backward.hpp"
#include "runtime/trace.hpp"
#include "schedule/action.hpp"
#include "schedule/memory_plan.hpp"

namespace ppctl::runtime {

/// The data one microbatch needs, on the CPU: token ids [micro_batch_size, seq_len] int64 for the first stage,
/// next-token targets of the same shape for the last stage (either may be undefined elsewhere). Packed
/// conversations (a chat dataset) add, for every stage, `positions` and `documents` ([mbs, seq_len] int64: each
/// token's position in its conversation, and which conversation of the window it belongs to; padding -1), and
/// for the last stage `target_mask` ([mbs, seq_len] fp32, 1 where the prediction is a target of the loss);
/// undefined: positions 0 .. seq_len - 1, causal attention over the whole window, every token a target.
struct MicrobatchData {
  torch::Tensor tokens;
  torch::Tensor targets;
  torch::Tensor target_mask;
  torch::Tensor positions;
  torch::Tensor documents;
};

/// Returns the data of microbatch j of the current step: every stage asks for it (middle stages need the
/// positions and documents of packed data); a rank without data returns an empty MicrobatchData.
using MicrobatchSource = std::function<MicrobatchData(int64_t microbatch)>;

/// What one step produced on this rank.
struct StepResult {
  double loss_sum = 0.0;   ///< sum of the token losses (nats) of this rank's last-stage microbatches' targets
  int64_t loss_count = 0;  ///< their target tokens: the step's loss is loss_sum / loss_count (summed over replicas)
  int64_t loss_microbatches = 0;  ///< last-stage microbatches run (0 unless this rank holds the last stage)
  int64_t first_nonfinite_microbatch = -1;  ///< the first microbatch (0..m-1, this replica's) whose loss was NaN or
                                            ///< infinite, in schedule order; -1 when none (or not the last stage)
  std::array<double, 4> compute_ms{};   ///< wall time spent in F, B, I, W actions (index = ActionKind)
  std::array<int64_t, 4> compute_count{};  ///< how many of each ran
  /// CPU time of the thread that runs the schedule during F, B, I, W actions, ms (CLOCK_THREAD_CPUTIME_ID).
  /// Below compute_ms when that thread waited for a core (more workers x threads than cores), so it
  /// gives an action's cost without the sharing. With runtime.threads_per_worker 1 (LibTorch's CPU
  /// kernels and autograd run on this thread) that is the action's whole cost; with more, the
  /// intra-op threads' share is not in it. On CUDA it is only the host's time to launch the kernels.
  std::array<double, 4> compute_cpu_ms{};
  double receive_wait_ms = 0.0;  ///< time blocked waiting for receives (not counted as compute)
  /// Time forwards waited for the distributed optimizer's parameter all-gather (ParameterGather::ready calls
  /// that found one in flight), ms, not counted as compute: about 0 when the all-gather finished under earlier
  /// work (overlapped), exactly 0 when it was waited for at once (nothing in flight).
  double gather_wait_ms = 0.0;
  /// The most tensor bytes alive between two actions of the step, above those alive when it began:
  /// what forwards keep for their backwards (activations, or only checkpoints with recomputation),
  /// received tensors not yet used, gradients not yet sent, sends in flight and the .grad buffers.
  int64_t held_bytes = 0;
  /// The most of held_bytes between two actions that is neither a communication buffer (sends in
  /// flight, posted receives) nor a .grad buffer: what forwards keep for their backwards.
  int64_t kept_bytes = 0;
  /// The high-water mark of tensor bytes during the step, inside actions too (recomputed graphs,
  /// temporaries), above those alive when it began.
  int64_t peak_bytes = 0;
  /// The most sends in flight (posted, not yet seen complete) between two actions. A send's buffer
  /// is released at the first action boundary after it completes, so this is bounded by the
  /// transfers the peers have not yet taken, not by the number of microbatches.
  int64_t live_sends = 0;
  /// The most (stage, microbatch) pairs held between two actions whose forward ran and whose backward
  /// has not finished with them (B; with split backward, W): what schedule::Simulation::peak_activations
  /// predicts for this rank, and what zb-auto's pipeline.zb_auto.max_in_flight bounds.
  int64_t in_flight = 0;
  /// Time spent after the last action waiting for the gradient reduction (GradientReduction::finish), ms.
  double reduce_wait_ms = 0.0;
  /// Bytes this rank posted for sending to other ranks (SEND_F and SEND_B, in the p2p dtype), as on
  /// the wire; schedule::sent_bytes_per_step is the plan's figure.
  int64_t sent_bytes = 0;
};

/// The per-token loss of `result` (nats): loss_sum / loss_count, 0 when it holds no target token.
double step_loss(const StepResult& result);

/// The element type of tensors sent between ranks for runtime.p2p_dtype (config::p2p_dtype_of):
/// torch::kBFloat16 or torch::kFloat.
torch::Dtype p2p_torch_dtype(const config::RuntimeSpec& runtime);

/// How activations are kept from a stage's forward to its backward (train.recompute and
/// train.recompute_every in the job spec). Every mode gives the same gradients.
/// - None: F builds the autograd graph; it holds every activation until the backward.
/// - Full: F runs without a graph and keeps the stage's input; the backward (B, or I for split
///   backward) runs the forward again with the graph, then differentiates it.
/// - Blocks: F runs without a graph and keeps the input of every segment (the embedding, runs of
///   `every` blocks, the head with the loss; StageModule::segment_starts); the backward recomputes
///   and differentiates one segment at a time, from the last to the first, so at most one
///   segment's graph exists at a time. With split backward, I keeps every segment's graph for W.
struct RecomputePolicy {
  config::Recompute mode = config::Recompute::None;
  int64_t every = 1;  ///< with Blocks: blocks per segment (keep every `every`-th block's input)
};

/// Runs Programs made by schedule::generate on the stages this rank holds.
/// Split backward (zero-bubble schedules): I computes only d loss / d input, keeping the graph;
/// W later accumulates the weight gradients (autograd restricted to the stage's parameters).
/// Together they equal B exactly, so every schedule meets the same gradient oracle.
/// A forward keeps what RecomputePolicy says; the backward actions rebuild what is missing.
class Executor {
 public:
  /// `stages`: the modules of this rank, keyed by stage index (one, or several for virtual stages).
  /// `program`: the whole job's program (for stage_to_rank and geometry).
  /// `activation_shape`: [micro_batch_size, seq_len, hidden] of every tensor crossing stages (float32).
  /// `comm` may be null when every stage is on this rank.
  /// `recompute`: what each forward keeps for its backward.
  /// `p2p_dtype`: the element type on the wire between ranks (p2p_torch_dtype). kBFloat16: a float32
  /// activation or gradient is cast to bf16 right before its send and back to float32 right after
  /// its receive, so stages still see float32 (the residual stream, the stage's input leaf); every
  /// rank of a job must use the same. Hand-offs between stages of this rank are never cast.
  /// Counts tensor memory on `device` (MemoryMeter: on the CPU it installs a counting allocator).
  Executor(std::map<int64_t, model::StageModule> stages, const schedule::Program& program, int rank,
           comm::Communicator* comm, std::vector<int64_t> activation_shape, torch::Device device,
           RecomputePolicy recompute = {}, torch::Dtype p2p_dtype = torch::kFloat);

  /// Executes `actions` (this rank's list) for one step; gradients accumulate into the modules'
  /// .grad, each microbatch's loss sum (StageModuleImpl::loss_sum over its targets) multiplied by `loss_scale`
  /// (data-parallel size / the step's target tokens over every replica, so that the replicas' averaged
  /// gradients are those of the global per-token mean: Megatron-Core's calculate_per_token_loss). The losses stay
  /// on the device until the step's end, where one copy gives loss_sum and the first non-finite microbatch.
  /// Every receive is waited with the communicator's timeout; all sends are complete on return.
  /// Completed sends are released at every action boundary (Communicator::poll). A stage output
  /// whose graph F kept is freed once sent: its storage goes with the send and the graph keeps only
  /// its autograd node (Megatron-LM's deallocate_pipeline_outputs), which is all its backward needs.
  /// REDUCE_GRAD(s) calls the gradient reduction's start(s); after the last action (and the sends)
  /// its finish(), so on return every gradient is reduced. Without a reduction REDUCE_GRAD does nothing.
  /// On failure logs this rank's action list with the failing action marked, then rethrows.
  StepResult run_step(const schedule::RankProgram& actions, const MicrobatchSource& data,
                      const model::DropoutContext& dropout, double loss_scale);

  /// Forward only (evaluation): runs the F, SEND_F and RECV_F actions of `actions` in their order
  /// (the same order as training, so it cannot deadlock where the full list does not: only waits
  /// were removed), without autograd graphs and with dropout off, keeping nothing for a backward.
  /// loss_sum / loss_count are the last stage's unscaled microbatch losses; memory maxima and
  /// .grad are untouched. Throws like run_step.
  StepResult run_forward_only(const schedule::RankProgram& actions, const MicrobatchSource& data);

  /// The largest StepResult::kept_bytes, held_bytes, peak_bytes, live_sends and in_flight of the steps
  /// run so far, and the policy: e.g. "recompute full: kept for backward up to 1.5 MiB; tensors held
  /// between actions up to 9.8 MiB, peak 20.0 MiB above the step's start; at most 2 send(s) in flight;
  /// at most 4 microbatch(es) in flight (forward run, backward not finished)".
  std::string memory_report() const;

  /// Records every action of the steps `trace` is active for (compute slices start when their
  /// receive wait ended; waits, posted sends/receives and the whole step are slices of their own).
  /// Null (the default) records nothing. `trace` must outlive the executor's steps.
  void set_trace(TraceRecorder* trace) { trace_ = trace; }
  /// The data-parallel gradient reduction REDUCE_GRAD actions start and run_step finishes; null
  /// (the default): none. `reduction` must outlive the executor's steps. Forward-only runs skip it.
  void set_gradient_reduction(GradientReduction* reduction) { reduction_ = reduction; }
  /// The distributed optimizer's parameter all-gather, which each F waits for (ready(stage)) once its
  /// input is there; null (the default): parameters are always current. `gather` must outlive the
  /// executor's steps.
  void set_parameter_gather(ParameterGather* gather) { gather_ = gather; }
  /// Optional: run_step stores the index of the action it starts into `*position` (relaxed; read by
  /// comm::ProgressPublisher). Null (the default): nothing is stored.
  void set_progress(std::atomic<int64_t>* position) { progress_ = position; }

 private:
  using Key = std::pair<int64_t, int64_t>;  // (stage, microbatch)
  /// Parts [begin, end) of a stage (StageModule::forward_parts) and what F kept of them.
  struct Segment {
    int64_t begin = 0, end = 0;
    torch::Tensor input;   // a leaf requiring grad when F built the graph (policy None)
    torch::Tensor output;  // the graph's root when F built it, else undefined
  };
  /// What the forward of one (stage, microbatch) left for its backward.
  struct Slot {
    int64_t stage = 0;
    model::MicrobatchContext context;  // with this microbatch's dropout: recomputation draws the same masks
    torch::Tensor targets;             // last stage: the loss's targets
    torch::Tensor target_mask;         // last stage: which of them count (undefined: all)
    double loss_scale = 1.0;
    std::vector<Segment> segments;  // first to last; emptied by the backward
    std::vector<SplitBackward> weight_halves;  // split backward: what I kept for W, per segment
  };
  void execute(const schedule::Action& action, const MicrobatchSource& data,
               const model::DropoutContext& dropout, double loss_scale, StepResult& result);
  torch::Tensor take_received(const schedule::Action& consumer, schedule::ActionKind recv_kind);
  /// d loss / d output of (stage, mb) for B and I: from the local next stage, from a receive, or
  /// undefined on the last stage (whose "output" is the scaled loss itself).
  torch::Tensor output_grad(const schedule::Action& action);
  /// F: runs the stage segment by segment (with or without the graph, as the policy says), keeps
  /// the slot and hands the output on (or, on the last stage, adds the loss to `result`).
  void forward(const schedule::Action& action, const MicrobatchSource& data,
               const model::DropoutContext& dropout, double loss_scale, StepResult& result);
  /// Parts [begin, end) of the slot's stage on `x`; past the head also the loss times the scale.
  /// Sets `*loss` to the unscaled loss sum (detached, on the device) when that was computed and `loss` is not null.
  torch::Tensor run_segment(const Slot& slot, int64_t begin, int64_t end, const torch::Tensor& x,
                            torch::Tensor* loss);
  /// At the step's end: copies losses_ to the host at once, adds them to result.loss_sum and sets
  /// result.first_nonfinite_microbatch (the first in the order they ran); empties losses_.
  void collect_losses(StepResult& result);
  /// B (`split` false) or I (`split` true): segment by segment from the last, rebuilding each
  /// graph the forward did not keep; B differentiates fully, I only towards the inputs and keeps
  /// in the slot what W needs (runtime/split_backward.hpp: the gradients at the crossings).
  void backward(const schedule::Action& action, bool split);
  /// W: the weight gradients of the graphs I kept, from the crossings down (no activation
  /// gradient is computed again).
  void backward_weight(const schedule::Action& action);
  /// The slot of a backward action's (stage, mb). Asserts that the action may run: B and I
  /// (`after_input_backward` false) need a forward not yet differentiated, W an I before it.
  std::map<Key, Slot>::iterator find_slot(const schedule::Action& action,
                                          bool after_input_backward);
  int rank_of(int64_t stage) const;
  /// After the action at `position`: waits for the sends the schedule says are received by now
  /// (schedule::send_release_points: returns at once), then releases those Communicator::poll
  /// reports complete; never waits on a peer that may not have posted its receive.
  void release_completed_sends(size_t position);
  /// After SEND_F(s, j): frees the storage of the output F kept as its graph's root (the send holds
  /// the tensor until it completes); the autograd node stays for the backward.
  void release_sent_output(const Key& key);
  /// Bytes of the tensors in sends_ and recvs_, and of the .grad of this rank's parameters.
  int64_t communication_bytes() const;
  int64_t gradient_bytes() const;

  std::map<int64_t, model::StageModule> stages_;
  const schedule::Program& program_;
  int rank_;
  comm::Communicator* comm_;
  std::vector<int64_t> activation_shape_;
  torch::Device device_;
  RecomputePolicy recompute_;
  torch::Dtype p2p_dtype_;  // on the wire; stages compute in float32
  std::map<int64_t, std::vector<int64_t>> segment_starts_;  // per stage held: see RecomputePolicy

  std::map<Key, Slot> slots_;                 // from F until the last backward action
  std::map<Key, torch::Tensor> outputs_;      // stage outputs to send or hand to the next stage
  std::map<Key, torch::Tensor> input_grads_;  // d loss / d input, to send or hand back
  struct PendingRecv {
    comm::PendingOp op;
    torch::Tensor buffer;
  };
  std::map<std::tuple<int, int64_t, int64_t>, PendingRecv> recvs_;  // (kind, stage, mb)
  struct PendingSend {
    size_t position;  // in the step's action list
    comm::PendingOp op;
    torch::Tensor buffer;
  };
  std::vector<PendingSend> sends_;
  /// schedule::send_release_points of the action list being run (cached by its address and size).
  std::vector<std::vector<size_t>> release_points_;
  std::pair<const schedule::Action*, size_t> release_points_of_{nullptr, 0};
  size_t position_ = 0;  // of the action being run
  double receive_wait_ms_ = 0.0;  // running total of time spent in receive waits
  /// The step's last-stage microbatches' unscaled loss sums, detached, on the device, in the order they ran.
  std::vector<std::pair<int64_t, torch::Tensor>> losses_;
  double gather_wait_ms_ = 0.0;   // running total of time forwards waited for the parameter all-gather
  bool forward_only_ = false;     // inside run_forward_only: F keeps no slot
  TraceRecorder* trace_ = nullptr;
  GradientReduction* reduction_ = nullptr;
  ParameterGather* gather_ = nullptr;
  std::atomic<int64_t>* progress_ = nullptr;
  bool tracing_ = false;  // trace_ records the step being run
  int64_t step_ = 0;      // the step being run (from 0)
  TraceRecorder::Clock::time_point last_wait_end_;  // when the latest receive or all-gather wait ended
  MemoryMeter memory_;
  StepResult max_memory_;  // the largest *_bytes, live_sends and in_flight over the steps run so far
};

}  // namespace ppctl::runtime
