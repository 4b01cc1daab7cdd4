// interop/hf_source_files: what an export takes from model.init_from — the tokenizer files and
// generation_config.json only when the vocabulary is unchanged, token ids only inside the vocabulary, the
// llama family's longest context — and a note for everything it does not take.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "core/atomic_file.hpp"
#include "interop/hf_source_files.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;
using ppctl::interop::copy_source_files;
using ppctl::interop::source_files;

namespace {

/// A Llama folder with vocab_size 320, max_position_embeddings 512, bos 1, eos [2, 400], pad -1, the
/// tokenizer files of a transformers 5 save and a file an export does not copy.
fs::path llama_folder(const fs::path& dir) {
  ppctl::test::write_checked(dir / "config.json", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "vocab_size": 320, "hidden_act": "silu",
    "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": [2, 400], "pad_token_id": -1})");
  ppctl::test::write_checked(dir / "tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}");
  ppctl::test::write_checked(dir / "tokenizer_config.json", "{\"eos_token\": \"</s>\"}");
  ppctl::test::write_checked(dir / "generation_config.json", "{\"bos_token_id\": 1}");
  ppctl::test::write_checked(dir / "README.md", "not copied");
  return dir;
}

/// The checkpoint's model of a run from `folder` (the fields the loader would take from its config.json).
ppctl::config::ModelSpec model_from(const fs::path& folder) {
  ppctl::config::ModelSpec m;
  m.arch = ppctl::config::Arch::Llama;
  m.vocab_size = 320;
  m.hidden = 64;
  m.heads = 4;
  m.layers = 2;
  m.seq_len = 64;  // trained shorter than the folder's 512
  m.init_from = folder.string();
  return m;
}

}  // namespace

TEST_CASE("an unchanged vocabulary: the tokenizer files, the ids inside it and the longest context") {
  const ppctl::test::TempDir dir;
  const auto folder = llama_folder(dir.path / "hf");
  const auto source = source_files(model_from(folder));
  CHECK(source.folder == folder);
  CHECK(source.files == std::vector<std::string>{"tokenizer.json", "tokenizer_config.json", "generation_config.json"});
  CHECK(source.keys.token_ids.bos.ids == std::vector<int64_t>{1});
  CHECK_FALSE(source.keys.token_ids.bos.list);
  CHECK(source.keys.token_ids.eos.ids == std::vector<int64_t>{2});  // 400 >= 320 dropped, still a list
  CHECK(source.keys.token_ids.eos.list);
  CHECK(source.keys.token_ids.pad.ids.empty());
  CHECK(source.keys.max_position_embeddings == 512);
  REQUIRE(source.notes.size() == 2);
  CHECK_THAT(source.notes[0], ContainsSubstring("eos_token_id 400 lies outside the vocabulary [0, 320)"));
  CHECK_THAT(source.notes[1], ContainsSubstring("pad_token_id -1"));

  const auto out = dir.path / "out";
  fs::create_directory(out);
  copy_source_files(source, out);
  CHECK(ppctl::core::read_file(out / "tokenizer.json") == ppctl::core::read_file(folder / "tokenizer.json"));
  CHECK(ppctl::core::read_file(out / "generation_config.json") == "{\"bos_token_id\": 1}");
  CHECK_FALSE(fs::exists(out / "README.md"));
  CHECK_FALSE(fs::exists(out / "config.json"));  // the export writes its own
}

TEST_CASE("a changed vocabulary: no tokenizer files and no ids, and a note naming both sizes and the files") {
  const ppctl::test::TempDir dir;
  const auto folder = llama_folder(dir.path / "hf");
  auto model = model_from(folder);
  model.vocab_size = 256;
  const auto source = source_files(model);
  CHECK(source.files.empty());
  CHECK(source.keys.token_ids.bos.ids.empty());
  CHECK(source.keys.token_ids.eos.ids.empty());
  CHECK(source.keys.max_position_embeddings == 512);  // the context does not depend on the vocabulary
  REQUIRE(source.notes.size() == 1);
  CHECK_THAT(source.notes[0], ContainsSubstring("vocab_size 320 but the model has vocab_size 256"));
  CHECK_THAT(source.notes[0], ContainsSubstring("tokenizer.json, tokenizer_config.json, generation_config.json"));
  CHECK_THAT(source.notes[0], ContainsSubstring((folder / "config.json").string()));
}

TEST_CASE("another architecture in the folder now: its context is not taken") {
  const ppctl::test::TempDir dir;
  const auto folder = llama_folder(dir.path / "hf");
  auto model = model_from(folder);
  model.arch = ppctl::config::Arch::Qwen2;
  CHECK(source_files(model).keys.max_position_embeddings == 0);
  model.arch = ppctl::config::Arch::Gpt2;  // GPT-2's n_positions is wpe's rows: never the folder's
  CHECK(source_files(model).keys.max_position_embeddings == 0);
}

TEST_CASE("no init_from, a folder gone or unreadable: nothing taken, one note, no exception") {
  const ppctl::test::TempDir dir;
  ppctl::config::ModelSpec scratch;
  const auto none = source_files(scratch);
  CHECK(none.files.empty());
  REQUIRE(none.notes.size() == 1);
  CHECK_THAT(none.notes[0], ContainsSubstring("records no model.init_from"));

  const auto gone = source_files(model_from(dir.path / "gone"));
  CHECK(gone.files.empty());
  REQUIRE(gone.notes.size() == 1);
  CHECK_THAT(gone.notes[0], ContainsSubstring("cannot be read again"));
  CHECK_THAT(gone.notes[0], ContainsSubstring((dir.path / "gone" / "config.json").string()));

  ppctl::test::write_checked(dir.path / "bad" / "config.json", "{\"architectures\": [\"BertForMaskedLM\"]}");
  ppctl::test::write_checked(dir.path / "bad" / "tokenizer.json", "{}");
  const auto bad = source_files(model_from(dir.path / "bad"));
  CHECK(bad.files.empty());
  REQUIRE(bad.notes.size() == 1);
  CHECK_THAT(bad.notes[0], ContainsSubstring("BertForMaskedLM"));
}

TEST_CASE("a folder without tokenizer files: a note says the export has none") {
  const ppctl::test::TempDir dir;
  const auto folder = llama_folder(dir.path / "hf");
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) fs::remove(folder / name);
  const auto source = source_files(model_from(folder));
  CHECK(source.files.empty());
  CHECK(source.keys.token_ids.bos.ids == std::vector<int64_t>{1});
  CHECK_THAT(source.notes.back(), ContainsSubstring("holds none of tokenizer.json"));
}
