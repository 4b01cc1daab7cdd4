// Split backward (runtime/split_backward.hpp): I then W give the gradients of one full backward, and W
// runs nothing on the input side again.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <algorithm>
#include <map>
#include <string>

#include "model/autocast.hpp"
#include "runtime/split_backward.hpp"

using ppctl::runtime::SplitBackward;

namespace {

int g_input_side_runs = 0;  // backward calls of CountedIdentity
std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> g_saved;  // what CountedIdentity saved

/// y = x, counting its backward calls: placed on the activation path, it tells which pass ran it.
/// It also saves a tensor for its backward, as activation functions do, watched through g_saved.
struct CountedIdentity : torch::autograd::Function<CountedIdentity> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    auto saved = x.detach() * 2;
    ctx->save_for_backward({saved});
    g_saved.emplace_back(saved.getIntrusivePtr());
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grads) {
    ++g_input_side_runs;
    return {grads[0]};
  }
};

/// Two pre-norm residual blocks (layer norm, linear, GELU, linear) and a head; `shared` reuses the
/// first block's weights in the second block (a weight reached through two crossings).
struct Net : torch::nn::Module {
  explicit Net(bool shared) : shared_(shared) {
    for (int i = 0; i < 2; ++i) {
      norms.push_back(register_module("norm" + std::to_string(i), torch::nn::LayerNorm(torch::nn::LayerNormOptions({8}))));
      ups.push_back(register_module("up" + std::to_string(i), torch::nn::Linear(8, 16)));
      downs.push_back(register_module("down" + std::to_string(i), torch::nn::Linear(16, 8)));
    }
    head = register_module("head", torch::nn::Linear(8, 5));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (int i = 0; i < 2; ++i) {
      const int w = shared_ ? 0 : i;
      auto h = downs[w]->forward(torch::gelu(ups[w]->forward(norms[w]->forward(x))));
      x = CountedIdentity::apply(x + h);
    }
    return head->forward(x);
  }
  bool shared_;
  std::vector<torch::nn::LayerNorm> norms;
  std::vector<torch::nn::Linear> ups, downs;
  torch::nn::Linear head{nullptr};
};

std::map<std::string, torch::Tensor> grads_of(Net& net) {
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : net.named_parameters()) {
    if (item.value().grad().defined()) grads[item.key()] = item.value().grad().clone();
  }
  net.zero_grad(/*set_to_none=*/true);
  return grads;
}

struct Compared {
  torch::Tensor full_input_grad, split_input_grad;
  std::map<std::string, torch::Tensor> full, split;
  size_t crossings = 0;
  int runs_in_i = 0, runs_in_w = 0;
  size_t saved_alive_after_i = 0;  // of what CountedIdentity saved in the split run
};

size_t alive(const std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>>& tensors) {
  return static_cast<size_t>(std::count_if(tensors.begin(), tensors.end(), [](const auto& t) { return !t.expired(); }));
}

/// One full backward and one I + W of the same graph; `input_grad` whether x requires a gradient.
Compared compare(Net& net, bool input_grad, bool bf16, torch::ScalarType dtype) {
  torch::manual_seed(3);
  const auto x0 = torch::randn({3, 4, 8}, dtype);
  const auto seed = torch::randn({3, 4, 5}, dtype);
  Compared result;
  auto run_forward = [&] {
    ppctl::model::AutocastGuard autocast(c10::DeviceType::CPU, bf16);
    auto x = x0.clone().requires_grad_(input_grad);
    return std::make_pair(x, net.forward(x));
  };
  {
    auto [x, y] = run_forward();
    torch::autograd::backward({y}, {seed.to(y.scalar_type())});
    if (input_grad) result.full_input_grad = x.grad().clone();
    result.full = grads_of(net);
  }
  g_saved.clear();
  auto [x, y] = run_forward();
  g_input_side_runs = 0;
  auto [dx, weight_half] = SplitBackward::input_backward(y, seed.to(y.scalar_type()), x);
  y = torch::Tensor();  // the caller's handle on the graph goes, as in the executor
  result.runs_in_i = g_input_side_runs;
  result.saved_alive_after_i = alive(g_saved);
  result.split_input_grad = dx;
  result.crossings = weight_half.crossings();
  // I accumulates the layer norms' gradients (of those used) and leaves every matrix to W.
  for (const auto& item : net.named_parameters()) {
    INFO(item.key());
    const bool used = result.full.count(item.key()) == 1;
    if (item.value().dim() >= 2) CHECK_FALSE(item.value().grad().defined());
    if (item.key().find("norm") != std::string::npos) CHECK(item.value().grad().defined() == (used && input_grad));
  }
  g_input_side_runs = 0;
  weight_half.weight_backward();
  result.runs_in_w = g_input_side_runs;
  result.split = grads_of(net);
  return result;
}

