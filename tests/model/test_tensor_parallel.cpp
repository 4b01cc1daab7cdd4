// Tests for model/tensor_parallel: shard ranges and parameter splits, and, on two ranks over Gloo (threads of this
// process), that every tensor-parallel piece computes what its unsplit counterpart does (forward and gradients)
// with Megatron's number of all-reduces per block.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)
#include <catch2/generators/catch_generators.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <thread>

#include "comm/communicator.hpp"
#include "comm/rendezvous.hpp"
#include "model/gpt2.hpp"
#include "model/llama.hpp"
#include "model/stage.hpp"
#include "model/tensor_parallel.hpp"
#include "runtime/memory.hpp"

using namespace ppctl;
using namespace std::chrono_literals;

namespace {

/// A group's collectives counted on their way to the real one (the rest passed on).
class CountingCommunicator : public comm::Communicator {
 public:
  explicit CountingCommunicator(comm::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  comm::PendingOp isend(const at::Tensor& t, int peer, int64_t tag, std::string what) override {
    return inner_.isend(t, peer, tag, std::move(what));
  }
  comm::PendingOp irecv(at::Tensor& t, int peer, int64_t tag, std::string what) override {
    return inner_.irecv(t, peer, tag, std::move(what));
  }
  void wait(const comm::PendingOp& op) override { inner_.wait(op); }
  bool poll(const comm::PendingOp& op) override { return inner_.poll(op); }
  void barrier() override { inner_.barrier(); }
  std::vector<int64_t> all_gather(int64_t value) override { return inner_.all_gather(value); }
  std::vector<double> all_reduce_sum(const std::vector<double>& values) override {
    return inner_.all_reduce_sum(values);
  }
  void all_reduce_sum_inplace(at::Tensor& t) override {
    ++all_reduces;
    inner_.all_reduce_sum_inplace(t);
  }
  comm::PendingOp all_reduce_sum_async(at::Tensor& t, std::string what) override {
    return inner_.all_reduce_sum_async(t, std::move(what));
  }
  comm::PendingOp reduce_scatter_sum_async(at::Tensor& t, std::string what) override {
    ++reduce_scatters;
    return inner_.reduce_scatter_sum_async(t, std::move(what));
  }
  comm::PendingOp all_gather_inplace_async(at::Tensor& t, std::string what) override {
    ++all_gathers;
    return inner_.all_gather_inplace_async(t, std::move(what));
  }
  int all_reduces = 0, reduce_scatters = 0, all_gathers = 0;

 private:
  comm::Communicator& inner_;
};

/// Runs `body(tp)` on `size` ranks (threads) joined in one Gloo group; a failure on any rank fails the test.
void on_ranks(int64_t size, const std::function<void(const model::TensorParallel&, CountingCommunicator&)>& body) {
  // Several ranks' groups in one process: c10d's flight recorder (one per process) crashed about 1 run in 30 when
  // two of them enqueued at once under load (SIGSEGV in FlightRecorder::recordWithResetEnabled, CI of 922ef94).
  // A worker process holds one rank; here the recorder is off, set before the first group is made (60 of 60 runs
  // passed under the same load after it).
  ::setenv("TORCH_FR_BUFFER_SIZE", "0", 1);
  comm::StoreServer store("127.0.0.1", 0, static_cast<int>(size), 30s);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(size));
  for (int64_t r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        comm::RendezvousInfo info;
        info.rank = static_cast<int>(r);
        info.world_size = static_cast<int>(size);
        info.master_port = store.port();
        info.job_id = store.job_id();
        auto group = comm::Communicator::create(info, comm::BackendKind::Gloo, 30s, at::Device(at::kCPU));
        CountingCommunicator counting(*group);
        body(model::TensorParallel{size, r, &counting}, counting);
        group->barrier();
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int64_t r = 0; r < size; ++r) {
    INFO("rank " << r);
    CHECK(errors[static_cast<size_t>(r)] == "");
  }
}

double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

config::ModelSpec tiny_model(config::Arch arch) {
  config::ModelSpec m;
  m.arch = arch;
  m.layers = 2;
  m.hidden = 32;
  m.heads = 4;
  m.seq_len = 8;
  m.vocab_size = 37;  // odd: shards of 19 and 18 rows
  if (arch != config::Arch::Gpt2) {
    m.kv_heads = 2;
    m.ffn_hidden = 48;
  }
  return m;
}

}  // namespace

