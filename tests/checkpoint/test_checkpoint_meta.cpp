// Tests for checkpoint/checkpoint_meta: meta.json round trip and checked parsing, and the fix a corrupt
// checkpoint's message offers. Torch-free (the resume check's learning-rate part: tests/train/test_resume.cpp).
#include <catch2/catch_test_macros.hpp>
#include <fmt/format.h>

#include <climits>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint_meta.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "support/checkpoint_meta.hpp"
#include "support/temp_dir.hpp"

namespace ppctl {
using test::has;
using test::meta_of;
using test::refusal;
using test::spec_of;

TEST_CASE("meta.json round trip keeps every field, the schedule included") {
  const test::TempDir dir;
  const auto spec = spec_of(dir, 10, "lr: 0.003, lr_schedule: cosine, min_lr: 0.0003, warmup_steps: 2");
  const auto meta = meta_of(spec, 4, 10);
  const auto back = checkpoint::parse_checkpoint_meta(checkpoint::checkpoint_meta_text(meta), dir.path / "meta.json");
  CHECK(back.step == 4);
  CHECK(back.next_sample == 32);
  CHECK(back.files == meta.files);
  REQUIRE(back.schedule.has_value());
  CHECK(back.schedule->lr_schedule == config::LrSchedule::Cosine);
  CHECK(back.schedule->lr == 0.003);
  CHECK(back.schedule->min_lr == 0.0003);
  CHECK(back.schedule->warmup_steps == 2);
  CHECK(back.schedule->steps == 10);
}

TEST_CASE("meta.json records model.init_from (the folder an export copies the tokenizer from), absent when empty") {
  const test::TempDir dir;
  auto meta = meta_of(spec_of(dir, 10, "lr: 0.001"), 4, 10);
  CHECK(nlohmann::json::parse(checkpoint::checkpoint_meta_text(meta))["model"].count("init_from") == 0);
  CHECK(checkpoint::parse_checkpoint_meta(checkpoint::checkpoint_meta_text(meta), "meta.json").model.init_from.empty());
  meta.model.init_from = "/models/qwen2.5-0.5b";
  const auto text = checkpoint::checkpoint_meta_text(meta);
  CHECK(nlohmann::json::parse(text)["model"]["init_from"] == "/models/qwen2.5-0.5b");
  CHECK(checkpoint::parse_checkpoint_meta(text, "meta.json").model.init_from == "/models/qwen2.5-0.5b");
  auto j = nlohmann::json::parse(text);
  j["model"]["init_from"] = 7;  // a damaged file: refused as corrupt, not an nlohmann exception
  CHECK(has(refusal([&] { checkpoint::parse_checkpoint_meta(j.dump(), "ckpt/meta.json"); }), "ckpt/meta.json"));
}

TEST_CASE("meta.json of a tensor-parallel checkpoint: version 2 with tensor_parallel; t = 1 stays version 1") {
  const test::TempDir dir;
  auto meta = meta_of(spec_of(dir, 10, "lr: 0.001"), 4, 10);
  const auto whole = nlohmann::json::parse(checkpoint::checkpoint_meta_text(meta));
  CHECK(whole["version"] == 1);  // the whole-file format earlier ppctl versions write and read
  CHECK(whole.count("tensor_parallel") == 0);
  CHECK(checkpoint::parse_checkpoint_meta(whole.dump(), "meta.json").tensor_parallel == 1);
  meta.tensor_parallel = 2;
  const auto sharded = nlohmann::json::parse(checkpoint::checkpoint_meta_text(meta));
  CHECK(sharded["version"] == 2);
  CHECK(sharded["tensor_parallel"] == 2);
  CHECK(checkpoint::parse_checkpoint_meta(sharded.dump(), "meta.json").tensor_parallel == 2);
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = sharded;
    edit(j);
    return refusal([&] { checkpoint::parse_checkpoint_meta(j.dump(), "ckpt/meta.json"); });
  };
  CHECK(has(refused([](auto& j) { j["tensor_parallel"] = 1; }), "version 2 is written at tensor_parallel 2 or more"));
  CHECK(has(refused([](auto& j) { j["tensor_parallel"] = INT64_MAX; }), "unit files listed, which no checkpoint has"));
  CHECK(has(refused([](auto& j) { j.erase("tensor_parallel"); }), "cannot be read as checkpoint metadata"));
  CHECK(has(refused([](auto& j) { j["version"] = 3; }), "is not a version 1 or 2 ppctl checkpoint"));
}

