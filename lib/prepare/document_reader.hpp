// The documents of `ppctl data prepare`'s input files: JSONL (one JSON object per line, the text in
// one field, as Megatron-LM's tools/preprocess_data.py reads it) or plain text (a whole file, or the
// pieces between separator lines). No torch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppctl::prepare {

/// How an input file is read.
enum class InputFormat {
  kAuto,   ///< by the file name: `.jsonl` or `.json` is JSONL, anything else text
  kText,   ///< plain text
  kJsonl,  ///< one JSON object per line
  kChat,   ///< one conversation per JSONL line, rendered by a chat template (prepare/chat_prepare.hpp)
};

/// Parses "auto" | "text" | "jsonl" | "chat". Throws prepare::PrepareError naming the value otherwise.
InputFormat parse_input_format(const std::string& text);

/// Options of the input side of `ppctl data prepare`.
struct InputOptions {
  InputFormat format = InputFormat::kAuto;
  /// JSONL: the field holding a document's text (Megatron's --json-keys; one key here).
  std::string json_key = "text";
  /// Text: without a value every file is one document (its bytes as they are). With a value, a
  /// line that is exactly this text (ignoring a trailing "\r") ends a document and is dropped;
  /// the document is the lines before it with their newlines; pieces that would be empty (two
  /// separators in a row, a separator first or last) are skipped. "" splits at empty lines
  /// (paragraphs); "%" splits fortune files.
  std::optional<std::string> document_separator;
};

/// The format `path` is read in under `options` (kAuto resolved by the file name).
InputFormat resolved_format(const std::string& path, const InputOptions& options);

/// Checks before anything is written that every input is a readable regular file. Throws
/// prepare::PrepareError naming the first that is missing, a folder, or unreadable. Returns the
/// total size of the inputs in bytes (for the progress line's ETA).
int64_t check_inputs(const std::vector<std::string>& paths);

/// The whole content of `path`, read with read(2). Throws prepare::PrepareError "WHAT PATH: cannot
/// read it: REASON" (`what` names the role: "input", "--model") when it cannot be opened or read.
std::string read_input_file(const std::string& path, const std::string& what);

/// What is wrong with JSONL line `line`, which nlohmann's parser refused (`what`: the exception's message,
/// `byte`: the 1-based byte where it stopped), and the fix: bytes that are not UTF-8 (named by the 1-based
/// place in the line where the ill-formed sequence starts; fix: re-encode the file as UTF-8), else "not
/// JSON (WHAT)" with `fix_not_json`.
struct LineProblem {
  std::string problem;
  std::string fix;
};
LineProblem json_line_problem(std::string_view line, const std::string& what, size_t byte,
                              const std::string& fix_not_json);

/// Calls `on_line(number, line)` for every line of `path` that is not blank (only white space), with
/// its 1-based number and without its '\n', and `on_bytes(n)` after each n bytes consumed. Throws
/// prepare::PrepareError naming the file when it cannot be read.
void read_jsonl_lines(const std::string& path, const std::function<void(int64_t, std::string_view)>& on_line,
                      const std::function<void(int64_t)>& on_bytes);

/// Calls `on_document(text)` for every document of `path`, in file order, and
/// `on_bytes(n)` after each n bytes of the file consumed (progress). JSONL: a line that holds only
/// white space is skipped; every other line must be a JSON object whose `json_key` is a string
/// (an empty string is an empty document). Throws prepare::PrepareError naming the file and its
/// 1-based line number when a line is not JSON, not an object, or lacks the key (or it is not a
/// string), and naming the file when it cannot be read.
void read_documents(const std::string& path, const InputOptions& options,
                    const std::function<void(std::string_view)>& on_document,
                    const std::function<void(int64_t)>& on_bytes);

}  // namespace ppctl::prepare