TEST_CASE("shards cover the rows once, in order, every rank at least one, none two longer than another") {
  // 9 rows over 8 ranks: shards of ceil(9 / 8) = 2 would leave ranks 5-7 empty (an embedding of no rows).
  const auto [n, t] = GENERATE(std::pair<int64_t, int64_t>{8, 2}, std::pair<int64_t, int64_t>{37, 2},
                               std::pair<int64_t, int64_t>{50257, 8}, std::pair<int64_t, int64_t>{5, 4},
                               std::pair<int64_t, int64_t>{9, 8}, std::pair<int64_t, int64_t>{128256, 8});
  INFO(n << " rows over " << t);
  int64_t next = 0, shortest = n, longest = 0;
  for (int64_t r = 0; r < t; ++r) {
    const auto [begin, end] = model::shard_range(n, t, r);
    CHECK(begin == next);
    CHECK(end > begin);
    shortest = std::min(shortest, end - begin);
    longest = std::max(longest, end - begin);
    next = end;
  }
  CHECK(next == n);
  CHECK(longest - shortest <= 1);
  CHECK(longest == (n + t - 1) / t);  // what the plan counts for the largest shard
}

TEST_CASE("parameters split as Megatron's layers do; everything else is replicated") {
  using model::parameter_split;
  CHECK(parameter_split("block3.q_proj.weight").dim == 0);
  CHECK(parameter_split("block3.k_proj.bias").dim == 0);
  CHECK(parameter_split("block0.qkv.weight").parts == 3);
  CHECK(parameter_split("block0.fc1.bias").dim == 0);
  CHECK(parameter_split("block1.o_proj.weight").dim == 1);
  CHECK(parameter_split("block1.fc2.weight").dim == 1);
  CHECK(parameter_split("block1.fc2.bias").replicated());  // added whole after the sum
  CHECK(parameter_split("block1.proj.bias").replicated());
  CHECK(parameter_split("tok_embed.weight").dim == 0);
  CHECK(parameter_split("lm_head.weight").dim == 0);
  for (const char* name : {"pos_embed.weight", "ln_f.weight", "block2.ln1.bias", "block2.attn_norm.weight",
                           "block2.q_norm.weight", "block2.mlp_norm.weight"}) {
    INFO(name);
    CHECK(parameter_split(name).replicated());
  }
}

TEST_CASE("a gradient is partial where a replicated parameter sees this rank's part: positions under SP, heads") {
  const model::TensorParallel one;
  model::TensorParallel two{2, 0, nullptr, false};
  model::TensorParallel sequence{2, 1, nullptr, true};
  for (const std::string name : {"block0.ln1.weight", "block0.ln2.bias", "block1.proj.bias", "block1.fc2.bias",
                                 "block0.attn_norm.weight", "block0.mlp_norm.weight", "ln_f.weight", "ln_f.bias",
                                 "pos_embed.weight", "attn_norm.weight"}) {
    INFO(name);
    CHECK_FALSE(model::gradient_is_partial(name, one));
    CHECK_FALSE(model::gradient_is_partial(name, two));  // applied to the whole sequence on every rank
    CHECK(model::gradient_is_partial(name, sequence));   // to this rank's positions
  }
  for (const std::string name : {"block2.q_norm.weight", "block2.k_norm.weight", "q_norm.weight"}) {
    INFO(name);
    CHECK_FALSE(model::gradient_is_partial(name, one));
    CHECK(model::gradient_is_partial(name, two));  // this rank's heads, with or without SP
    CHECK(model::gradient_is_partial(name, sequence));
  }
  for (const std::string name : {"block0.qkv.weight", "block0.qkv.bias", "block0.fc1.bias", "block0.proj.weight",
                                 "block0.q_proj.bias", "block0.down_proj.weight", "tok_embed.weight",
                                 "lm_head.weight"}) {
    INFO(name);  // split parameters' gradients are this rank's own, whole
    CHECK_FALSE(model::gradient_is_partial(name, sequence));
    CHECK_FALSE(model::gradient_is_partial(name, two));
  }
  CHECK_FALSE(model::gradient_is_partial("block0.xq_norm.weight", two));  // a name ending so is no q_norm
}

TEST_CASE("a fused qkv shard holds each of q, k and v's rows of its heads, and comes back whole") {
  const auto full = torch::arange(12 * 3, torch::kFloat).view({12, 3});  // parts of 4 rows
  const model::Split split{0, 3};
  const auto first = model::take_shard(full, split, 2, 0), second = model::take_shard(full, split, 2, 1);
  CHECK(torch::equal(first, torch::cat({full.narrow(0, 0, 2), full.narrow(0, 4, 2), full.narrow(0, 8, 2)})));
  CHECK(torch::equal(second, torch::cat({full.narrow(0, 2, 2), full.narrow(0, 6, 2), full.narrow(0, 10, 2)})));
  on_ranks(2, [&](const model::TensorParallel& tp, CountingCommunicator&) {
    const auto mine = model::take_shard(full, split, tp.size, tp.rank).contiguous();
    const auto whole = model::gather_shards(mine, split, {12, 3}, tp);
    if (!torch::equal(whole, full)) throw std::runtime_error("gathered qkv differs");
  });
}

