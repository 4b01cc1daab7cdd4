// Tests for config/foreign_keys: the table of Megatron-LM and torchtitan names points at keys the schema has,
// and a spec that uses such a name gets the ppctl key in its "unknown key" fix, in any section and spelling.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <cctype>
#include <set>
#include <string>
#include <utility>

#include "config/foreign_keys.hpp"
#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "config/schema.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"

using namespace ppctl::config;

namespace {

/// The problems parse_job_spec reports for `yaml` (with a valid data section appended), each a whole line.
std::vector<std::string> problems_of(const std::string& yaml) {
  static const auto dir = [] {
    const auto path = ppctl::test::process_temp_dir("ppctl_foreign_keys_");
    ppctl::test::write_checked(path / "corpus.txt", std::string(100000, 'a') + "\n");
    return path;
  }();
  try {
    parse_job_spec(yaml + "data: {path: corpus.txt}\n", "job.yaml", dir.string());
  } catch (const ppctl::ConfigError& e) {
    return e.problems();
  }
  return {};
}

}  // namespace

TEST_CASE("every foreign name points at a key the schema has, and none is a ppctl key itself") {
  JobSpec spec;
  detail::DataEntries entries;
  const auto sections = detail::schema(spec, entries);
  std::set<std::string> keys, paths;
  for (const auto& section : sections) {
    for (const auto& field : section.fields) {
      keys.insert(field.key);
      paths.insert(section.name + "." + field.key);
    }
  }
  std::set<std::string> names;
  for (const auto& entry : foreign_keys()) {
    INFO(entry.tool << "'s " << entry.name);
    CHECK(names.insert(entry.name).second);  // once each
    const std::set<std::string> tools{"Megatron-LM", "torchtitan", "Hugging Face Trainer", "DeepSpeed", "nanoGPT"};
    CHECK(tools.count(entry.tool) == 1);
    for (const char ch : entry.name) CHECK((std::islower(static_cast<unsigned char>(ch)) || std::isdigit(ch) || ch == '_'));
    CHECK(keys.count(entry.name) == 0);  // a ppctl key is answered with where it belongs, never with this table
    if (entry.target.empty()) {
      CHECK_FALSE(entry.note.empty());  // no counterpart: the note says why and what to do
    } else {
      CHECK(paths.count(entry.target) == 1);
    }
  }
  // The names the issue lists.
  for (const char* name : {"num_layers", "hidden_size", "num_attention_heads", "pipeline_model_parallel_size",
                           "num_microbatches", "global_batch_size", "train_iters", "seq_length", "lr_warmup_iters"}) {
    INFO(name);
    CHECK(names.count(name) == 1);
  }
}

TEST_CASE("a Megatron-LM or torchtitan name in a spec is answered with the ppctl key, wherever it stands") {
  const std::string where = GENERATE("", "model", "pipeline", "train", "runtime");
  const auto place = [&](const std::string& key_value) {
    return where.empty() ? key_value + "\n" : where + ":\n  " + key_value + "\n";
  };
  const auto path = [&](const std::string& key) { return where.empty() ? key : where + "." + key; };
  INFO("under '" << where << "'");
  auto problems = problems_of(place("num_layers: 8"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "job.yaml:" + std::string(where.empty() ? "1" : "2") + ": " + path("num_layers") +
                           ": unknown key (fix: Megatron-LM's num_layers is model.layers)");
  // Megatron's command-line spelling, and a note where the meaning differs.
  problems = problems_of(place("global-batch-size: 512"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("(fix: Megatron-LM's global_batch_size is pipeline.microbatches: ppctl's global batch is "
                         "micro_batch_size x microbatches x data_parallel sequences)") != std::string::npos);
  // No counterpart: what to do instead.
  problems = problems_of(place("context_parallel_degree: 4"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("(fix: torchtitan's context_parallel_degree: ppctl has no context parallelism: remove "
                         "it)") != std::string::npos);
  // A key ppctl has under its own name.
  problems = problems_of(place("tensor_parallel_degree: 4"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("(fix: torchtitan's tensor_parallel_degree is pipeline.tensor_parallel)") !=
        std::string::npos);
  // A name of neither keeps the did-you-mean.
  problems = problems_of(place("num_layer: 8"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("Megatron") == std::string::npos);
}

TEST_CASE("torchtitan's model arguments name the ppctl key, not the nearest spelling") {
  // Before, n_heads got "did you mean 'kv_heads'?" (the closest key by spelling, another meaning) and dim
  // only the list of valid keys.
  for (const auto& [name, target] : {std::pair<std::string, std::string>{"n_heads", "model.heads"},
                                     {"n_kv_heads", "model.kv_heads"},
                                     {"n_layers", "model.layers"},
                                     {"dim", "model.hidden"},
                                     {"max_seq_len", "model.seq_len"}}) {
    INFO(name);
    const auto problems = problems_of("model:\n  " + name + ": 8\n");
    REQUIRE(problems.size() == 1);
    CHECK(problems[0] == "job.yaml:2: model." + name + ": unknown key (fix: torchtitan's " + name + " is " + target +
                             ")");
  }
}

TEST_CASE("Megatron's --bf16 is answered with bf16-params, the mode that keeps bf16 weights as it does") {
  const auto problems = problems_of("train:\n  bf16: true\n");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("(fix: Megatron-LM's bf16 is runtime.precision: write precision: bf16-params") !=
        std::string::npos);
}
