// Chat data: read conversations, render, tokenize, mask, and write the ids and masks together.
#include "prepare/chat_prepare.hpp"

#include <fmt/format.h>

#include <chrono>
#include <numeric>
#include <optional>

#include "core/echo.hpp"
#include "core/live_line.hpp"
#include "prepare/chat_reader.hpp"
#include "prepare/chat_template.hpp"
#include "prepare/hf_bpe_tokenizer.hpp"
#include "prepare/indexed_writer.hpp"
#include "prepare/loss_mask.hpp"
#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {
namespace {

/// The tokenizer.json of --tokenizer, or a PrepareError saying chat data needs one.
HfTokenizerSpec chat_tokenizer(const PrepareOptions& options) {
  if (options.tokenizer == "bytes" || options.tokenizer == "sentencepiece" || !options.model.empty()) {
    throw PrepareError(fmt::format(
        "--input-format chat needs --tokenizer PATH, the model's tokenizer.json (or its folder, which also "
        "holds the tokenizer_config.json with the chat template); {} cannot be used for chat data (fix: e.g. "
        "--tokenizer models/Qwen2.5-0.5B-Instruct)",
        options.model.empty() ? "--tokenizer " + core::echo_value(options.tokenizer) : std::string("--model")));
  }
  if (options.append_eod) {
    throw PrepareError("--append-eod with --input-format chat: the chat template writes each turn's end token "
                       "itself (fix: drop --append-eod)");
  }
  if (options.input.document_separator) {
    throw PrepareError("--document-separator with --input-format chat: each JSONL line is one conversation "
                       "(fix: drop --document-separator)");
  }
  if (options.input.json_key != "text") {
    throw PrepareError(fmt::format("--json-key {} with --input-format chat: a conversation is read from "
                                   "\"messages\" or \"prompt\"/\"completion\" (fix: drop --json-key)",
                                   core::echo_value(options.input.json_key)));
  }
  make_tokenizer(options);  // the checks plain data gets (a SentencePiece model under --tokenizer)
  return read_hf_tokenizer_json(options.tokenizer);
}

jinja::Json chat_context(const std::string& text, int max_depth) {
  if (text.empty()) return jinja::Json::object();
  std::optional<jinja::Json> context;
  try {
    context = parse_json_within(text, max_depth);
  } catch (const jinja::Json::exception& e) {
    throw PrepareError(fmt::format("--chat-context {}: not JSON ({}) (fix: a JSON object, e.g. "
                                   "'{{\"enable_thinking\": false}}')",
                                   core::echo_value(text), core::escape_control(e.what())));
  }
  if (!context) {
    throw PrepareError(fmt::format("--chat-context: nests {{}} and [] deeper than the limit of {} levels (the "
                                   "chat template engine's depth limit) (fix: flatten its values)",
                                   max_depth));
  }
  return *context;
}

/// The fix for a template that failed on a conversation, by the kind of failure.
std::string template_fix(const jinja::TemplateError& e) {
  switch (e.failure()) {
    case jinja::Failure::kRaised:
      return "change the conversation as the template's message asks, or use another template with "
             "--chat-template";
    case jinja::Failure::kLimit:
      return "the conversation is too large for the template engine's limits, or the template loops without "
             "end: split the conversation into several lines, or check the template";
    case jinja::Failure::kUndefined:
      return fmt::format("the conversation lacks a field the template reads ({}): add it to the messages, or "
                         "use a template that does not need it",
                         e.message());
    case jinja::Failure::kOverflow:
      return "a number of the conversation, or one the template computes, does not fit 64 bits: check the "
             "conversation's numbers and the template's arithmetic";
    case jinja::Failure::kTemplate: break;
  }
  return "the template fails on this conversation (a type error or an unsupported construct): check the "
         "template, or pass another with --chat-template";
}

}  // namespace

