// Checkpoints: resuming gives the uninterrupted run's state (bitwise on the CPU with one thread),
// also at another stage count; a worker killed mid-write leaves the previous checkpoint loadable;
// missing, partial, corrupt and mismatched checkpoints are refused naming the file.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/serialize.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <random>
#include <tuple>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/unit_reader.hpp"
#include "config/load.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "interop/hf_export.hpp"
#include "interop/hf_names.hpp"
#include "interop/safetensors.hpp"
#include "model/tensor_parallel.hpp"
#include "support/errors.hpp"
#include "support/tiny_job.hpp"
#include "train/resume.hpp"

namespace fs = std::filesystem;
using namespace ppctl;
using namespace ppctl::test;

namespace {

/// A job of `steps` steps checkpointing into DIR/ckpt every `interval` steps.
fs::path checkpointed_job(const std::string& name, int64_t stages, int64_t steps, int64_t interval,
                          int64_t microbatches = 4, int64_t micro_batch_size = 2, const std::string& model = "") {
  Job job{stages, microbatches, micro_batch_size, steps};
  job.model = model;
  job.train = ", log_interval: 1";
  job.sections = fmt::format("checkpoint: {{dir: ckpt, interval: {}, keep: 10}}\n", interval);
  return make_job(job, fresh_dir(name));
}

/// Runs the job; requires success.
Run run_ok(const fs::path& spec, const std::vector<std::string>& args) {
  auto run = run_job(spec, args);
  INFO(run.output);
  REQUIRE(run.result.exit_code == 0);
  return run;
}

/// Every tensor of a checkpoint folder, whole whatever tensor-parallel size wrote it (checkpoint::UnitReader),
/// keyed "<unit>.pt:key" (the whole file's name at t = 1): each parameter's weight and AdamW state, and a tied head
/// copy where the checkpoint holds one.
std::map<std::string, torch::Tensor> checkpoint_tensors(const fs::path& checkpoint) {
  const auto meta = checkpoint::read_checkpoint_meta(checkpoint);
  checkpoint::UnitReader reader(checkpoint, meta);
  std::vector<std::pair<std::string, std::vector<int64_t>>> parameters;
  for (const auto& t : interop::hf_tensors(meta.model)) parameters.emplace_back(t.ppctl_name, t.ppctl_shape);
  if (meta.tie_embeddings) parameters.emplace_back("lm_head.weight", std::vector<int64_t>{meta.model.vocab_size, meta.model.hidden});
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& [name, shape] : parameters) {
    const auto unit = checkpoint::checkpoint_unit(name);
    for (const char* kind : {"param/", "exp_avg/", "exp_avg_sq/", "step/"}) {
      if (auto value = reader.find(unit, kind + name, shape)) tensors.emplace(unit + ".pt:" + kind + name, *value);
    }
  }
  return tensors;
}

/// The tensor of `key` in `tensors`; a tied head copy absent from a checkpoint saved by one stage
/// is the embedding's (`head.pt:exp_avg/lm_head.weight` -> `embedding.pt:exp_avg/tok_embed.weight`).
const torch::Tensor& entry(const std::map<std::string, torch::Tensor>& tensors, const std::string& key) {
  if (const auto it = tensors.find(key); it != tensors.end()) return it->second;
  const auto slash = key.find('/');
  REQUIRE(key.rfind("head.pt:", 0) == 0);
  REQUIRE(key.substr(slash) == "/lm_head.weight");
  return tensors.at("embedding.pt:" + key.substr(8, slash - 8) + "/tok_embed.weight");
}

/// GPT-2's key bias, the middle third of qkv.bias, has a gradient of exactly 0 (it adds q . b_k to every logit
/// of a query, which softmax ignores): what it holds is rounding noise that AdamW scales up to a step of the
/// learning rate's order, so it differs between runs that add in other orders (measured 5.4e-7 after 5 steps
/// across t, where every other entry is within 1e-8). `tensor` without it: q and v's rows.
torch::Tensor without_key_bias(const std::string& key, const torch::Tensor& tensor) {
  if (key.find("qkv.bias") == std::string::npos || tensor.dim() != 1) return tensor;
  const auto third = tensor.size(0) / 3;
  return torch::cat({tensor.narrow(0, 0, third), tensor.narrow(0, 2 * third, third)});
}

