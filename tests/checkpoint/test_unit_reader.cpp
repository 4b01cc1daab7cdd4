// Tests for checkpoint/unit_reader: a checkpoint's unit files written at tensor_parallel 1 (whole files, the format of
// every earlier ppctl), 2 and 3, read back at sizes 1 to 4 as each rank's shard: equal to model::take_shard of the
// whole tensor for every split kind (vocabulary 37, fused qkv, dim-1 row-parallel weights, replicated norms), from
// only the files that hold part of the shard; altered and incomplete files are refused naming the file.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <fmt/format.h>
#include <torch/serialize.h>

#include <filesystem>
#include <set>

#include "checkpoint/unit_files.hpp"
#include "checkpoint/unit_reader.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "model/tensor_parallel.hpp"
#include "plan/shard_pieces.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace ppctl;

namespace {

struct Param {
  std::string unit, name;
  std::vector<int64_t> shape;
};

/// One of each split: vocabulary rows (37: uneven at 2, 3 and 4), replicated positions and norms, fused qkv (3
/// parts of 12 rows, uneven at 5), column-parallel fc1, row-parallel (dim 1) proj and fc2, a row-parallel bias.
const std::vector<Param> kParams{
    {"embedding", "tok_embed.weight", {37, 4}}, {"embedding", "pos_embed.weight", {5, 4}},
    {"block0", "block0.ln1.weight", {4}},       {"block0", "block0.qkv.weight", {36, 4}},
    {"block0", "block0.qkv.bias", {36}},        {"block0", "block0.proj.weight", {4, 12}},
    {"block0", "block0.proj.bias", {4}},        {"block0", "block0.fc1.weight", {24, 4}},
    {"block0", "block0.fc2.weight", {4, 24}},   {"head", "ln_f.weight", {4}},
    {"head", "lm_head.weight", {37, 4}}};

/// A parameter's whole tensor (distinct values everywhere) and its first moment.
torch::Tensor whole_of(const Param& p, double scale = 1.0) {
  return torch::arange(c10::multiply_integers(p.shape), torch::kFloat).reshape(p.shape) * scale + 0.5;
}

/// Writes the unit files of kParams as save_checkpoint lays them out at `t` (t = 1: whole files, as every ppctl
/// before tensor parallelism wrote) into `dir`; returns the meta with their sizes and checksums.
checkpoint::CheckpointMeta write_checkpoint(const fs::path& dir, int64_t t) {
  checkpoint::CheckpointMeta meta;
  meta.tensor_parallel = t;
  std::map<std::string, c10::Dict<std::string, torch::Tensor>> files;
  for (const auto& unit : {"embedding", "block0", "head"}) {
    for (int64_t r = 0; r < t; ++r) files[checkpoint::shard_file(unit, t, r)];
    files[checkpoint::replicated_file(unit, t)];
  }
  for (const auto& p : kParams) {
    const auto split = model::parameter_split(p.name);
    for (int64_t r = 0; r < (split.replicated() ? 1 : t); ++r) {
      auto& dict = files[split.replicated() ? checkpoint::replicated_file(p.unit, t) : checkpoint::shard_file(p.unit, t, r)];
      dict.insert("param/" + p.name, model::take_shard(whole_of(p), split, t, r).clone());
      dict.insert("exp_avg/" + p.name, model::take_shard(whole_of(p, -2.0), split, t, r).clone());
      dict.insert("step/" + p.name, torch::tensor(int64_t{7}, torch::kLong));
    }
  }
  for (const auto& [name, dict] : files) {
    const auto bytes = torch::pickle_save(dict);
    const std::string_view view(bytes.data(), bytes.size());
    core::write_file_atomically(dir / name, view);
    meta.files[name] = {bytes.size(), core::fnv1a64(view)};
  }
  return meta;
}

}  // namespace