PrepareReport prepare_chat_dataset(const PrepareOptions& options, std::FILE* progress_out) {
  // Everything the user named, before anything is written.
  const int64_t bytes_total = check_inputs(options.inputs);
  HfTokenizerSpec spec = chat_tokenizer(options);
  const TokenBytes token_bytes(spec);
  spec.prefix_ids.clear();  // apply_chat_template tokenizes with add_special_tokens=False
  spec.suffix_ids.clear();
  const HfBpeTokenizer tokenizer(spec);
  const std::time_t clock = chat_clock(options.chat.date);
  const ChatTemplate chat(find_chat_template(options.tokenizer, options.chat.chat_template),
                          chat_context(options.chat.context, options.chat.limits.max_depth),
                          jinja::RenderOptions{options.chat.limits, clock});
  check_output_prefix(options.output_prefix);
  remove_stale_temporaries(options.output_prefix);

  PrepareReport report;
  report.output_prefix = options.output_prefix;
  report.tokenizer = tokenizer.kind();
  report.vocab_size = tokenizer.vocab_size();
  report.dtype = data::megatron::optimal_dtype(report.vocab_size);
  ChatReport summary;
  summary.chat_template = chat.source().path;
  summary.train_on = options.chat.train_on_all ? "all" : "assistant";
  summary.date = chat_date_text(clock);

  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  core::LiveLine line(options.progress, progress_out);
  IndexedDatasetWriter ids_out(options.output_prefix, report.dtype);
  IndexedDatasetWriter masks_out(options.output_prefix + ".loss_mask", data::megatron::DType::kUint8);
  std::vector<int32_t> ids, mask;
  for (const auto& path : options.inputs) {
    const auto at = [&path](const Conversation& c) { return fmt::format("{}:{}", core::echo_label(path), c.line); };
    read_conversations(
        path,
        [&](const Conversation& c) {
          stop_if_signalled(options, at(c), ids_out.documents());
          if (!options.chat.train_on_all && c.assistant_turns == 0) {
            throw PrepareError(fmt::format("{}: a conversation without an assistant message: nothing to train on "
                                           "under --train-on assistant (fix: remove the line, add the answer, or "
                                           "pass --train-on all)",
                                           at(c)));
          }
          ids.clear();
          mask.clear();
          try {
            const jinja::Rendered full = chat.render(c.messages, c.messages.size(), false, c.tools);
            tokenizer.encode(full.text, ids);
            if (options.chat.train_on_all) {
              mask.assign(ids.size(), 1);
            } else {
              token_bytes.mask(full.text, ids, assistant_spans(chat, c, full, token_bytes.special_tokens()), mask);
            }
          } catch (const jinja::TemplateError& e) {
            throw PrepareError(fmt::format("{}: the chat template failed on this conversation: {} (fix: {})", at(c),
                                           e.what(), template_fix(e)));
          } catch (const PrepareError& e) {
            throw PrepareError(fmt::format("{}: {}", at(c), e.what()));
          }
          ids_out.add_document(ids);
          masks_out.add_document(mask);
          summary.target_tokens += std::accumulate(mask.begin(), mask.end(), int64_t{0});
        },
        [&](int64_t n) {
          report.bytes_in += n;
          if (line.due()) {
            line.draw(format_prepare_progress(report.bytes_in, bytes_total, ids_out.documents(), elapsed()), false);
          }
        },
        options.chat.limits.max_depth);
  }
  line.draw(format_prepare_progress(report.bytes_in, bytes_total, ids_out.documents(), elapsed()), true);
  count_written(ids_out, report);
  summary.conversations = report.documents;
  if (report.documents == 0) {
    throw PrepareError(fmt::format("{}: no conversation (the input is empty, or holds only blank lines) (fix: "
                                   "name the JSONL files that hold the conversations, one per line)",
                                   name_inputs(options.inputs)));
  }
  if (summary.target_tokens == 0) {
    throw PrepareError(fmt::format("{}: the {} conversation(s) hold no target token (fix: check that they hold "
                                   "assistant messages with text)",
                                   name_inputs(options.inputs), report.documents));
  }
  report.chat = summary;
  // Both datasets under temporary names first; then the old index and sidecar go, the masks appear, and the
  // ids and the sidecar last: a reader that sees the new sidecar sees new ids and masks.
  ids_out.stage(sidecar_json(report, tokenizer.model_path()));
  masks_out.stage(std::nullopt);
  remove_old_files(options.output_prefix, {".idx", ".tokenizer.json"});
  masks_out.publish();
  ids_out.publish();
  report.seconds = elapsed();
  return report;
}

}  // namespace ppctl::prepare