/// The two checkpoints hold the same state: every tensor equal bit for bit (`tolerance` 0) or
/// within relative `tolerance` (absolute 1e-6 for entries near 0). AdamW's state must be there too.
/// `skip_key_bias`: compare GPT-2's qkv.bias without its key third (without_key_bias).
void check_same_state(const fs::path& a, const fs::path& b, double tolerance, bool skip_key_bias = false) {
  auto x = checkpoint_tensors(a);
  auto y = checkpoint_tensors(b);
  if (x.size() < y.size()) std::swap(x, y);  // x has the tied head copy if only one has it
  REQUIRE(x.size() >= y.size());
  int64_t optimizer_entries = 0;
  for (const auto& [key, tensor] : x) {
    INFO(key);
    const auto& other = entry(y, key);
    if (key.find(":exp_avg/") != std::string::npos) ++optimizer_entries;
    if (tolerance == 0.0) {
      CHECK(torch::equal(tensor, other));
    } else {
      // The summation order differs between stage counts (the tied gradient is summed across
      // stages): float rounding, which AdamW amplifies where a gradient is ~0 (the key part of
      // qkv.bias, which softmax ignores); hence also an absolute 1e-6.
      if (skip_key_bias) {
        CHECK(torch::allclose(without_key_bias(key, tensor), without_key_bias(key, other), tolerance, 1e-6));
      } else {
        CHECK(torch::allclose(tensor, other, tolerance, 1e-6));
      }
    }
  }
  CHECK(optimizer_entries > 10);
}

/// The resumed run logs steps `first`..`last` with the uninterrupted run's losses (logged with 4 decimals).
void check_resumed_losses(const Run& whole_run, const Run& resumed, int64_t first, int64_t last) {
  const auto expected = logged_steps(whole_run.output);
  const auto actual = logged_steps(resumed.output);
  for (int64_t s = first; s <= last; ++s) {
    INFO("step " << s);
    REQUIRE(actual.count(s) == 1);
    CHECK(std::abs(actual.at(s).loss - expected.at(s).loss) <= 1e-4);
  }
}

fs::path step_dir(const fs::path& spec, int64_t step) {
  return spec.parent_path() / "ckpt" / fmt::format("step-{:08d}", step);
}

}  // namespace

TEST_CASE("resuming after step k gives the uninterrupted run's losses and state, bit for bit") {
  const auto whole = checkpointed_job("ckpt_whole", 2, 6, 3);
  const auto whole_run = run_ok(whole, {});
  const auto split = checkpointed_job("ckpt_split", 2, 6, 3);
  run_ok(split, {"--steps", "3"});
  REQUIRE(fs::exists(step_dir(split, 3) / "meta.json"));
  const auto resumed = run_ok(split, {"--resume", step_dir(split, 3).string()});

  CHECK(resumed.output.find("step 3/6") == std::string::npos);  // continues after step 3
  const auto expected = logged_steps(whole_run.output);
  const auto actual = logged_steps(resumed.output);
  for (int64_t s = 4; s <= 6; ++s) {
    INFO("step " << s);
    REQUIRE(actual.count(s) == 1);
    CHECK(actual.at(s).loss == expected.at(s).loss);
    CHECK(actual.at(s).grad_norm == expected.at(s).grad_norm);
  }
  check_same_state(step_dir(whole, 6), step_dir(split, 6), 0.0);
}

TEST_CASE("a checkpoint resumes at another stage count (the layers regroup): 2 -> 4, 2 -> 1, 1 -> 2") {
  // The last case is a Llama (grouped-query attention, untied head): its units regroup the same way.
  const auto [saved, resumed_with, model] =
      GENERATE(std::tuple{2, 4, ""}, std::tuple{2, 1, ""}, std::tuple{1, 2, ""},
               std::tuple{2, 1, ", arch: llama, kv_heads: 2, tie_embeddings: false"});
  INFO("saved with " << saved << " stage(s), resumed with " << resumed_with << " " << model);
  const std::string arch = std::string(model).empty() ? "" : "_llama";
  const auto whole = checkpointed_job(fmt::format("ckpt_regroup_whole{}{}", saved, arch), saved, 5, 2, 4, 2, model);
  const auto whole_run = run_ok(whole, {});
  const auto other = checkpointed_job(fmt::format("ckpt_regroup_{}_{}{}", saved, resumed_with, arch), resumed_with,
                                      5, 2, 4, 2, model);
  const auto resumed = run_ok(other, {"--resume", step_dir(whole, 2).string()});
  CHECK(resumed.output.find(fmt::format("saved with {} stage(s)", saved)) != std::string::npos);
  check_resumed_losses(whole_run, resumed, 3, 5);
  check_same_state(step_dir(whole, 5), step_dir(other, 5), 1e-4);
}

