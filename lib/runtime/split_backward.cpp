// Split backward: I towards the input with the gradients at the crossings kept, W from the crossings
// into the weights only.
#include "runtime/split_backward.hpp"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace ppctl::runtime {

using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;

/// A node on the input side with edges into the weight side.
struct SplitBackward::Crossing {
  std::shared_ptr<Node> node;
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
  if (!input.requires_grad()) {
    split.output_ = output;  // no I: W is the whole backward
    split.output_grad_ = output_grad;
    return {torch::Tensor(), std::move(split)};
  }
  TORCH_CHECK(input.is_leaf() && output.grad_fn(), "split backward needs a leaf input and a graph");
  const auto input_node = torch::autograd::impl::grad_accumulator(input);
  const auto reaches = reaches_input(output.grad_fn().get(), input_node.get());

  // The crossings, and the leaves each one's weight side leads to.
  struct Found {
    Node* node;
    std::unordered_set<torch::autograd::AccumulateGrad*> leaves;
    bool matrix = false;  // a leaf of two or more dimensions: a weight-gradient product
  };
  std::vector<Found> found;
  for (const auto& [node, on_input_side] : reaches) {
    if (!on_input_side || node == input_node.get()) continue;
    Found crossing{node, {}};
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    for (const auto& edge : node->next_edges()) {
      if (edge.function && !reaches.at(edge.function.get())) stack.push_back(edge.function.get());
    }
    while (!stack.empty()) {
      Node* below = stack.back();
      stack.pop_back();
      if (!seen.insert(below).second) continue;
      if (auto* leaf = dynamic_cast<torch::autograd::AccumulateGrad*>(below)) {
        crossing.leaves.insert(leaf);
        crossing.matrix = crossing.matrix || leaf->variable.dim() >= 2;
      }
      for (const auto& edge : below->next_edges()) {
        if (edge.function) stack.push_back(edge.function.get());
      }
    }
    if (!seen.empty()) found.push_back(std::move(crossing));  // it has a weight-side edge
  }
  // Deferred to W: the crossings whose weight side holds a matrix (the weight-gradient products).
  // The others (norm scales and shifts, a separate bias: elementwise work) run within I, unless one
  // of their leaves is also a deferred crossing's; then everything waits for W.
  std::unordered_set<torch::autograd::AccumulateGrad*> deferred_leaves;
  for (const auto& crossing : found) {
    if (crossing.matrix) deferred_leaves.insert(crossing.leaves.begin(), crossing.leaves.end());
  }
  std::vector<torch::Tensor> in_i;  // leaves whose gradients I accumulates
  bool shared = false;
  for (const auto& crossing : found) {
    if (crossing.matrix) continue;
    for (auto* leaf : crossing.leaves) {
      shared = shared || deferred_leaves.count(leaf) > 0;
      in_i.push_back(leaf->variable);
    }
  }
  if (shared) in_i.clear();
  std::unordered_set<Node*> kept_nodes;
  for (const auto& crossing : found) {
    if (!shared && !crossing.matrix) continue;
    kept_nodes.insert(crossing.node);
    auto kept = std::make_shared<Crossing>();
    kept->node = crossing.node->getptr();
    crossing.node->add_pre_hook(std::make_unique<KeepArrivingGradients>(kept->kept));
    split.crossings_.push_back(std::move(kept));
  }

  torch::Tensor input_grad;
  if (in_i.empty()) {
    input_grad = torch::autograd::grad({output}, {input}, {output_grad}, /*retain_graph=*/true)[0];
  } else {
    std::sort(in_i.begin(), in_i.end(), [](const auto& a, const auto& b) {
      return a.unsafeGetTensorImpl() < b.unsafeGetTensorImpl();
    });
    in_i.erase(std::unique(in_i.begin(), in_i.end(), [](const auto& a, const auto& b) { return a.is_same(b); }),
               in_i.end());
    in_i.push_back(input);
    torch::autograd::backward({output}, {output_grad}, /*retain_graph=*/true, /*create_graph=*/false, in_i);
    input_grad = input.grad();
    auto leaf = input;  // the same tensor: it may live on in W's graph, its .grad need not
    leaf.mutable_grad() = torch::Tensor();
  }
  // W needs the deferred crossings and their weight side only. The other input-side nodes let go of
  // what they saved (the activations only I needed) now rather than at W; the nodes themselves
  // stay, as the crossings' saved inputs refer to them. Then each deferred crossing is cut off the
  // input side, so that re-entering it computes only its weight-side outputs.
  for (const auto& [node, on_input_side] : reaches) {
    if (on_input_side && node != input_node.get() && kept_nodes.count(node) == 0) node->release_variables();
  }
  for (const auto& crossing : split.crossings_) {
    for (auto& edge : crossing->node->next_edges()) {
      // The node an edge points to is alive (the edge holds it), so `reaches` knows it.
      if (edge.function && reaches.at(edge.function.get())) edge = Edge();
    }
  }
  return {input_grad, std::move(split)};
}

void SplitBackward::weight_backward() {
  if (output_grad_.defined()) {
    torch::autograd::backward({output_}, {output_grad_});
  } else {
    // Re-enter each crossing (cut off the input side by I) with the gradients it received in I.
    torch::autograd::edge_list roots;
    variable_list root_grads;
    for (const auto& crossing : crossings_) {
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
