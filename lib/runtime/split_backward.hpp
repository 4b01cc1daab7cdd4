// Split backward of one graph into I (input gradient) and W (weight gradients) without running the
// activation chain twice.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace ppctl::runtime {

/// The two halves of the backward of one forward graph, as the zero-bubble schedules run them:
/// I (`input_backward`) computes d loss / d input only, W (`weight_backward`, later) the weight
/// gradients, and together they cost about what one full backward costs.
///
/// How (Zero Bubble, arXiv 2401.10241 §2: B = the input-gradient products, W = the weight-gradient
/// products; the same cut as torch.distributed.pipelining's `stage_backward_input` /
/// `stage_backward_weight`): in the autograd graph from `output` down to its leaves, the *weight side*
/// is every node that cannot reach the input. A *crossing* is a node that reaches the input and has
/// an edge into the weight side. A crossing whose weight side holds a matrix (a linear: one operand
/// an activation, the other a weight) is deferred to W; the others (a norm's scale and shift, a
/// bias added on its own: elementwise work) have their weight gradients accumulated within I. During
/// I a pre-hook keeps the gradient that arrives at each deferred crossing, which then computes only
/// its activation-side outputs. W re-enters each deferred crossing with the kept gradient, asks it
/// only for the outputs on its weight-side edges (the weight-gradient products), and runs the weight
/// side once from those edges into the parameters' `.grad`. Nothing above the crossings runs again.
/// (Should a leaf be reached both from a deferred crossing and from another one, every crossing is
/// deferred, so that no gradient is accumulated twice.)
///
/// Memory between I and W: I cuts the deferred crossings off the input side and releases what every
/// other node saved, so what stays is each deferred crossing with what it saved (for a linear, its
/// input and weight), the gradient kept at it, and the weight side (casts, transposes). The activations that only the input
/// gradient needed (GELU or softmax inputs, attention probabilities) are freed at I. A graph whose
/// input does not require a gradient (token ids on the first stage) has no I: `input_backward`
/// returns an undefined tensor, keeps the whole graph, and W is the full backward.
class SplitBackward {
 public:
  /// Runs I on the graph of `output` (any shape) seeded with `output_grad` (its shape), towards
  /// `input`, a leaf of the graph (any shape; it may not require a gradient). Returns d loss / d input
  /// (the shape of `input`), undefined when `input` does not require a gradient. Accumulates into the
  /// `.grad` of the leaves of the crossings not deferred (norm scales and shifts); matrices and the
  /// biases of their products wait for W. Throws c10::Error from autograd (e.g. a graph already
  /// released).
  static std::pair<torch::Tensor, SplitBackward> input_backward(const torch::Tensor& output,
                                                                const torch::Tensor& output_grad,
                                                                const torch::Tensor& input);

  /// Runs W once: accumulates the weight gradients of the graph into the leaves' `.grad` (as a full
  /// backward would, given the same output gradient) and releases what I kept.
  void weight_backward();

  /// The crossings I deferred to W (0 without I): for tests and traces.
  [[nodiscard]] size_t crossings() const { return crossings_.size(); }

 private:
  struct Crossing;
  std::vector<std::shared_ptr<Crossing>> crossings_;
  torch::Tensor output_;       // without I: the graph, kept whole until W ...
  torch::Tensor output_grad_;  // ... and its output gradient
};

}  // namespace ppctl::runtime