TEST_CASE("a checkpoint resumes across tensor-parallel sizes and across dp with the distributed optimizer") {
  // Each tp rank writes its own shards (t > 1) or the unit files hold whole tensors (t = 1); each rank of the resumed
  // job reads the saved shards overlapping its own: 2 -> 1 and 1 -> 2 (whole files, as every earlier ppctl wrote,
  // read at t 2) at pp 2, 2 -> 4 at pp 1 (a gpt2 of 4 heads), and tp 2 x dp 2 x pp 2 with the distributed optimizer
  // (its moments gathered over dp first) -> tp 1 x pp 2.
  struct Case {
    int64_t stages, saved_t, resumed_t;
    std::string saved_pipeline, saved_optimizer, model;
  };
  const auto c = GENERATE(Case{2, 2, 1, "", "", ", arch: llama, kv_heads: 2, ffn_hidden: 48"},
                          Case{2, 1, 2, "", "", ""}, Case{1, 2, 4, "", "", ""},
                          Case{2, 2, 1, ", data_parallel: 2", ", distributed: true", ""});
  INFO("t " << c.saved_t << " -> " << c.resumed_t << c.saved_pipeline << c.saved_optimizer << c.model);
  const auto job_of = [&](const std::string& name, int64_t t, const std::string& pipeline,
                          const std::string& optimizer) {
    // dp 2 runs half the microbatches per replica: the same global batch of 8 sequences as dp 1.
    const int64_t microbatches = pipeline.empty() ? 4 : 2;
    Job job{c.stages, microbatches, 2, 5};
    job.model = c.model;
    job.train = ", log_interval: 1";
    job.optimizer = optimizer;
    job.pipeline = fmt::format(", tensor_parallel: {}{}", t, pipeline);
    job.sections = "checkpoint: {dir: ckpt, interval: 2, keep: 10}\n";
    return make_job(job, fresh_dir(name));
  };
  const auto whole = job_of(fmt::format("ckpt_tp_whole{}", c.saved_t), c.saved_t, c.saved_pipeline, c.saved_optimizer);
  const auto whole_run = run_ok(whole, {});
  const auto other = job_of(fmt::format("ckpt_tp_{}_{}", c.saved_t, c.resumed_t), c.resumed_t, "", "");
  const auto resumed = run_ok(other, {"--resume", step_dir(whole, 2).string()});
  check_resumed_losses(whole_run, resumed, 3, 5);
  check_same_state(step_dir(whole, 5), step_dir(other, 5), 1e-4, /*skip_key_bias=*/true);
}

TEST_CASE("a worker killed while writing a checkpoint leaves the previous one loadable") {
  // Each rank of the 2-stage job writes 3 unit files; kill after a random number of them.
  std::random_device device;
  const int64_t files = 1 + static_cast<int64_t>(device() % 3);
  INFO("killed after " << files << " file(s) of step 4's checkpoint");
  const auto spec = checkpointed_job("ckpt_killed", 2, 6, 2);
  const auto crashed = run_job(spec, {"--inject-crash-in-checkpoint", fmt::format("4:{}", files)});
  INFO(crashed.output);
  REQUIRE(crashed.result.exit_code != 0);
  const auto dir = spec.parent_path() / "ckpt";
  CHECK(checkpoint::resolve_checkpoint(dir) == dir / "step-00000002");
  CHECK(!fs::exists(step_dir(spec, 4)));
  CHECK(fs::exists(dir / "step-00000004.partial"));
  const auto meta = checkpoint::read_checkpoint_meta(checkpoint::resolve_checkpoint(dir));
  CHECK(meta.step == 2);

  // The resumed run ends where an uninterrupted one does, and the leftover is cleaned up.
  run_ok(spec, {"--resume", checkpoint::resolve_checkpoint(dir).string()});
  const auto whole = checkpointed_job("ckpt_killed_whole", 2, 6, 2);
  run_ok(whole, {});
  check_same_state(step_dir(whole, 6), step_dir(spec, 6), 0.0);
  CHECK(!fs::exists(dir / "step-00000004.partial"));
}

