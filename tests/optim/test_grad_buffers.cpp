// Tests for train/grad_buffers: bucket sizes and boundaries, .grad as views into one contiguous buffer per
// stage (autograd accumulates into it), the collectives each stage posts (order, in place, once, whole
// buffer but the tied copy) and the average and tied sum finish() leaves, against a communicator that
// stands in for identical replicas.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "plan/layout.hpp"
#include "support/memory_spec.hpp"
#include "optim/grad_buffers.hpp"

using namespace ppctl;

namespace {

/// Stands in for `size` replicas that all hold what this rank holds: an all-reduce multiplies by the
/// size at wait() (so the average is the tensor itself again). Records what was posted, in order.
class ReplicaCommunicator : public comm::Communicator {
 public:
  explicit ReplicaCommunicator(int size) : size_(size) {}
  int rank() const override { return 0; }
  int world_size() const override { return size_; }
  comm::PendingOp isend(const at::Tensor&, int, int64_t, std::string) override { throw std::logic_error("no p2p"); }
  comm::PendingOp irecv(at::Tensor&, int, int64_t, std::string) override { throw std::logic_error("no p2p"); }
  void wait(const comm::PendingOp& op) override {
    auto& tensor = *static_cast<at::Tensor*>(op.work.get());
    if (tensor.defined()) tensor.mul_(size_);  // undefined: an all-gather, which leaves equal replicas as they are
    ++waited;
  }
  bool poll(const comm::PendingOp& op) override {  // done at once: finished as wait() finishes it
    wait(op);
    return true;
  }
  void barrier() override {}
  std::vector<int64_t> all_gather(int64_t) override { throw std::logic_error("unused"); }
  std::vector<double> all_reduce_sum(const std::vector<double>&) override { throw std::logic_error("unused"); }
  void all_reduce_sum_inplace(at::Tensor&) override { throw std::logic_error("unused"); }
  comm::PendingOp all_reduce_sum_async(at::Tensor& tensor, std::string what) override {
    posted.push_back(what);
    posted_ptrs.push_back(tensor.data_ptr());
    posted_numel += tensor.numel();
    return {std::make_shared<at::Tensor>(tensor), std::move(what), -1};
  }
  /// Posted as an all-reduce: the whole tensor times the size, so its own slice (and the rest) holds the sum.
  comm::PendingOp reduce_scatter_sum_async(at::Tensor& tensor, std::string what) override {
    reduce_scattered += tensor.numel();
    return all_reduce_sum_async(tensor, std::move(what));
  }
  comm::PendingOp all_gather_inplace_async(at::Tensor& tensor, std::string what) override {
    gathered += tensor.numel();
    return {std::make_shared<at::Tensor>(), std::move(what), -1};
  }
  std::vector<std::string> posted;
  std::vector<void*> posted_ptrs;
  int64_t posted_numel = 0;
  int64_t reduce_scattered = 0;  // elements posted as reduce-scatters (also counted in posted_numel)
  int64_t gathered = 0;          // elements posted as all-gathers
  int waited = 0;