TEST_CASE("vocabulary-parallel cross-entropy equals cross-entropy over the whole logits, gradients too") {
  at::set_num_threads(1);
  const int64_t n = 24, vocab = 37;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const auto logits = torch::randn({n, vocab}, gen) * 4;
  auto targets = torch::randint(0, vocab, {n}, gen);
  targets[0] = vocab - 1;  // the last row, on the shorter shard
  targets[1] = 0;
  const auto weights = torch::rand({n}, gen);  // a per-token weight (a loss mask's), so each token's gradient counts
  const auto whole = logits.clone().requires_grad_(true);
  namespace F = torch::nn::functional;
  const auto expected =
      (F::cross_entropy(whole, targets, F::CrossEntropyFuncOptions().reduction(torch::kNone)) * weights).sum();
  expected.backward();
  on_ranks(2, [&](const model::TensorParallel& tp, CountingCommunicator& counted) {
    const auto [begin, end] = model::shard_range(vocab, tp.size, tp.rank);
    auto mine = logits.narrow(1, begin, end - begin).clone().requires_grad_(true);
    const auto loss = (model::vocab_parallel_cross_entropy(mine, targets, begin, tp) * weights).sum();
    loss.backward();
    if (counted.all_reduces != 2) throw std::runtime_error("expected 2 all-reduces");
    if (max_difference(loss, expected) > 1e-6) throw std::runtime_error("loss differs");
    if (max_difference(mine.grad(), whole.grad().narrow(1, begin, end - begin)) > 1e-7) {
      throw std::runtime_error("gradient differs");
    }
  });
}

TEST_CASE("dropout under sequence parallelism keeps this rank's part of the mask for the backward, not the whole") {
  // The mask is drawn for the whole sequence (so that it does not depend on t) and cut: what stays alive with the
  // output must be [batch, s / t, hidden], at batch 1 (where the cut is a contiguous view) and above. The plan counts
  // that (plan::block_activation_bytes).
  const runtime::MemoryMeter meter(torch::kCPU);
  const int64_t t = 4, seq = 32, hidden = 16;
  const model::TensorParallel tp{t, 1, nullptr, true};
  const model::DropoutContext context{true, 5, 1, 2};
  for (const int64_t batch : {1, 3}) {
    INFO("batch " << batch);
    const auto x = torch::randn({batch, seq / t, hidden}).requires_grad_(true);
    const int64_t part = x.numel() * 4;  // one fp32 tensor of this rank's positions
    const int64_t before = meter.read().live;
    auto y = model::seeded_dropout(x, 0.1, context, 0, 0, tp);
    const int64_t held = meter.read().live - before;  // the output and what autograd saved for the backward
    CHECK(held >= 2 * part);                          // the output and the mask
    CHECK(held < 2 * part + part / 2);                // not the whole sequence's mask (t parts)
    y.sum().backward();
  }
}