TEST_CASE("checkpoints: latest points to the newest, older ones beyond keep are deleted") {
  Job job{2, 4, 2, 5};
  job.sections = "checkpoint: {dir: ckpt, interval: 1, keep: 2}\n";
  const auto spec = make_job(job, fresh_dir("ckpt_keep"));
  run_ok(spec, {});
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(spec.parent_path() / "ckpt")) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"latest", "step-00000004", "step-00000005"});
  CHECK(core::read_file(spec.parent_path() / "ckpt" / "latest") == "step-00000005\n");
}

TEST_CASE("missing, partial, corrupt and mismatched checkpoints are refused, naming the file") {
  const auto spec_path = checkpointed_job("ckpt_bad", 2, 4, 2);
  run_ok(spec_path, {});
  const auto dir = spec_path.parent_path() / "ckpt";
  const auto good = step_dir(spec_path, 4);
  const auto spec = config::load_job_spec(spec_path.string());

  SECTION("a folder without a checkpoint") {
    const auto text = message_of<CheckpointError>(
        [&] { checkpoint::resolve_checkpoint(spec_path.parent_path()); }, "no checkpoint");
    CHECK(text.find("holds neither latest nor meta.json") != std::string::npos);
  }
  SECTION("an incomplete (.partial) folder") {
    fs::create_directories(dir / "step-00000006.partial");
    const auto text = message_of<CheckpointError>(
        [&] { checkpoint::resolve_checkpoint(dir / "step-00000006.partial"); }, "partial");
    CHECK(text.find("incomplete checkpoint") != std::string::npos);
  }
  SECTION("latest naming a folder that is gone") {
    fs::remove_all(good);
    const auto text =
        message_of<CheckpointError>([&] { checkpoint::resolve_checkpoint(dir); }, "dangling latest");
    CHECK(text.find("names 'step-00000004', which is not a complete checkpoint") != std::string::npos);
    CHECK(text.find("step-00000002") != std::string::npos);  // offered instead
  }
  SECTION("a truncated unit file") {
    fs::resize_file(good / "block2.pt", fs::file_size(good / "block2.pt") / 2);
    const auto text = message_of<CheckpointError>([&] { checkpoint::read_checkpoint_meta(good); }, "truncated");
    CHECK(text.find((good / "block2.pt").string()) != std::string::npos);
  }
  SECTION("a unit file altered in place: the launcher's check and the workers refuse it") {
    auto bytes = core::read_file(good / "head.pt");
    bytes[bytes.size() / 2] ^= 0x5a;
    core::write_file_atomically(good / "head.pt", bytes);
    const auto meta = checkpoint::read_checkpoint_meta(good);  // sizes still match
    CHECK(message_of<CheckpointError>([&] { checkpoint::verify_checkpoint_files(good, meta); }, "altered")
              .find((good / "head.pt").string() + " does not match the checksum") != std::string::npos);
    const auto run = run_job(spec_path, {"--steps", "6", "--resume", good.string()});
    INFO(run.output);
    CHECK(run.result.exit_code != 0);
    CHECK(run.output.find((good / "head.pt").string() + " does not match the checksum") != std::string::npos);
  }
  SECTION("a meta.json edited to impossible values") {
    auto text = core::read_file(good / "meta.json");
    const auto at = text.find("\"step\": 4");
    REQUIRE(at != std::string::npos);
    text.replace(at, 9, "\"step\": -5");
    core::write_file_atomically(good / "meta.json", text);
    CHECK(message_of<CheckpointError>([&] { checkpoint::read_checkpoint_meta(good); }, "negative step")
              .find("holds values no checkpoint has (step -5") != std::string::npos);
  }
  SECTION("a checkpoint folder that cannot be written is refused before training") {
    CHECK(message_of<CheckpointError>(
              [&] { checkpoint::check_checkpoint_dir_writable(spec_path / "under-a-file"); }, "unwritable")
              .find("cannot hold checkpoints") != std::string::npos);
    CHECK_NOTHROW(checkpoint::check_checkpoint_dir_writable(dir / "fresh"));
    CHECK(fs::is_empty(dir / "fresh"));  // the probe is gone
  }
  SECTION("another model shape or global batch, or no step left") {
    const auto meta = checkpoint::read_checkpoint_meta(good);
    auto wider = spec;
    wider.model.hidden = 64;
    CHECK(message_of<CheckpointError>([&] { train::check_resumable(meta, wider, 8, 10, good); }, "shape")
              .find("model.hidden is 32 in the checkpoint") != std::string::npos);
    CHECK(message_of<CheckpointError>([&] { train::check_resumable(meta, spec, 16, 10, good); }, "batch")
              .find("the global batch is 16 sequences per step") != std::string::npos);
    CHECK(message_of<CheckpointError>([&] { train::check_resumable(meta, spec, 8, 4, good); }, "done")
              .find("nothing is left to train") != std::string::npos);
    auto reseeded = spec;
    reseeded.train.seed = 99;
    CHECK(message_of<CheckpointError>([&] { train::check_resumable(meta, reseeded, 8, 10, good); }, "seed")
              .find("train.seed is 17 in the checkpoint") != std::string::npos);
    auto other_split = spec;
    other_split.data.eval_fraction = 0.3;
    CHECK(message_of<CheckpointError>([&] { train::check_resumable(meta, other_split, 8, 10, good); }, "split")
              .find("data.eval_fraction is 0 in the checkpoint") != std::string::npos);
    auto untied = spec;
    untied.model.tie_embeddings = false;
    CHECK(message_of<CheckpointError>([&] { train::check_resumable(meta, untied, 8, 10, good); }, "tied")
              .find("model.tie_embeddings is true in the checkpoint") != std::string::npos);
    CHECK_NOTHROW(train::check_resumable(meta, spec, 8, 5, good));
  }
  SECTION("another architecture or MLP / key-value width") {
    const auto meta = checkpoint::read_checkpoint_meta(good);
    CHECK(meta.model.arch == config::Arch::Gpt2);
    CHECK(config::ffn_hidden_of(meta.model) == 4 * meta.model.hidden);
    auto llama = spec;
    llama.model.arch = config::Arch::Llama;
    CHECK(message_of<CheckpointError>([&] { train::check_resumable(meta, llama, 8, 10, good); }, "arch")
              .find("model.arch is gpt2 in the checkpoint") != std::string::npos);
    auto wider_mlp = spec;
    wider_mlp.model.ffn_hidden = 3 * spec.model.hidden;
    CHECK(message_of<CheckpointError>([&] { train::check_resumable(meta, wider_mlp, 8, 10, good); }, "ffn")
              .find(fmt::format("model.ffn_hidden is {} in the checkpoint", 4 * spec.model.hidden)) !=
          std::string::npos);
    auto grouped = spec;
    grouped.model.kv_heads = 1;
    CHECK(message_of<CheckpointError>([&] { train::check_resumable(meta, grouped, 8, 10, good); }, "kv")
              .find(fmt::format("model.kv_heads is {} in the checkpoint", spec.model.heads)) != std::string::npos);
    auto explicit_rule = spec;  // the rule written out is the same model
    explicit_rule.model.ffn_hidden = 4 * spec.model.hidden;
    CHECK_NOTHROW(train::check_resumable(meta, explicit_rule, 8, 5, good));
  }
  SECTION("a meta.json from before model.arch reads as gpt2; an unknown arch is refused") {
    auto text = core::read_file(good / "meta.json");
    auto j = nlohmann::json::parse(text);
    for (const char* key : {"arch", "activation", "norm_eps", "rope_theta", "ffn_hidden", "kv_heads"}) {
      REQUIRE(j["model"].contains(key));
      j["model"].erase(key);
    }
    core::write_file_atomically(good / "meta.json", j.dump(2));
    const auto old = checkpoint::read_checkpoint_meta(good);
    CHECK(old.model.arch == config::Arch::Gpt2);
    CHECK(old.model.activation == config::Activation::Gelu);
    CHECK_NOTHROW(train::check_resumable(old, spec, 8, 5, good));
    j["model"]["arch"] = "bert";
    core::write_file_atomically(good / "meta.json", j.dump(2));
    CHECK(message_of<CheckpointError>([&] { checkpoint::read_checkpoint_meta(good); }, "unknown arch")
              .find("names an unknown model.arch 'bert'") != std::string::npos);
  }
}

