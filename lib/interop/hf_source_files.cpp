// The export's files and config.json keys from model.init_from: chosen by the vocabulary, then copied.
#include "interop/hf_source_files.hpp"

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/echo.hpp"
#include "core/error.hpp"

namespace ppctl::interop {
namespace fs = std::filesystem;

const std::vector<std::string>& copied_model_files() {
  static const std::vector<std::string> names{
      "tokenizer.json",      "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
      "vocab.json",          "merges.txt",            "tokenizer.model",         "chat_template.jinja",
      "chat_template.json",  "generation_config.json"};
  return names;
}

namespace {

/// The value of model field `key` as config.json gave it, or empty.
std::string field(const config::HfModelConfig& hf, const std::string& key) {
  for (const auto& f : hf.fields) {
    if (f.key == key) return f.value;
  }
  return "";
}

/// `id` without the ids outside [0, vocab_size), each dropped one noted.
config::HfTokenId in_vocabulary(const config::HfTokenId& id, const char* key, int64_t vocab_size,
                                const fs::path& file, std::vector<std::string>& notes) {
  config::HfTokenId kept{{}, id.list};
  for (const int64_t value : id.ids) {
    if (value >= 0 && value < vocab_size) {
      kept.ids.push_back(value);
    } else {
      notes.push_back(fmt::format("{}: {} {} lies outside the vocabulary [0, {}): the export's config.json "
                                  "does not name it",
                                  core::echo_label(file.string()), key, value, vocab_size));
    }
  }
  return kept;
}

}  // namespace

SourceFiles source_files(const config::ModelSpec& model) {
  SourceFiles out;
  const char* untaken = "the export has no tokenizer files or generation_config.json and its bos_token_id / "
                        "eos_token_id are null (fix: copy the files of the model's tokenizer into the export "
                        "folder)";
  if (model.init_from.empty()) {
    out.notes.push_back(fmt::format("the checkpoint records no model.init_from (trained from scratch, or saved by "
                                    "a ppctl from before exports copied its files): {}",
                                    untaken));
    return out;
  }
  out.folder = model.init_from;
  const auto file = out.folder / "config.json";
  config::HfModelConfig hf;
  try {
    hf = config::read_hf_model_config(out.folder);
  } catch (const Error& e) {
    out.notes.push_back(fmt::format("model.init_from {} cannot be read again ({}): {}",
                                    core::echo_label(out.folder.string()), e.what(), untaken));
    return out;
  }
  const std::string seq_len = field(hf, "seq_len");
  if (config::llama_family(model.arch) && field(hf, "arch") == config::to_string(model.arch) && !seq_len.empty()) {
    out.keys.max_position_embeddings = std::stoll(seq_len);  // an integer the reader checked
  }
  std::vector<std::string> present;
  for (const auto& name : copied_model_files()) {
    std::error_code ec;
    if (fs::is_regular_file(out.folder / name, ec)) present.push_back(name);
  }
  const std::string vocab = field(hf, "vocab_size");
  if (vocab != std::to_string(model.vocab_size)) {
    out.notes.push_back(fmt::format(
        "{} has vocab_size {} but the model has vocab_size {}: the vocabulary changed, so {} and the token ids "
        "are not copied (fix: put the tokenizer files of the model's vocabulary into the export folder and set "
        "bos_token_id / eos_token_id in its config.json)",
        core::echo_label(file.string()), vocab, model.vocab_size,
        present.empty() ? std::string("no file") : fmt::format("{}", fmt::join(present, ", "))));
    return out;
  }
  out.files = std::move(present);
  const auto& ids = hf.token_ids;
  out.keys.token_ids = {in_vocabulary(ids.bos, "bos_token_id", model.vocab_size, file, out.notes),
                        in_vocabulary(ids.eos, "eos_token_id", model.vocab_size, file, out.notes),
                        in_vocabulary(ids.pad, "pad_token_id", model.vocab_size, file, out.notes)};
  if (out.files.empty()) {
    out.notes.push_back(fmt::format("model.init_from {} holds none of {}: the export has no tokenizer files",
                                    core::echo_label(out.folder.string()), fmt::join(copied_model_files(), ", ")));
  }
  return out;
}

void copy_source_files(const SourceFiles& source, const fs::path& out) {
  for (const auto& name : source.files) {
    core::write_file_atomically(out / name, core::read_file(source.folder / name));
  }
}

}  // namespace ppctl::interop
