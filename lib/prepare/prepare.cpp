// `ppctl data prepare`: check everything, then read, tokenize and write; report.
#include "prepare/prepare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <signal.h>

#include "core/live_line.hpp"
#include "core/echo.hpp"
#include "prepare/chat_prepare.hpp"
#include "prepare/hf_bpe_tokenizer.hpp"
#include "prepare/indexed_writer.hpp"
#include "prepare/prepare_error.hpp"
#include "prepare/tokenizer.hpp"

namespace ppctl::prepare {
namespace {

namespace fs = std::filesystem;

constexpr double kMB = 1e6;

}  // namespace

void check_output_prefix(const std::string& prefix) {
  if (prefix.empty()) throw PrepareError("--output is empty (fix: name the dataset, e.g. --output data/corpus)");
  std::error_code ec;
  if (prefix.back() == '/' || fs::is_directory(prefix, ec)) {
    throw PrepareError(fmt::format("--output {}: a folder; it names the dataset's files (fix: e.g. --output "
                                   "{}/corpus writes corpus.bin and corpus.idx there)",
                                   core::echo_label(prefix), core::echo_label(fs::path(prefix).lexically_normal().string())));
  }
  const auto folder = fs::path(prefix).parent_path();
  if (!folder.empty() && !fs::is_directory(folder, ec)) {
    throw PrepareError(fmt::format("--output {}: folder {} does not exist (fix: create it with mkdir -p {})",
                                   core::echo_label(prefix), core::echo_label(folder.string()),
                                   core::echo_label(folder.string())));
  }
}

namespace {

/// A SentencePiece model (Llama 2's tokenizer.model) given as --tokenizer, or a model folder that holds one and
/// no tokenizer.json: refused with the --model that reads it, instead of the JSON reader's complaint.
void refuse_sentencepiece_as_json(const std::string& path) {
  std::error_code ec;
  fs::path model;
  if (fs::is_directory(path, ec)) {
    const fs::path folder(path);
    if (fs::exists(folder / "tokenizer.json", ec) || !fs::is_regular_file(folder / "tokenizer.model", ec)) return;
    model = fs::path(path) / "tokenizer.model";
  } else if (fs::is_regular_file(path, ec)) {
    // JSON starts with '{' after any white space; a serialized SentencePiece ModelProto with its first piece
    // (field 1, length-delimited: byte 0x0a, '\n'), and the length that follows is no '{'.
    std::ifstream in(path, std::ios::binary);
    const int first = in.peek();
    int c = in.get();
    while (c == ' ' || c == '\t' || c == '\r' || c == '\n') c = in.get();
    if (c == '{' || (fs::path(path).extension() != ".model" && first != 0x0a)) return;
    model = path;
  } else {
    return;
  }
  throw PrepareError(fmt::format("--tokenizer {}: {} a SentencePiece model (as Llama 2 and Mistral ship "
                                 "tokenizer.model), which --tokenizer does not read: it takes a Hugging Face "
                                 "tokenizer.json (fix: --model {}, with the default --tokenizer sentencepiece)",
                                 core::echo_label(path), fs::is_directory(path, ec) ? "the folder holds no "
                                 "tokenizer.json, only" : "this is",
                                 core::echo_label(model.string())));
}

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(const PrepareOptions& options) {
  if (options.tokenizer == "bytes") {
    if (!options.model.empty()) {
      throw PrepareError(fmt::format("--model {} is given with --tokenizer bytes, which has no model (fix: "
                                     "drop --model, or use --tokenizer sentencepiece)",
                                     core::echo_label(options.model)));
    }
    return make_bytes_tokenizer();
  }
  if (options.tokenizer == "sentencepiece") {
    if (options.model.empty()) {
      throw PrepareError("--tokenizer sentencepiece needs --model FILE (fix: train one with spm_train, or "
                         "use --tokenizer bytes)");
    }
    return load_sentencepiece(options.model);
  }
  // Anything else names a Hugging Face tokenizer.json (or the model folder holding one).
  if (!options.model.empty()) {
    throw PrepareError(fmt::format("--model {} is given with --tokenizer {}, a tokenizer.json, which needs no model "
                                   "(fix: drop --model)",
                                   core::echo_label(options.model), core::echo_label(options.tokenizer)));
  }
  refuse_sentencepiece_as_json(options.tokenizer);
  return load_hf_tokenizer(options.tokenizer);
}

namespace {

/// The id appended to every non-empty document, or nullopt without --append-eod.
std::optional<int64_t> resolve_eod(const PrepareOptions& options, const Tokenizer& tokenizer) {
  if (!options.append_eod) return std::nullopt;
  if (options.eod_id) {
    if (*options.eod_id < 0 || *options.eod_id > INT32_MAX) {
      throw PrepareError(fmt::format("--append-eod {}: must be an id in [0, {}]", *options.eod_id, INT32_MAX));
    }
    return options.eod_id;
  }
  if (!tokenizer.eos_id()) {
    if (tokenizer.kind() == "hf-bpe") {
      throw PrepareError(fmt::format(
          "--append-eod without an id: {} names no end-of-sequence token (no tokenizer_config.json beside it "
          "with an eos_token of its vocabulary, and its post-processor appends none) (fix: give the id of its "
          "end-of-text token, e.g. --append-eod ID with ID from tokenizer.json's added_tokens)",
          core::echo_label(tokenizer.model_path())));
    }
    throw PrepareError(fmt::format(
        "--append-eod without an id: the {} tokenizer has no end-of-sequence id (fix: give one, e.g. "
        "--append-eod {})",
        tokenizer.kind(), tokenizer.vocab_size()));
  }
  return tokenizer.eos_id();
}

}  // namespace

void count_written(const IndexedDatasetWriter& writer, PrepareReport& report) {
  report.documents = writer.documents();
  report.tokens = writer.tokens();
  report.max_token_id = writer.max_token_id();
  report.bytes_out = writer.bin_bytes();
}

void stop_if_signalled(const PrepareOptions& options, const std::string& where, int64_t documents) {
  const int sig = options.stop_signal ? options.stop_signal() : 0;
  if (sig != 0) throw PrepareInterrupted(fmt::format("at {} after {} document(s)", where, documents), sig);
}

std::string name_inputs(const std::vector<std::string>& inputs) {
  std::string out;
  for (size_t k = 0; k < inputs.size() && k < 3; ++k) out += (k ? ", " : "") + core::echo_label(inputs[k]);
  if (inputs.size() > 3) out += fmt::format(" and {} more", inputs.size() - 3);
  return out;
}

void remove_stale_temporaries(const std::string& prefix) {
  const fs::path folder = fs::path(prefix).parent_path().empty() ? fs::path(".") : fs::path(prefix).parent_path();
  const std::string base = fs::path(prefix).filename().string();
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t tmp = name.rfind(".tmp.");
    if (name.compare(0, base.size(), base) != 0 || tmp == std::string::npos || tmp < base.size()) continue;
    const std::string suffix = name.substr(base.size(), tmp - base.size());
    const std::string digits = name.substr(tmp + 5);
    static const char* const kSuffixes[] = {".bin", ".idx", ".tokenizer.json", ".loss_mask.bin", ".loss_mask.idx",
                                            ".loss_mask.tokenizer.json"};
    if (std::find(std::begin(kSuffixes), std::end(kSuffixes), suffix) == std::end(kSuffixes) || digits.empty() ||
        digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // running (or not ours to judge)
    std::error_code removed;
    fs::remove(it->path(), removed);
    if (!removed) {
      spdlog::info("removed {}, a temporary file left by an earlier run (process {}, no longer running)",
                   core::echo_label(it->path().string()), pid);
    }
  }
}

void remove_old_files(const std::string& prefix, std::initializer_list<const char*> suffixes) {
  for (const char* suffix : suffixes) {
    std::error_code ec;
    fs::remove(prefix + suffix, ec);
    if (ec) throw Error(fmt::format("cannot remove the old {}{}: {}", prefix, suffix, ec.message()));
  }
}

std::string format_prepare_progress(int64_t bytes_done, int64_t bytes_total, int64_t documents,
                                    double seconds) {
  const double rate = seconds > 0 ? bytes_done / seconds : 0.0;
  const double eta = rate > 0 ? (bytes_total - bytes_done) / rate : -1.0;
  return fmt::format("prepare {:.1f}/{:.1f} MB | {} docs | {:.1f} MB/s | ETA {}", bytes_done / kMB,
                     bytes_total / kMB, documents, rate / kMB, core::format_duration(eta));
}

std::string format_prepare_report(const PrepareReport& r) {
  const std::string what =
      r.chat ? fmt::format("{0}.{{bin,idx}} + {0}.loss_mask.{{bin,idx}}: {1} conversations, {2} tokens, {3} targets "
                           "(--train-on {4})",
                           r.output_prefix, r.documents, r.tokens, r.chat->target_tokens, r.chat->train_on)
             : fmt::format("{}.{{bin,idx}}: {} documents, {} tokens", r.output_prefix, r.documents, r.tokens);
  return fmt::format(
      "{} ({}, vocabulary {}, {}) from {:.2f} MB in {:.2f} s = "
      "{:.2f} MB/s",
      what, data::megatron::dtype_name(r.dtype), r.vocab_size,
      r.eod_id ? fmt::format("eod {}", *r.eod_id) : std::string("no eod"), r.bytes_in / kMB, r.seconds,
      r.seconds > 0 ? r.bytes_in / kMB / r.seconds : 0.0);
}

std::string sidecar_json(const PrepareReport& r, const std::string& model_path) {
  nlohmann::ordered_json j;
  j["format"] = "ppctl-tokenizer";
  j["version"] = 1;
  j["tokenizer"] = r.tokenizer;
  j["model"] = model_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(model_path);
  j["vocab_size"] = r.vocab_size;
  j["eod_id"] = r.eod_id ? nlohmann::ordered_json(*r.eod_id) : nlohmann::ordered_json(nullptr);
  j["max_token_id"] = r.max_token_id;
  j["documents"] = r.documents;
  j["tokens"] = r.tokens;
  if (r.chat) {
    j["chat"] = {{"template", r.chat->chat_template}, {"train_on", r.chat->train_on}, {"date", r.chat->date},
                 {"conversations", r.chat->conversations}, {"target_tokens", r.chat->target_tokens},
                 {"loss_mask", fs::absolute(r.output_prefix + ".loss_mask").lexically_normal().string()}};
  }
  return j.dump(2) + "\n";
}

PrepareReport prepare_dataset(const PrepareOptions& options, std::FILE* progress_out) {
  if (options.input.format == InputFormat::kChat) return prepare_chat_dataset(options, progress_out);
  // Everything the user named, before anything is written.
  const int64_t bytes_total = check_inputs(options.inputs);
  const auto tokenizer = make_tokenizer(options);
  const auto eod = resolve_eod(options, *tokenizer);
  check_output_prefix(options.output_prefix);
  remove_stale_temporaries(options.output_prefix);

  PrepareReport report;
  report.output_prefix = options.output_prefix;
  report.tokenizer = tokenizer->kind();
  report.eod_id = eod;
  report.vocab_size = std::max(tokenizer->vocab_size(), eod ? *eod + 1 : 0);
  report.dtype = data::megatron::optimal_dtype(report.vocab_size);

  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  core::LiveLine line(options.progress, progress_out);
  IndexedDatasetWriter writer(options.output_prefix, report.dtype);
  std::vector<int32_t> ids;
  for (const auto& path : options.inputs) {
    read_documents(
        path, options.input,
        [&](std::string_view text) {
          stop_if_signalled(options, fmt::format("{}, document {}", core::echo_label(path), writer.documents() + 1),
                            writer.documents());
          ids.clear();
          try {
            tokenizer->encode(text, ids);
          } catch (const PrepareError& e) {  // bad text (not UTF-8): say where
            throw PrepareError(fmt::format("{}: document {}: {}", core::echo_label(path), writer.documents() + 1,
                                           e.what()));
          }
          if (eod && !ids.empty()) ids.push_back(static_cast<int32_t>(*eod));
          writer.add_document(ids);
        },
        [&](int64_t n) {
          report.bytes_in += n;
          if (line.due()) {
            line.draw(format_prepare_progress(report.bytes_in, bytes_total, writer.documents(), elapsed()),
                      false);
          }
        });
  }
  line.draw(format_prepare_progress(report.bytes_in, bytes_total, writer.documents(), elapsed()), true);
  count_written(writer, report);
  if (report.documents == 0) {
    throw PrepareError(fmt::format("{}: no document (the input is empty{}) (fix: name the files that hold "
                                   "the text)",
                                   name_inputs(options.inputs),
                                   options.input.document_separator ? ", or holds only separator lines"
                                                                    : ", or holds only blank lines"));
  }
  if (report.tokens == 0) {
    throw PrepareError(fmt::format("{}: the {} document(s) hold no token (fix: check the input files{})",
                                   name_inputs(options.inputs), report.documents,
                                   options.input.format == InputFormat::kText ? "" : " and --json-key"));
  }
  writer.stage(sidecar_json(report, tokenizer->model_path()));
  // Loss masks of an earlier chat dataset of this prefix would be paired with these ids by a trainer.
  remove_old_files(options.output_prefix, {".loss_mask.idx", ".loss_mask.bin"});
  writer.publish();
  report.seconds = elapsed();
  return report;
}

}  // namespace ppctl::prepare