 private:
  int size_;
};

/// The stages of a 3-stage split of the small test GPT (tied embeddings), built for one rank.
std::vector<model::StageModule> three_stages(bool tied) {
  auto spec = test::memory_test_spec();
  spec.model.tie_embeddings = tied;
  spec.pipeline.stages = 3;
  const auto layout = plan::make_layout(spec);
  std::vector<model::StageModule> stages;
  for (const auto& s : layout.stages) stages.emplace_back(spec.model, s, /*seed=*/3);
  return stages;
}

int64_t parameter_count(const model::StageModule& stage) {
  int64_t n = 0;
  for (const auto& p : stage->parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST_CASE("buckets hold whole parameters and reach the bucket size, except the last") {
  for (int64_t size : {1, 5, 16, 100, 1000}) {
    const std::vector<int64_t> numels{4, 12, 3, 3, 40, 1, 1, 7, 64, 2};
    const auto ranges = optim::bucket_ranges(numels, size);
    INFO("bucket size " << size);
    REQUIRE(!ranges.empty());
    CHECK(ranges.front().first == 0);
    CHECK(ranges.back().second == numels.size());
    for (size_t b = 0; b < ranges.size(); ++b) {
      const auto [begin, end] = ranges[b];
      CHECK(begin < end);
      if (b > 0) CHECK(begin == ranges[b - 1].second);
      const int64_t filled = std::accumulate(numels.begin() + static_cast<long>(begin),
                                             numels.begin() + static_cast<long>(end), int64_t{0});
      if (b + 1 < ranges.size()) {
        CHECK(filled >= size);                       // closes once full...
        CHECK(filled - numels[end - 1] < size);      // ...and not later
      }
    }
  }
  CHECK(optim::bucket_ranges({}, 10).empty());
  CHECK(optim::bucket_ranges({5, 5}, 1000).size() == 1);
  CHECK_THROWS_AS(optim::bucket_ranges({5}, 0), Error);
  CHECK(optim::bucket_size_of(0, 1) == 40'000'000);
  CHECK(optim::bucket_size_of(0, 64) == 64'000'000);
  CHECK(optim::bucket_size_of(1234, 64) == 1234);
}

TEST_CASE("gradients are views into one buffer per stage that autograd accumulates into") {
  auto stages = three_stages(/*tied=*/false);
  optim::GradientBuffers buffers(stages, nullptr, nullptr, /*bucket_size=*/5000);
  int64_t total = 0;
  for (const auto& stage : stages) total += parameter_count(stage);
  CHECK(buffers.bytes() == 4 * total);
  // A backward through the middle stage accumulates into its buffer, in place (the views stay).
  auto& middle = stages[1];
  std::vector<void*> before;
  for (const auto& p : middle->parameters()) before.push_back(p.grad().data_ptr());
  auto x = torch::randn({2, 32, 64});
  for (int pass = 0; pass < 2; ++pass) middle->forward_parts(x, 0, middle->num_parts(), model::DropoutContext{false, 0, 0, 0}).sum().backward();
  size_t i = 0;
  double sum_of_grads = 0.0;
  for (const auto& p : middle->parameters()) {
    CHECK(p.grad().data_ptr() == before[i++]);
    sum_of_grads += p.grad().abs().sum().item<double>();
  }
  CHECK(sum_of_grads > 0.0);
  buffers.zero();  // and zeroing keeps them views
  for (const auto& p : middle->parameters()) CHECK(p.grad().abs().sum().item<double>() == 0.0);
  // Replacing a .grad is caught: it would escape the reduction.
  middle->parameters().front().mutable_grad() = torch::zeros_like(middle->parameters().front());
  CHECK_THROWS(buffers.zero());
}

TEST_CASE("each stage posts its buckets once, in place, in the order REDUCE_GRAD starts them; finish averages") {
  auto stages = three_stages(/*tied=*/false);
  ReplicaCommunicator dp(4);
  const int64_t bucket = 20'000;
  optim::GradientBuffers buffers(stages, &dp, nullptr, bucket);
  torch::manual_seed(0);
  std::vector<torch::Tensor> expected;
  for (auto& stage : stages) {
    for (auto& p : stage->parameters()) {
      p.mutable_grad().copy_(torch::randn_like(p));
      expected.push_back(p.grad().clone());
    }
  }
  buffers.start(2);  // the last stage's backward ends first
  const auto after_last = dp.posted.size();
  CHECK(after_last == buffers.num_buckets(2));
  CHECK(dp.posted.front().find("of stage 2") != std::string::npos);
  CHECK_THROWS(buffers.start(2));  // twice in one step is a bug
  buffers.start(0);
  buffers.finish();  // starts stage 1, then waits for everything
  CHECK(dp.posted.back().find("of stage 1") != std::string::npos);
  CHECK(dp.posted.size() == buffers.num_buckets(0) + buffers.num_buckets(1) + buffers.num_buckets(2));
  CHECK(dp.waited == static_cast<int>(dp.posted.size()));
  int64_t total = 0;
  for (const auto& stage : stages) total += parameter_count(stage);
  CHECK(dp.posted_numel == total);  // every gradient once, nothing else
  size_t i = 0;
  for (auto& stage : stages) {  // x 4 replicas / 4: the same values, now averaged
    for (auto& p : stage->parameters()) CHECK(torch::equal(p.grad(), expected[i++]));
  }
  // The next step starts afresh.
  buffers.zero();
  buffers.start(1);
  buffers.finish();
  CHECK(dp.posted.size() == 2 * (buffers.num_buckets(0) + buffers.num_buckets(1) + buffers.num_buckets(2)));
}

TEST_CASE("the tied copies are summed once both are done, outside the buckets, and end bitwise equal") {
  auto all = three_stages(/*tied=*/true);
  SECTION("one rank holds both tied stages: local sum, then over the data-parallel group") {
    std::vector<model::StageModule> stages{all[0], all[2]};
    ReplicaCommunicator dp(2);
    optim::GradientBuffers buffers(stages, &dp, nullptr, /*bucket_size=*/1'000'000'000);
    auto first = stages[0]->tied_weight(), last = stages[1]->tied_weight();
    REQUIRE(first.defined());
    REQUIRE(last.defined());
    first.mutable_grad().fill_(1.5);
    last.mutable_grad().fill_(0.25);
    buffers.start(2);
    CHECK(dp.posted.size() == 1);  // stage 2's bucket; the tied sum waits for stage 0
    buffers.start(0);
    CHECK(dp.posted.size() == 3);  // stage 0's bucket and the tied sum
    CHECK(dp.posted.back() == "tied embedding gradient");
    buffers.finish();
    CHECK(torch::equal(first.grad(), last.grad()));
    CHECK(first.grad().max().item<float>() == 1.75f);  // (1.5 + 0.25) x 2 replicas / 2
    // The buckets left the tied copies out: their elements were posted once, with the sum.
    int64_t total = parameter_count(stages[0]) + parameter_count(stages[1]);
    CHECK(dp.posted_numel == total - last.numel());
  }
  SECTION("the copies on two pipeline ranks: the embedding group sums them") {
    std::vector<model::StageModule> stages{all[2]};
    ReplicaCommunicator dp(2), embedding(4);  // 2 replicas x (first, last)
    optim::GradientBuffers buffers(stages, &dp, &embedding, /*bucket_size=*/1000);
    auto copy = stages[0]->tied_weight();
    copy.mutable_grad().fill_(0.5);
    buffers.start(2);
    CHECK(embedding.posted == std::vector<std::string>{"tied embedding gradient"});
    buffers.finish();
    CHECK(copy.grad().max().item<float>() == 1.0f);  // 0.5 x 4 copies / 2 replicas
    CHECK(dp.posted_numel == parameter_count(stages[0]) - copy.numel());
  }
}

TEST_CASE("a stage's buffer layout: whole parameters back to back, buckets padded to equal shards, the tied copy outside") {
  const std::vector<int64_t> numels{4, 12, 3, 3, 40, 1, 1, 7, 64, 2};
  for (const int64_t tied : {-1, 0, 4, 9}) {
    for (const int64_t pad : {1, 2, 3, 8}) {
      for (const int64_t size : {1, 16, 1000}) {
        INFO("tied " << tied << ", pad to " << pad << ", bucket size " << size);
        const auto layout = optim::stage_buffer_layout(numels, tied, size, pad);
        CHECK(layout.tied_index == tied);
        REQUIRE(layout.offsets.size() == numels.size());
        int64_t padding = 0;
        int64_t covered = 0;  // elements of parameters inside buckets
        int64_t end = 0;      // the previous bucket's end
        for (const auto& [offset, numel] : layout.buckets) {
          CHECK(offset >= end);
          CHECK(numel % pad == 0);
          if (pad == 1) CHECK(numel > 0);
          int64_t inside = 0;
          for (size_t i = 0; i < numels.size(); ++i) {
            const int64_t begin = layout.offsets[i], stop = begin + numels[i];
            if (stop <= offset || begin >= offset + numel) continue;
            CHECK(static_cast<int64_t>(i) != tied);            // the tied copy is in no bucket
            CHECK((begin >= offset && stop <= offset + numel));  // a parameter lies whole in one bucket
            inside += numels[i];
          }
          CHECK(numel - inside < pad);  // padded up to the next multiple, no further
          padding += numel - inside;
          covered += inside;
          end = offset + numel;
        }
        const int64_t total = std::accumulate(numels.begin(), numels.end(), int64_t{0});
        CHECK(covered == total - (tied >= 0 ? numels[static_cast<size_t>(tied)] : 0));
        CHECK(layout.numel == total + padding);
        if (pad == 1) CHECK(padding == 0);
        // No two parameters overlap, and all lie inside the buffer.
        std::vector<int> used(static_cast<size_t>(layout.numel), 0);
        for (size_t i = 0; i < numels.size(); ++i) {
          REQUIRE(layout.offsets[i] + numels[i] <= layout.numel);
          for (int64_t k = 0; k < numels[i]; ++k) ++used[static_cast<size_t>(layout.offsets[i] + k)];
        }
        CHECK(std::count(used.begin(), used.end(), 1) == total);
        CHECK(std::count_if(used.begin(), used.end(), [](int n) { return n > 1; }) == 0);
      }
    }
  }
}

TEST_CASE("sharded buffers reduce-scatter every bucket, padded to a multiple of dp, and average the own shard") {
  auto all = three_stages(/*tied=*/true);
  std::vector<model::StageModule> stages{all[0], all[2]};  // both tied copies on this rank
  ReplicaCommunicator dp(4);  // x 4 / 4 is exact in float: the mean of equal replicas is the value
  optim::GradientBuffers buffers(stages, &dp, nullptr, /*bucket_size=*/7'000, /*shard=*/true);
  REQUIRE(buffers.sharded());
  torch::manual_seed(1);
  for (auto& stage : stages) {
    for (auto& p : stage->parameters()) p.mutable_grad().copy_(torch::randn_like(p));
  }
  std::map<int64_t, torch::Tensor> before;
  for (const int64_t s : {0, 2}) before[s] = buffers.buffer(s).clone();
  buffers.start(2);
  buffers.start(0);
  buffers.finish();
  int64_t padded = 0;
  for (const int64_t s : {0, 2}) {
    const auto& layout = buffers.layout(s);
    for (const auto& [offset, numel] : layout.buckets) {
      INFO("stage " << s << ", bucket at " << offset);
      CHECK(numel % 4 == 0);
      padded += numel;
      // Rank 0 of 4 owns the first quarter: the mean of 4 equal replicas is the value itself.
      CHECK(torch::equal(buffers.buffer(s).narrow(0, offset, numel / 4), before[s].narrow(0, offset, numel / 4)));
    }
  }
  CHECK(dp.reduce_scattered == padded);  // every bucket as a reduce-scatter, padding included
  // The tied copies are in no bucket: they are summed whole and all-reduced, as unsharded.
  const auto first = stages[0]->tied_weight(), last = stages[1]->tied_weight();
  REQUIRE(first.defined());
  CHECK(padded == buffers.layout(0).numel + buffers.layout(2).numel - 2 * first.numel());
  CHECK(dp.posted_numel == padded + first.numel());
  CHECK(torch::equal(first.grad(), last.grad()));
  // gather_shards all-gathers each bucket in place; unsharded buffers post nothing for it.
  buffers.gather_shards();
  CHECK(dp.gathered == padded);
  ReplicaCommunicator plain_dp(4);
  optim::GradientBuffers plain(stages, &plain_dp, nullptr, 7'000);
  CHECK_FALSE(plain.sharded());
  plain.gather_shards();
  CHECK(plain_dp.gathered == 0);
}
