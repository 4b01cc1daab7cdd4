// `ppctl data prepare`: tokenizes text or JSONL files into a Megatron-LM indexed dataset
// (PREFIX.bin, PREFIX.idx) plus the tokenizer sidecar PREFIX.tokenizer.json, with a progress line on
// a terminal and a closing report. No torch.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "data/megatron_format.hpp"
#include "prepare/document_reader.hpp"

namespace ppctl::prepare {

/// What to prepare (the command line of `ppctl data prepare`).
struct PrepareOptions {
  std::vector<std::string> inputs;  ///< text or JSONL files, read in this order
  InputOptions input;               ///< how they are split into documents
  std::string output_prefix;        ///< writes PREFIX.bin, PREFIX.idx, PREFIX.tokenizer.json
  /// "sentencepiece" (needs model), "bytes", or the path of a Hugging Face tokenizer.json (or of the
  /// folder holding one: prepare/hf_bpe_tokenizer.hpp)
  std::string tokenizer = "sentencepiece";
  std::string model;                ///< the SentencePiece .model file
  /// Append an end-of-document id to every non-empty document (Megatron's --append-eod: an empty
  /// document stays empty). `eod_id` nullopt = the model's eos id.
  bool append_eod = false;
  std::optional<int64_t> eod_id;
  bool progress = false;            ///< draw the progress line (on a terminal)
};

/// What was written, for the closing report.
struct PrepareReport {
  std::string output_prefix;
  std::string tokenizer;
  int64_t vocab_size = 0;  ///< max(tokenizer vocabulary, eod id + 1)
  std::optional<int64_t> eod_id;
  data::megatron::DType dtype = data::megatron::DType::kUint16;
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t max_token_id = -1;
  int64_t bytes_in = 0;    ///< bytes of input read
  int64_t bytes_out = 0;   ///< bytes of the .bin
  double seconds = 0.0;    ///< wall time from the first input read to the last rename
};

/// Runs the whole preparation. Everything the user named is checked before anything is written
/// (inputs readable, model valid, output folder exists, eod id usable); input errors found while
/// reading (a bad JSONL line) stop it with nothing left behind. The dtype is Megatron's choice
/// (data::megatron::optimal_dtype of the vocabulary: uint16 below 65500 ids, else int32). A dataset
/// whose documents are all empty is refused (no token to train on; numpy cannot map an empty .bin).
/// Throws prepare::PrepareError for bad input (exit 2), ppctl::Error for a system failure.
PrepareReport prepare_dataset(const PrepareOptions& options, std::FILE* progress_out = stderr);

/// The dataset's PREFIX.tokenizer.json (interfaces: format "ppctl-tokenizer", version 1, tokenizer,
/// model (absolute path or null), vocab_size, eod_id (or null), max_token_id, documents, tokens).
std::string sidecar_json(const PrepareReport& report, const std::string& model_path);

/// The progress text: "prepare 12.3/45.6 MB | 1234 docs | 5.6 MB/s | ETA 0:05" (MB = 10^6 bytes).
std::string format_prepare_progress(int64_t bytes_done, int64_t bytes_total, int64_t documents,
                                    double seconds);

/// The closing report, one line: "PREFIX.{bin,idx}: D documents, T tokens (uint16, vocabulary V,
/// eod E) from B MB in S s = R MB/s".
std::string format_prepare_report(const PrepareReport& report);

}  // namespace ppctl::prepare