TEST_CASE("parameters map to per-layer checkpoint units by global name") {
  CHECK(checkpoint::checkpoint_unit("tok_embed.weight") == "embedding");
  CHECK(checkpoint::checkpoint_unit("pos_embed.weight") == "embedding");
  CHECK(checkpoint::checkpoint_unit("block12.fc1.bias") == "block12");
  CHECK(checkpoint::checkpoint_unit("lm_head.weight") == "head");
  CHECK(checkpoint::checkpoint_unit("ln_f.weight") == "head");
  CHECK_THROWS_AS(checkpoint::checkpoint_unit("blockx.weight"), InternalError);
  CHECK(checkpoint::checkpoint_files(2) ==
        std::vector<std::string>{"embedding.pt", "block0.pt", "block1.pt", "head.pt"});
}

namespace {

/// The whole tensor of `name` joined by hand from the shard files of a checkpoint written at t = 2 (each shard's
/// parts cut into thirds for qkv, then part by part rank 0's piece and rank 1's): an oracle apart from UnitReader.
torch::Tensor joined_by_hand(const fs::path& step, const std::string& name) {
  const auto unit = checkpoint::checkpoint_unit(name);
  const auto split = model::parameter_split(name);
  const auto entries = [&](const std::string& file) {
    const auto bytes = core::read_file(step / file);
    return torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
  };
  if (split.replicated()) return entries(unit + ".replicated.pt").at("param/" + name).toTensor();
  const auto zero = entries(unit + ".tp0-of-2.pt").at("param/" + name).toTensor();
  const auto one = entries(unit + ".tp1-of-2.pt").at("param/" + name).toTensor();
  std::vector<torch::Tensor> pieces;
  const auto zeros = zero.chunk(split.parts, split.dim), ones = one.chunk(split.parts, split.dim);
  for (int64_t part = 0; part < split.parts; ++part) {
    pieces.push_back(zeros[static_cast<size_t>(part)]);
    pieces.push_back(ones[static_cast<size_t>(part)]);
  }
  return torch::cat(pieces, split.dim);
}

/// The tensors of an exported folder's model.safetensors by Hugging Face name, fp32.
std::map<std::string, torch::Tensor> exported(const fs::path& folder) {
  const interop::SafetensorsFile file(folder / "model.safetensors");
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, info] : file.tensors()) {
    auto values = file.read_f32(name);
    out[name] = torch::from_blob(values.data(), info.shape, torch::kFloat).clone();
  }
  return out;
}

}  // namespace