TEST_CASE("malformed meta.json values are refused with a CheckpointError naming the file") {
  const test::TempDir dir;
  const auto spec = spec_of(dir, 10, "lr: 0.001");
  const auto good = nlohmann::json::parse(checkpoint::checkpoint_meta_text(meta_of(spec, 4, 10)));
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = good;
    edit(j);
    return refusal([&] { checkpoint::parse_checkpoint_meta(j.dump(), "ckpt/meta.json"); });
  };
  // Kinds the fuzz target found or could find: numbers that do not convert, products that overflow,
  // sums that overflow, checksums out of range, layer counts no file list supports, bad schedules.
  CHECK(has(refused([](auto& j) { j["step"] = 1e30; }), "holds 1e+30 where an integer belongs"));
  CHECK(has(refused([](auto& j) { j["model"]["layers"] = 2.5; }), "where an integer belongs"));
  CHECK(has(refused([](auto& j) {
              j["step"] = int64_t{1} << 62;
              j["sequences_per_step"] = 8;
            }),
            "holds values no checkpoint has"));
  CHECK(has(refused([](auto& j) {
              j["data"]["sources"] = {"a", "b"};
              j["data"]["counts"] = {INT64_MAX, 33};
            }),
            "per-source counts do not sum"));
  CHECK(has(refused([](auto& j) { j["files"]["head.pt"]["fnv1a64"] = "1ffffffffffffffff"; }), "malformed checksum"));
  CHECK(has(refused([](auto& j) { j["files"]["head.pt"]["fnv1a64"] = "12zz"; }), "malformed checksum"));
  CHECK(has(refused([](auto& j) { j["model"]["layers"] = INT64_MAX; }), "fewer than model.layers"));
  CHECK(has(refused([](auto& j) { j["schedule"]["min_lr"] = 5.0; }), "a learning-rate schedule no run has"));
  CHECK(has(refused([](auto& j) { j["schedule"]["lr_schedule"] = "step"; }), "unknown schedule.lr_schedule 'step'"));
  CHECK(has(refused([](auto& j) { j = nlohmann::json::array(); }), "cannot be read as checkpoint metadata"));
  CHECK(has(refusal([] { checkpoint::parse_checkpoint_meta("{\"format\": ", "ckpt/meta.json"); }), "ckpt/meta.json"));
}

}  // namespace ppctl

namespace ppctl {
namespace {

/// The message throw_corrupt_checkpoint gives for `file`.
std::string corrupt_message(const std::filesystem::path& file) {
  try {
    checkpoint::throw_corrupt_checkpoint(file, "is damaged");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a corrupt checkpoint's fix names another checkpoint beside it, or says there is none", "[checkpoint]") {
  const test::TempDir dir;
  const auto make = [&](const std::string& name, bool complete) {
    std::filesystem::create_directories(dir.path / name);
    if (complete) std::ofstream(dir.path / name / "meta.json") << "{}";
  };
  make("step-00000004", true);
  const auto file = dir.path / "step-00000004" / "meta.json";
  CHECK(corrupt_message(file).find("no other checkpoint is beside " + (dir.path / "step-00000004").string()) !=
        std::string::npos);
  make("step-00000006", true);  // only a newer one
  CHECK(corrupt_message(file).find("--resume " + (dir.path / "step-00000006").string()) != std::string::npos);
  make("step-00000001", true);
  make("step-00000002", true);
  make("step-00000003", false);  // no meta.json: not a complete checkpoint
  make("other", true);
  const std::string message = corrupt_message(file);
  CHECK(message.find("checkpoint file " + file.string() + " is damaged") != std::string::npos);
  CHECK(message.find("--resume " + (dir.path / "step-00000002").string() + ")") != std::string::npos);
}

}  // namespace ppctl
