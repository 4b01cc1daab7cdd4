// Tests for HfFolder::read's tensor-parallel slices: every GPT-2 and Llama-family tensor (Conv1D weights stored
// transposed, the fused qkv, row-parallel dim-1 weights, vocabulary 37, wpe with more rows than ppctl keeps, a tied
// head read from wte) read as rank r of t is model::take_shard of the whole tensor, bit for bit, and reads only the
// slice's bytes from the file; load_hf_weights reads about 1/t of a stage's split bytes.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <filesystem>

#include "interop/hf_folder.hpp"
#include "interop/hf_load.hpp"
#include "interop/safetensors.hpp"
#include "model/stage.hpp"
#include "model/tensor_parallel.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace ppctl;

namespace {

/// GPT-2 (untied: lm_head in the file) and Qwen2 (q/k/v biases, grouped-query attention) at widths that every
/// t in 1..3 divides but for the vocabulary of 37 and Qwen2's 2 key-value heads (4 rows of k and v) at 3.
config::ModelSpec model_of(config::Arch arch) {
  // vocab_size, layers, hidden, heads, seq_len, dropout, tie_embeddings, arch
  config::ModelSpec m{37, 1, 12, 6, 5, 0.0, false, arch};
  if (arch != config::Arch::Gpt2) {
    m.kv_heads = 2;
    m.ffn_hidden = 18;
  }
  return m;
}

/// Writes DIR/model.safetensors with every tensor of `model` in Hugging Face's layout (Conv1D weights transposed,
/// wpe with 3 rows beyond seq_len), each the transform of a whole ppctl tensor of distinct values; returns those
/// whole ppctl tensors by ppctl name.
std::map<std::string, torch::Tensor> write_folder(const fs::path& dir, const config::ModelSpec& model) {
  std::map<std::string, torch::Tensor> whole;
  std::vector<torch::Tensor> keep;
  std::vector<interop::TensorToWrite> tensors;
  double offset = 0.0;
  for (const auto& t : interop::hf_tensors(model)) {
    auto value = torch::arange(c10::multiply_integers(t.ppctl_shape), torch::kFloat).reshape(t.ppctl_shape) + offset;
    offset += 1000.0;
    whole[t.ppctl_name] = value;
    auto hf = value;
    if (t.layout == interop::Layout::Transpose) hf = value.t();
    if (t.layout == interop::Layout::Rows) hf = torch::cat({value, torch::full({3, value.size(1)}, -1.0f)});
    auto shape = t.hf_shape;
    if (t.layout == interop::Layout::Rows) shape[0] += 3;
    keep.push_back(hf.contiguous());
    tensors.push_back({t.hf_names.front(), shape, keep.back().data_ptr<float>()});
  }
  interop::write_safetensors(dir / "model.safetensors", tensors);
  return whole;
}

}  // namespace

TEST_CASE("a tensor-parallel rank's slice read from safetensors is take_shard of the whole tensor, reading only it") {
  const auto arch = GENERATE(config::Arch::Gpt2, config::Arch::Qwen2);
  const auto model = model_of(arch);
  test::TempDir dir("hf_slices");
  const auto whole = write_folder(dir.path, model);
  const interop::HfFolder folder(dir.path);
  int64_t kinds_seen[3] = {0, 0, 0};  // replicated, dim 0, dim 1
  for (const auto& t : interop::hf_tensors(model)) {
    const auto split = model::parameter_split(t.ppctl_name);
    ++kinds_seen[split.dim + 1];
    for (int64_t size = 1; size <= 3; ++size) {
      uint64_t read_by_all = 0;
      for (int64_t rank = 0; rank < size; ++rank) {
        INFO(t.ppctl_name << " (" << t.hf_names.front() << "), rank " << rank << " of " << size);
        const auto read = folder.read(t, {split.dim, split.parts, size, rank});
        const auto expected = model::take_shard(whole.at(t.ppctl_name), split, size, rank).contiguous();
        REQUIRE(static_cast<int64_t>(read.values.size()) == expected.numel());
        const auto got = torch::from_blob(const_cast<float*>(read.values.data()), expected.sizes(), torch::kFloat);
        CHECK(torch::equal(got, expected));
        CHECK(read.bytes_read == static_cast<uint64_t>(expected.numel()) * 4);  // the slice's bytes, no more
        read_by_all += read.bytes_read;
      }
      // Split tensors: the ranks together read the whole tensor once; replicated ones: every rank reads it all.
      const auto whole_bytes = static_cast<uint64_t>(whole.at(t.ppctl_name).numel()) * 4;
      CHECK(read_by_all == (split.replicated() ? whole_bytes * static_cast<uint64_t>(size) : whole_bytes));
    }
  }
  CHECK(kinds_seen[0] > 0);
  CHECK(kinds_seen[1] > 0);
  CHECK(kinds_seen[2] > 0);
}

TEST_CASE("the last stage's tied head is read as its vocabulary slice of wte") {
  auto model = model_of(config::Arch::Gpt2);
  model.tie_embeddings = true;
  test::TempDir dir("hf_slices_tied");
  const auto wte = write_folder(dir.path, model).at("tok_embed.weight");  // a tied model's file: no lm_head.weight
  plan::StageLayout last;
  last.layers = {1, 1};
  last.has_head = true;
  const auto tensors = interop::hf_tensors(model, last);
  const auto head = std::find_if(tensors.begin(), tensors.end(), [](const auto& t) { return t.tied_copy; });
  REQUIRE(head != tensors.end());
  const interop::HfFolder folder(dir.path);
  for (int64_t rank = 0; rank < 3; ++rank) {
    const auto read = folder.read(*head, {0, 1, 3, rank});
    const auto expected = model::take_shard(wte, {0, 1}, 3, rank).contiguous();
    CHECK(torch::equal(torch::from_blob(const_cast<float*>(read.values.data()), expected.sizes()), expected));
  }
}

TEST_CASE("load_hf_weights at tp 2: each rank holds its shards and reads about half of the split tensors' bytes") {
  const auto arch = GENERATE(config::Arch::Gpt2, config::Arch::Qwen2);
  const auto model = model_of(arch);
  test::TempDir dir("hf_slices_load");
  const auto whole = write_folder(dir.path, model);
  const auto layout = model::whole_model_layout(model);
  uint64_t replicated = 0, split = 0;
  for (const auto& [name, tensor] : whole) {
    (model::parameter_split(name).replicated() ? replicated : split) += static_cast<uint64_t>(tensor.numel()) * 4;
  }
  uint64_t read_by_both = 0;
  for (int64_t rank = 0; rank < 2; ++rank) {
    INFO("tp rank " << rank);
    model::StageModule stage(model, layout, 5, model::TensorParallel{2, rank, nullptr, false});
    const auto stats = interop::load_hf_weights(dir.path, model, layout, *stage);
    for (const auto& item : stage->named_parameters()) {
      INFO(item.key());
      CHECK(torch::equal(item.value(), stage->shard_of(item.key(), whole.at(item.key()))));
    }
    CHECK(stats.whole_bytes == split + replicated);
    // Half of every split tensor and every replicated one; vocabulary 37: rank 0 holds 19 rows of the embedding and
    // the head, rank 1 18, half a row (hidden x 4 bytes) above and below half of each.
    const uint64_t half = split / 2 + replicated, row = static_cast<uint64_t>(model.hidden) * 4;
    CHECK(stats.bytes_read == (rank == 0 ? half + row : half - row));
    read_by_both += stats.bytes_read;
  }
  CHECK(read_by_both == split + 2 * replicated);
}
