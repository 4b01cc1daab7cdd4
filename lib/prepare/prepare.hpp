// `ppctl data prepare`: tokenizes text or JSONL files into a Megatron-LM indexed dataset
// (PREFIX.bin, PREFIX.idx) plus the tokenizer sidecar PREFIX.tokenizer.json, with a progress line on
// a terminal and a closing report. No torch.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/megatron_format.hpp"
#include "jinja/template.hpp"
#include "prepare/document_reader.hpp"
#include "prepare/tokenizer.hpp"

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
  /// The stop signal caught so far (SIGINT, SIGTERM, SIGHUP, ...; 0 while none), asked before each
  /// document: a nonzero answer stops the run there (PrepareInterrupted). Empty: never stops.
  std::function<int()> stop_signal;
  /// --input-format chat (prepare/chat_prepare.hpp).
  struct Chat {
    std::string chat_template;  ///< --chat-template: a .jinja, a tokenizer_config.json or a folder; "" = beside --tokenizer
    bool train_on_all = false;  ///< --train-on all: every token is a target (else assistant turns only)
    std::string date;           ///< --chat-date YYYY-MM-DD for strftime_now; "" = today
    std::string context;        ///< --chat-context: a JSON object of extra template variables; "" = none
    jinja::Limits limits;       ///< bounds on one render
  } chat;
};

/// What a chat dataset holds besides the ids (the sidecar's "chat" object).
struct ChatReport {
  std::string chat_template;  ///< the file the template came from (absolute)
  std::string train_on;       ///< "assistant" or "all"
  std::string date;           ///< the date strftime_now printed, YYYY-MM-DD
  int64_t conversations = 0;
  int64_t target_tokens = 0;  ///< tokens whose loss mask is 1
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
  std::optional<ChatReport> chat;  ///< set for --input-format chat
};

/// Runs the whole preparation. Everything the user named is checked before anything is written
/// (inputs readable, model valid, output folder exists, eod id usable); input errors found while
/// reading (a bad JSONL line) stop it with nothing left behind. The dtype is Megatron's choice
/// (data::megatron::optimal_dtype of the vocabulary: uint16 below 65500 ids, else int32). A dataset
/// whose documents are all empty is refused (no token to train on; numpy cannot map an empty .bin).
/// Throws prepare::PrepareError for bad input (exit 2), ppctl::Error for a system failure.
PrepareReport prepare_dataset(const PrepareOptions& options, std::FILE* progress_out = stderr);

/// The dataset's PREFIX.tokenizer.json (interfaces: format "ppctl-tokenizer", version 1, tokenizer,
/// model (absolute path or null), vocab_size, eod_id (or null), max_token_id, documents, tokens; for chat
/// data also "chat": {template, train_on, date, conversations, target_tokens, loss_mask (the absolute
/// PREFIX.loss_mask, as model and template are absolute)}: an added key, so still version 1: readers ignore
/// keys they do not know).
std::string sidecar_json(const PrepareReport& report, const std::string& model_path);

/// Throws PrepareInterrupted when options.stop_signal reports a signal: "interrupted (SIGNAL) at WHERE after
/// N document(s)". Called before each document, so the writers' destructors remove the temporaries.
void stop_if_signalled(const PrepareOptions& options, const std::string& where, int64_t documents);

/// The input files for a message: "a.jsonl", "a.jsonl, b.jsonl", or the first three and "and N more".
std::string name_inputs(const std::vector<std::string>& inputs);

/// Removes the temporaries an earlier run onto `prefix` left (a crash, SIGKILL): PREFIX.{bin,idx,
/// tokenizer.json,loss_mask.bin,loss_mask.idx,loss_mask.tokenizer.json}.tmp.PID whose process PID no
/// longer runs, and logs each; those of a running process (a concurrent run) stay.
void remove_stale_temporaries(const std::string& prefix);

/// Checks that --output names a file in an existing folder. Throws prepare::PrepareError with the fix.
void check_output_prefix(const std::string& prefix);

/// The tokenizer --tokenizer (and --model) name. Throws prepare::PrepareError naming the file and fix.
std::unique_ptr<Tokenizer> make_tokenizer(const PrepareOptions& options);

class IndexedDatasetWriter;

/// Copies what `writer` has written (documents, tokens, largest id, .bin bytes) into `report`.
void count_written(const IndexedDatasetWriter& writer, PrepareReport& report);

/// Removes PREFIX+SUFFIX for each suffix where it exists. Throws ppctl::Error naming the file when one
/// cannot be removed.
void remove_old_files(const std::string& prefix, std::initializer_list<const char*> suffixes);

/// The progress text: "prepare 12.3/45.6 MB | 1234 docs | 5.6 MB/s | ETA 0:05" (MB = 10^6 bytes).
std::string format_prepare_progress(int64_t bytes_done, int64_t bytes_total, int64_t documents,
                                    double seconds);

/// The closing report, one line: "PREFIX.{bin,idx}: D documents, T tokens (uint16, vocabulary V,
/// eod E) from B MB in S s = R MB/s"; for chat data "PREFIX.{bin,idx} + PREFIX.loss_mask.{bin,idx}: D
/// conversations, T tokens, M targets (--train-on X) (...) from ...".
std::string format_prepare_report(const PrepareReport& report);

}  // namespace ppctl::prepare
