// Split backward: I towards the input with the gradients at the crossings kept, W from the crossings
// into the weights only.
#include "runtime/split_backward.hpp"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <unordered_map>
#include <utility>

namespace ppctl::runtime {

using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;

/// A node on the input side with edges into the weight side.
struct SplitBackward::Crossing {
  std::shared_ptr<Node> node;
  std::vector<size_t> input_side_edges;  // indices into node->next_edges() that lead to the input
  // The gradients that reached the node during I (shared with its pre-hook, which the graph owns).
  std::shared_ptr<variable_list> kept = std::make_shared<variable_list>();
};

namespace {

/// Keeps the gradients that arrive at a node the first time it runs (I); later runs (W) leave them.
class KeepArrivingGradients final : public torch::autograd::FunctionPreHook {
 public:
  explicit KeepArrivingGradients(std::shared_ptr<variable_list> into) : into_(std::move(into)) {}
  variable_list operator()(const variable_list& grads) override {
    if (into_->empty()) into_->assign(grads.begin(), grads.end());
    return grads;
  }

 private:
  std::shared_ptr<variable_list> into_;
};

/// For every node reachable from `root` (through next edges, towards the leaves): whether it reaches
/// `input_node`. Iterative post-order walk (graphs are thousands of nodes deep with long stages).
std::unordered_map<Node*, bool> reaches_input(Node* root, const Node* input_node) {
  std::unordered_map<Node*, bool> reaches;
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    Node* node = stack.back().first;
    const size_t next = stack.back().second;
    if (next < node->num_outputs()) {
      ++stack.back().second;
      Node* child = node->next_edge(next).function.get();
      if (child != nullptr && reaches.find(child) == reaches.end()) stack.emplace_back(child, 0);
      continue;
    }
    bool found = node == input_node;
    for (const auto& edge : node->next_edges()) {
      if (edge.function && reaches.at(edge.function.get())) {
        found = true;
        break;
      }
    }
    reaches[node] = found;
    stack.pop_back();
  }
  return reaches;
}

}  // namespace

std::pair<torch::Tensor, SplitBackward> SplitBackward::input_backward(const torch::Tensor& output,
                                                                      const torch::Tensor& output_grad,
                                                                      const torch::Tensor& input) {
  SplitBackward split;
  split.output_ = output;
  if (!input.requires_grad()) {
    split.output_grad_ = output_grad;  // no I: W is the whole backward
    return {torch::Tensor(), std::move(split)};
  }
  TORCH_CHECK(input.is_leaf() && output.grad_fn(), "split backward needs a leaf input and a graph");
  const auto input_node = torch::autograd::impl::grad_accumulator(input);
  const auto reaches = reaches_input(output.grad_fn().get(), input_node.get());
  for (const auto& [node, on_input_side] : reaches) {
    if (!on_input_side || node == input_node.get()) continue;
    std::vector<size_t> input_side;
    bool crosses = false;
    for (size_t i = 0; i < node->num_outputs(); ++i) {
      const auto& edge = node->next_edge(i);
      if (!edge.function) continue;
      if (reaches.at(edge.function.get())) {
        input_side.push_back(i);
      } else {
        crosses = true;
      }
    }
    if (!crosses) continue;
    auto crossing = std::make_shared<Crossing>();
    crossing->node = node->getptr();
    crossing->input_side_edges = std::move(input_side);
    node->add_pre_hook(std::make_unique<KeepArrivingGradients>(crossing->kept));
    split.crossings_.push_back(std::move(crossing));
  }
  auto input_grad = torch::autograd::grad({output}, {input}, {output_grad}, /*retain_graph=*/true)[0];
  return {input_grad, std::move(split)};
}

void SplitBackward::weight_backward() {
  if (output_grad_.defined()) {
    torch::autograd::backward({output_}, {output_grad_});
  } else {
    // Cut each crossing off the input side, so that re-entering it computes only its weight-side
    // outputs and nothing below it on the input side runs again.
    torch::autograd::edge_list roots;
    variable_list root_grads;
    for (const auto& crossing : crossings_) {
      for (const size_t i : crossing->input_side_edges) crossing->node->next_edges()[i] = Edge();
      const auto& kept = *crossing->kept;
      for (size_t i = 0; i < kept.size(); ++i) {
        if (!kept[i].defined()) continue;
        roots.emplace_back(crossing->node, static_cast<uint32_t>(i));
        root_grads.push_back(kept[i]);
      }
    }
    if (!roots.empty()) {
      torch::autograd::Engine::get_default_engine().execute(roots, root_grads, /*keep_graph=*/false,
                                                            /*create_graph=*/false,
                                                            /*accumulate_grad=*/true);
    }
  }
  for (const auto& crossing : crossings_) crossing->kept->clear();
  crossings_.clear();
  output_ = torch::Tensor();
  output_grad_ = torch::Tensor();
}

}  // namespace ppctl::runtime