void check_equal(const Compared& c, double tolerance) {
  REQUIRE(c.split.size() == c.full.size());
  for (const auto& [name, full] : c.full) {
    INFO(name);
    REQUIRE(c.split.count(name) == 1);
    CHECK(torch::allclose(c.split.at(name), full, tolerance, tolerance));
  }
  if (c.full_input_grad.defined()) CHECK(torch::allclose(c.split_input_grad, c.full_input_grad, tolerance, tolerance));
}

}  // namespace

TEST_CASE("I then W equal a full backward, and W runs nothing on the input side", "[split_backward]") {
  torch::manual_seed(1);
  for (const bool shared : {false, true}) {
    INFO("shared weights: " << shared);
    Net net(shared);
    net.to(torch::kDouble);
    const auto c = compare(net, /*input_grad=*/true, /*bf16=*/false, torch::kDouble);
    check_equal(c, 1e-12);
    // 4 linear products and the head's, each a deferred crossing (its input and its weight); the
    // layer norms (and biases added on their own) are crossings too, but done within I.
    CHECK(c.crossings == 5);
    CHECK(c.runs_in_i == 2);  // the activation path ran once, in I ...
    CHECK(c.runs_in_w == 0);  // ... and not again in W
    CHECK(c.saved_alive_after_i == 0);  // what only the input gradient needed is freed at I
  }
}

TEST_CASE("under bf16 autocast, I then W equal a full backward", "[split_backward]") {
  torch::manual_seed(2);
  Net net(false);
  const auto c = compare(net, /*input_grad=*/true, /*bf16=*/true, torch::kFloat);
  check_equal(c, 1e-5);  // the same bf16 products, summed in the same order: equal up to fp32 rounding
  CHECK(c.runs_in_w == 0);
  CHECK(c.crossings == 5);
}

TEST_CASE("an input without a gradient has no I, and W is the full backward", "[split_backward]") {
  torch::manual_seed(4);
  Net net(false);
  net.to(torch::kDouble);
  const auto c = compare(net, /*input_grad=*/false, /*bf16=*/false, torch::kDouble);
  CHECK_FALSE(c.split_input_grad.defined());
  CHECK(c.crossings == 0);
  CHECK(c.runs_in_i == 0);
  CHECK(c.runs_in_w == 2);
  CHECK(c.saved_alive_after_i == 2);  // the whole graph waits for W
  check_equal(c, 1e-12);
}

TEST_CASE("a leaf reached from a deferred product and from elementwise work gets its gradient once", "[split_backward]") {
  torch::manual_seed(5);
  const auto weight = torch::randn({8, 8}, torch::kDouble).requires_grad_();
  const auto bias = torch::randn({8}, torch::kDouble).requires_grad_();  // in addmm and added again
  const auto x0 = torch::randn({4, 8}, torch::kDouble);
  const auto seed = torch::randn({4, 8}, torch::kDouble);
  auto forward = [&](const torch::Tensor& x) { return torch::addmm(bias, x, weight.t()) * bias + bias; };
  auto x = x0.clone().requires_grad_();
  torch::autograd::backward({forward(x)}, {seed});
  const auto full = std::vector<torch::Tensor>{x.grad().clone(), weight.grad().clone(), bias.grad().clone()};
  weight.mutable_grad() = torch::Tensor();
  bias.mutable_grad() = torch::Tensor();
  auto x2 = x0.clone().requires_grad_();
  auto [dx, weight_half] = SplitBackward::input_backward(forward(x2), seed, x2);
  CHECK(weight_half.crossings() >= 1);
  weight_half.weight_backward();
  CHECK(torch::allclose(dx, full[0], 1e-12, 1e-12));
  CHECK(torch::allclose(weight.grad(), full[1], 1e-12, 1e-12));
  CHECK(torch::allclose(bias.grad(), full[2], 1e-12, 1e-12));
}