TEST_CASE("a block split over two ranks computes the unsplit block, with Megatron's collectives each way") {
  at::set_num_threads(1);
  const auto arch = GENERATE(config::Arch::Gpt2, config::Arch::Llama, config::Arch::Qwen2);
  const bool sp = GENERATE(false, true);
  auto spec = tiny_model(arch);
  spec.dropout = 0.1;
  INFO(config::to_string(arch) << (sp ? " with sequence parallelism" : ""));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto x = torch::randn({2, spec.seq_len, spec.hidden}, gen);
  const auto grad_out = torch::randn({2, spec.seq_len, spec.hidden}, gen);
  const model::DropoutContext dropout{true, 5, 1, 2};  // masks of the whole sequence, sliced under SP
  const auto make = [&](const model::TensorParallel& tp) -> std::shared_ptr<model::DecoderBlock> {
    if (arch == config::Arch::Gpt2) return std::make_shared<model::Gpt2BlockImpl>(spec, 1, 11, tp);
    return std::make_shared<model::LlamaBlockImpl>(spec, 1, 11, tp);
  };
  const auto whole = make({});
  const auto input = x.clone().requires_grad_(true);
  const auto expected = whole->forward(input, dropout);
  expected.backward(grad_out);
  std::map<std::string, torch::Tensor> expected_grads;
  for (const auto& item : whole->named_parameters()) expected_grads[item.key()] = item.value().grad();
  on_ranks(2, [&](model::TensorParallel tp, CountingCommunicator& counted) {
    tp.sequence_parallel = sp;
    const auto block = make(tp);
    const auto [first, last] = model::sequence_range(spec.seq_len, tp);
    const auto mine = [&](const torch::Tensor& t) { return t.narrow(1, first, last - first); };
    const auto in = mine(x).clone().requires_grad_(true);
    const auto out = block->forward(in, dropout);
    // Forward: without SP two all-reduces (g after attention and after the MLP); with SP an all-gather into and
    // a reduce-scatter out of each region instead.
    const int forward_collectives = sp ? counted.all_gathers + counted.reduce_scatters : counted.all_reduces;
    if (forward_collectives != (sp ? 4 : 2) || (sp && counted.all_reduces != 0)) {
      throw std::runtime_error("forward collectives: " + std::to_string(forward_collectives));
    }
    out.backward(mine(grad_out));
    // Backward: without SP f's two all-reduces; with SP a reduce-scatter and an all-gather per region and nothing
    // else (Megatron's count): the replicated parameters' gradients are partial sums from this rank's positions.
    if (!sp && counted.all_reduces != 4) throw std::runtime_error("backward: not 2 all-reduces");
    if (sp && (counted.all_gathers != 4 || counted.reduce_scatters != 4 || counted.all_reduces != 0)) {
      throw std::runtime_error("backward collectives under SP");
    }
    // The trainer sums them once per step (optim::GradientBuffers): one all-reduce for all of them, none without SP.
    const auto partial = model::partial_gradients(*block, tp);
    if (sp != !partial.empty()) throw std::runtime_error("partial gradients: " + std::to_string(partial.size()));
    const int before = counted.all_reduces;
    model::sum_partial_gradients(partial, tp);
    if (counted.all_reduces != before + (sp ? 1 : 0)) throw std::runtime_error("not one all-reduce of partial sums");
    if (max_difference(out, mine(expected)) > 1e-5) throw std::runtime_error("output differs");
    if (max_difference(in.grad(), mine(input.grad())) > 1e-5) throw std::runtime_error("input gradient differs");
    for (const auto& item : block->named_parameters()) {
      const auto& want = expected_grads.at(item.key());
      const auto shard = model::take_shard(want, model::parameter_split(item.key()), tp.size, tp.rank);
      if (max_difference(item.value().grad(), shard) > 1e-5) {
        throw std::runtime_error("gradient of " + item.key() + " differs");
      }
    }
  });
}

TEST_CASE("a whole stage split over two ranks: embedding, blocks, head and loss equal the unsplit stage") {
  at::set_num_threads(1);
  const auto arch = GENERATE(config::Arch::Gpt2, config::Arch::Qwen3);
  const bool sp = GENERATE(false, true);
  auto spec = tiny_model(arch);
  spec.tie_embeddings = arch == config::Arch::Gpt2;
  spec.dropout = 0.1;
  INFO(config::to_string(arch) << (sp ? " with sequence parallelism" : ""));
  plan::StageLayout layout;
  layout.layers = {0, spec.layers};
  layout.has_embedding = true;
  layout.has_head = true;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  const auto ids = torch::randint(0, spec.vocab_size, {2, spec.seq_len}, gen);
  const auto targets = torch::randint(0, spec.vocab_size, {2, spec.seq_len}, gen);
  const model::DropoutContext dropout{true, 5, 1, 2};
  model::StageModule whole(spec, layout, 21);
  const auto expected = whole->loss(whole->forward(ids, dropout), targets);
  expected.backward();
  std::map<std::string, torch::Tensor> expected_grads;
  for (const auto& item : whole->named_parameters()) expected_grads[item.key()] = item.value().grad();
  on_ranks(2, [&](model::TensorParallel tp, CountingCommunicator&) {
    tp.sequence_parallel = sp;
    model::StageModule stage(spec, layout, 21, tp);
    for (const auto& item : stage->named_parameters()) {  // built from the same whole draws
      const auto want = whole->named_parameters()[item.key()];
      if (!torch::equal(stage->whole_of(item.key(), item.value().detach()), want.detach())) {
        throw std::runtime_error("weight " + item.key() + " is not a shard of the unsplit stage's");
      }
    }
    const auto loss = stage->loss(stage->forward(ids, dropout), targets);
    loss.backward();
    // qwen3's q_norm and k_norm (this rank's heads), and under SP the norms, biases and positions: summed once.
    model::sum_partial_gradients(model::partial_gradients(*stage, tp), tp);
    if (max_difference(loss, expected) > 1e-6) throw std::runtime_error("loss differs");
    for (const auto& item : stage->named_parameters()) {
      const auto got = stage->whole_of(item.key(), item.value().grad());
      if (max_difference(got, expected_grads.at(item.key())) > 1e-6) {
        throw std::runtime_error("gradient of " + item.key() + " differs");
      }
    }
  });
}
