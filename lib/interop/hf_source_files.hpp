// What `ppctl export` takes from the Hugging Face folder a model came from (model.init_from): the tokenizer
// files and generation_config.json, copied when the vocabulary is unchanged, and config.json's token ids
// and longest context. Torch-free.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/hf_config.hpp"
#include "config/job_spec.hpp"

namespace ppctl::interop {

/// The files of a model folder an export copies from model.init_from when they are there: what
/// transformers' AutoTokenizer reads (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
/// added_tokens.json, vocab.json + merges.txt of GPT-2-style slow tokenizers, SentencePiece's
/// tokenizer.model, chat_template.jinja / chat_template.json) and generation_config.json.
const std::vector<std::string>& copied_model_files();

/// What an export takes from the source folder.
struct SourceFiles {
  std::filesystem::path folder;     ///< model.init_from; empty when the model records none
  std::vector<std::string> files;   ///< names of copied_model_files() present in `folder`, to copy
  config::HfSourceKeys keys;        ///< for config.json: bos/eos/pad ids, the llama family's longest context
  std::vector<std::string> notes;   ///< what is not taken and why (one log line each); empty when all is
};

/// Decides what an export of `model` (a checkpoint's model, model.init_from included) takes from
/// model.init_from. The source's config.json is read again (config::read_hf_model_config); when its
/// vocab_size equals model.vocab_size (the vocabulary is unchanged) `files` lists the copied_model_files()
/// present and `keys.token_ids` its bos/eos/pad ids, each id outside [0, vocab_size) dropped with a note;
/// otherwise nothing of this is taken and a note says so, naming both sizes. For the llama family with the
/// source of the same architecture, keys.max_position_embeddings is the source's (rotary positions carry
/// no weights, so training at a shorter seq_len does not shorten the model). A model without init_from,
/// or whose folder is gone or unreadable, gets a note instead. Never throws ppctl::Error: nothing here
/// stops an export, whose weights and config.json are complete without it.
SourceFiles source_files(const config::ModelSpec& model);

/// Copies `source.files` from `source.folder` into `out`, each atomically (core::write_file_atomically).
/// Throws ppctl::Error naming the file on an I/O failure.
void copy_source_files(const SourceFiles& source, const std::filesystem::path& out);

}  // namespace ppctl::interop