TEST_CASE("a unit read at any tensor-parallel size gives take_shard of the whole tensor, from the overlapping files") {
  const int64_t saved = GENERATE(1, 2, 3);
  test::TempDir dir("unit_reader");
  const auto meta = write_checkpoint(dir.path, saved);
  for (int64_t size = 1; size <= 4; ++size) {
    for (int64_t rank = 0; rank < size; ++rank) {
      for (const auto& p : kParams) {
        INFO(p.name << " saved at " << saved << ", read by rank " << rank << " of " << size);
        const auto split = model::parameter_split(p.name);
        checkpoint::UnitReader reader(dir.path, meta);
        const auto value = reader.get(p.unit, "param/" + p.name, p.shape, size, rank);
        CHECK(torch::equal(value, model::take_shard(whole_of(p), split, size, rank)));
        const auto moment = reader.get(p.unit, "exp_avg/" + p.name, p.shape, size, rank);
        CHECK(torch::equal(moment, model::take_shard(whole_of(p, -2.0), split, size, rank)));
        CHECK(reader.get(p.unit, "step/" + p.name, p.shape, size, rank).item<int64_t>() == 7);
        CHECK_FALSE(reader.find(p.unit, "exp_avg_sq/" + p.name, p.shape, size, rank).has_value());
        // Which files were read: only those that hold part of the shard.
        std::set<std::string> expected;
        if (split.replicated()) {
          expected.insert(checkpoint::replicated_file(p.unit, saved));
        } else {
          for (const auto& piece : plan::shard_pieces(p.shape[static_cast<size_t>(split.dim)], split.parts, saved,
                                                      size, rank)) {
            expected.insert(checkpoint::shard_file(p.unit, saved, piece.source));
          }
        }
        const auto& read = reader.files_read();
        CHECK(std::set<std::string>(read.begin(), read.end()) == expected);
        CHECK(read.size() == expected.size());  // each file read once
        if (size == saved && !split.replicated()) {
          CHECK(read == std::vector<std::string>{checkpoint::shard_file(p.unit, saved, rank)});
        }
      }
    }
  }
}

TEST_CASE("a rank's own shard file at the saved size is about 1/t of the unit's split bytes") {
  test::TempDir dir("unit_reader_bytes");
  const auto meta = write_checkpoint(dir.path, 2);
  uint64_t read_by_rank[2] = {0, 0};
  for (int64_t rank = 0; rank < 2; ++rank) {
    checkpoint::UnitReader reader(dir.path, meta);
    reader.get("block0", "param/block0.fc1.weight", {24, 4}, 2, rank);
    read_by_rank[rank] = reader.bytes_read();
  }
  checkpoint::UnitReader whole(dir.path, meta);
  whole.get("block0", "param/block0.fc1.weight", {24, 4}, 1, 0);
  CHECK(whole.bytes_read() == read_by_rank[0] + read_by_rank[1]);
  CHECK(read_by_rank[0] == read_by_rank[1]);  // block0's split parameters divide evenly at 2
}

TEST_CASE("an altered shard file, or one lacking what the other shards hold, is refused naming the file") {
  test::TempDir dir("unit_reader_bad");
  auto meta = write_checkpoint(dir.path, 2);
  const auto file = dir.path / "block0.tp1-of-2.pt";
  SECTION("altered") {
    auto bytes = core::read_file(file);
    bytes[bytes.size() / 2] ^= 0x5a;
    core::write_file_atomically(file, bytes);
    checkpoint::UnitReader reader(dir.path, meta);
    CHECK_THROWS_WITH(reader.get("block0", "param/block0.fc1.weight", {24, 4}, 1, 0),
                      Catch::Matchers::ContainsSubstring(file.string() + " does not match the checksum"));
  }
  SECTION("lacking an entry") {
    const auto bytes = torch::pickle_save(c10::Dict<std::string, torch::Tensor>());
    const std::string_view view(bytes.data(), bytes.size());
    core::write_file_atomically(file, view);
    meta.files["block0.tp1-of-2.pt"] = {bytes.size(), core::fnv1a64(view)};
    checkpoint::UnitReader reader(dir.path, meta);
    CHECK_THROWS_WITH(reader.get("block0", "param/block0.fc1.weight", {24, 4}, 1, 0),
                      Catch::Matchers::ContainsSubstring(file.string() + " lacks param/block0.fc1.weight, which the "
                                                                         "unit's other shard files hold"));
    CHECK(reader.find("block0", "param/block0.fc1.weight", {24, 4}, 2, 0).has_value());  // rank 0 needs only tp0
  }
  SECTION("a shard of another shape") {
    checkpoint::UnitReader reader(dir.path, meta);
    CHECK_THROWS_WITH(reader.get("block0", "param/block0.fc1.weight", {26, 4}, 1, 0),
                      Catch::Matchers::ContainsSubstring("holds param/block0.fc1.weight with shape [12, 4] where the "
                                                         "model's [26, 4] saved at tensor_parallel 2 has [13, 4]"));
  }
}

TEST_CASE("checkpoint file names: whole units at t = 1, t shard files and a replicated file at t > 1") {
  CHECK(checkpoint::checkpoint_files(2) ==
        std::vector<std::string>{"embedding.pt", "block0.pt", "block1.pt", "head.pt"});
  CHECK(checkpoint::checkpoint_files(1, 2) ==
        std::vector<std::string>{"embedding.tp0-of-2.pt", "embedding.tp1-of-2.pt", "embedding.replicated.pt",
                                 "block0.tp0-of-2.pt", "block0.tp1-of-2.pt", "block0.replicated.pt",
                                 "head.tp0-of-2.pt", "head.tp1-of-2.pt", "head.replicated.pt"});
  CHECK_THROWS_AS(checkpoint::shard_file("block0", 2, 2), InternalError);
}
