// Split backward (runtime/split_backward.hpp): I then W give the gradients of one full backward, and W
// runs nothing on the input side again.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <map>
#include <string>

#include "model/autocast.hpp"
#include "runtime/split_backward.hpp"

using ppctl::runtime::SplitBackward;

namespace {

int g_input_side_runs = 0;  // backward calls of CountedIdentity

/// y = x, counting its backward calls: placed on the activation path, it tells which pass ran it.
struct CountedIdentity : torch::autograd::Function<CountedIdentity> {
  static torch::Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const torch::Tensor& x) {
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
};

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
  auto [x, y] = run_forward();
  g_input_side_runs = 0;
  auto [dx, weight_half] = SplitBackward::input_backward(y, seed.to(y.scalar_type()), x);
  result.runs_in_i = g_input_side_runs;
  result.split_input_grad = dx;
  result.crossings = weight_half.crossings();
  for (const auto& param : net.parameters()) CHECK_FALSE(param.grad().defined());  // I leaves them
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
    // 2 layer norms, 4 linears and the head per net, each a crossing (its input and its weights).
    CHECK(c.crossings >= 7);
    CHECK(c.runs_in_i == 2);  // the activation path ran once, in I ...
    CHECK(c.runs_in_w == 0);  // ... and not again in W
  }
}

TEST_CASE("under bf16 autocast, I then W equal a full backward", "[split_backward]") {
  torch::manual_seed(2);
  Net net(false);
  const auto c = compare(net, /*input_grad=*/true, /*bf16=*/true, torch::kFloat);
  check_equal(c, 1e-5);  // the same bf16 products, summed in the same order: equal up to fp32 rounding
  CHECK(c.runs_in_w == 0);
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
  check_equal(c, 1e-12);
}