TEST_CASE("at tp 2 each rank writes only its shards; export joins them into the tp 1 model's whole tensors") {
  // tp 2 x pp 2, tied GPT-2 (the head's copy on stage 1), 2 steps; the same job at tp 1.
  const auto job_at = [](int64_t t) {
    Job job{2, 4, 2, 2};
    job.pipeline = fmt::format(", tensor_parallel: {}", t);
    job.sections = "checkpoint: {dir: ckpt}\n";
    return make_job(job, fresh_dir(fmt::format("ckpt_shards_tp{}", t)));
  };
  const auto sharded = job_at(2), whole = job_at(1);
  run_ok(sharded, {});
  run_ok(whole, {});
  const auto step = step_dir(sharded, 2);

  // The files: every unit's two shard files and its replicated file, meta.json; no sums left.
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(step)) names.insert(entry.path().filename().string());
  auto expected = checkpoint::checkpoint_files(4, 2);
  std::set<std::string> expected_names(expected.begin(), expected.end());
  expected_names.insert("meta.json");
  CHECK(names == expected_names);
  const auto meta = checkpoint::read_checkpoint_meta(step);
  CHECK(meta.tensor_parallel == 2);
  CHECK(nlohmann::json::parse(core::read_file(step / "meta.json")).at("version") == 2);
  const auto t1_json = nlohmann::json::parse(core::read_file(step_dir(whole, 2) / "meta.json"));
  CHECK(t1_json.at("version") == 1);  // t = 1: the whole-file format every earlier ppctl wrote and reads
  CHECK_FALSE(t1_json.contains("tensor_parallel"));

  // Each shard file holds only split parameters, each of its rank's shard shape (no gathered whole tensor); the
  // replicated file only replicated ones, whole.
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : interop::hf_tensors(meta.model)) shapes[t.ppctl_name] = t.ppctl_shape;
  shapes["lm_head.weight"] = shapes.at("tok_embed.weight");
  for (const auto& file : expected) {
    INFO(file);
    const bool replicated = file.find(".replicated.") != std::string::npos;
    const int64_t rank = file.find(".tp1-of-2.") != std::string::npos ? 1 : 0;
    const auto bytes = core::read_file(step / file);
    for (const auto& item : torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict()) {
      const auto key = item.key().toStringRef();
      if (key.rfind("step/", 0) == 0) continue;
      const auto name = key.substr(key.find('/') + 1);
      INFO(key);
      const auto split = model::parameter_split(name);
      CHECK(split.replicated() == replicated);
      const auto want = replicated ? shapes.at(name)
                                   : model::take_shard(torch::empty(shapes.at(name), torch::kMeta), split, 2, rank)
                                         .sizes()
                                         .vec();
      CHECK(item.value().toTensor().sizes().vec() == want);
    }
  }
  // A block's two shard files are the same size, each under 0.6 of the block's split bytes (pickle framing aside).
  for (int64_t b = 0; b < 4; ++b) {
    const auto zero = fs::file_size(step / fmt::format("block{}.tp0-of-2.pt", b));
    const auto one = fs::file_size(step / fmt::format("block{}.tp1-of-2.pt", b));
    CHECK(zero == one);
    CHECK(static_cast<double>(zero) < 0.6 * static_cast<double>(zero + one));
  }

  // Export: the shard files joined into whole tensors, equal to the shards joined by hand; and to the tp 1 run's
  // export within float rounding (the two runs add in other orders; GPT-2's key bias, see without_key_bias).
  const auto out = sharded.parent_path() / "hf";
  const auto out_whole = whole.parent_path() / "hf";
  interop::export_hf(step, out);
  interop::export_hf(step_dir(whole, 2), out_whole);
  const auto from_shards = exported(out);
  const auto from_whole = exported(out_whole);
  CHECK(from_shards.size() == from_whole.size());
  for (const auto& t : interop::hf_tensors(meta.model)) {
    if (t.tied_copy) continue;
    INFO(t.ppctl_name);
    auto by_hand = joined_by_hand(step, t.ppctl_name);
    if (t.layout == interop::Layout::Transpose) by_hand = by_hand.t();
    const auto& value = from_shards.at(t.hf_names.front());
    CHECK(torch::equal(value, by_hand));
    CHECK(torch::allclose(without_key_bias(t.ppctl_name, value),
                          without_key_bias(t.ppctl_name, from_whole.at(t.hf_names.front())), 1e-4, 1e-6));
  }

  // A shard file altered without a change of size: export names it (each file's checksum is compared as it is
  // read) and writes nothing.
  const auto altered = step / "block1.tp1-of-2.pt";
  {
    std::fstream file(altered, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(static_cast<std::streamoff>(fs::file_size(altered) / 2));
    const char byte = static_cast<char>(file.peek() ^ 0x5A);
    file.seekp(static_cast<std::streamoff>(fs::file_size(altered) / 2));
    file.put(byte);
  }
  const auto refused = sharded.parent_path() / "hf-refused";
  CHECK_THROWS_WITH(interop::export_hf(step, refused),
                    Catch::Matchers::ContainsSubstring("block1.tp1-of-2.pt") &&
                        Catch::Matchers::ContainsSubstring("checksum"));
  CHECK_FALSE(fs::exists(refused));
}
