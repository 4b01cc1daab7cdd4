// Reading documents from JSONL and text inputs.
#include "prepare/document_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/echo.hpp"
#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {
namespace {

namespace fs = std::filesystem;

/// A FILE* closed when it goes out of scope.
struct File {
  std::FILE* f = nullptr;
  ~File() {
    if (f) std::fclose(f);
  }
};

[[noreturn]] void fail_read(const std::string& what, const std::string& path, int error) {
  throw PrepareError(fmt::format("{} {}: cannot read it: {} (fix: check the path and its permissions)",
                                 what, core::echo_label(path), std::strerror(error)));
}

/// Reads `path` line by line with getline(3); `on_line(line, ended_by_newline)` gets each line
/// without its '\n'. A read error (ferror) is a PrepareError naming the file.
template <typename OnLine>
void for_each_line(const std::string& path, OnLine on_line) {
  File file{std::fopen(path.c_str(), "rb")};
  if (!file.f) fail_read("input", path, errno);
  char* buffer = nullptr;
  size_t capacity = 0;
  struct Free {
    char*& p;
    ~Free() { std::free(p); }
  } release{buffer};
  ssize_t n;
  while ((n = ::getline(&buffer, &capacity, file.f)) >= 0) {
    const bool newline = n > 0 && buffer[n - 1] == '\n';
    on_line(std::string_view(buffer, static_cast<size_t>(n) - (newline ? 1 : 0)), newline);
  }
  if (std::ferror(file.f)) fail_read("input", path, errno);
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

LineProblem json_line_problem(std::string_view line, const std::string& what, size_t byte,
                              const std::string& fix_not_json) {
  if (what.find("ill-formed UTF-8") != std::string::npos && !line.empty()) {
    // The parser stops at the byte that breaks the sequence (after a lead byte, the next one): back up to
    // the lead byte whose sequence reaches it, if any.
    const size_t stop = std::min(byte == 0 ? 0 : byte - 1, line.size() - 1);
    size_t start = stop;
    for (size_t j = stop + 1; j-- > (stop >= 3 ? stop - 3 : 0);) {
      const auto b = static_cast<unsigned char>(line[j]);
      const size_t length = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 0;
      if (length > 0 && j + length > stop) {
        start = j;
        break;
      }
    }
    return {fmt::format("byte {} of the line is not UTF-8 (JSON text is UTF-8)", start + 1),
            "re-encode the file as UTF-8, e.g. iconv -f LATIN1 -t UTF-8 FILE > FILE.utf8 when it is Latin-1"};
  }
  return {fmt::format("not JSON ({})", core::escape_control(what)), fix_not_json};
}

namespace {

/// The text of JSONL line `number`, or a PrepareError saying what is wrong with it.
std::string jsonl_text(const std::string& path, int64_t number, std::string_view line,
                       const std::string& key) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    const LineProblem p = json_line_problem(
        line, e.what(), e.byte,
        fmt::format("write one JSON object per line, such as {{\"{}\": \"...\"}}, or pass --input-format text",
                    core::echo_value(key)));
    throw PrepareError(fmt::format("{}:{}: {} (fix: {})", core::echo_label(path), number, p.problem, p.fix));
  } catch (const nlohmann::json::out_of_range& e) {  // a number beyond a double's range, such as 2E615
    throw PrepareError(fmt::format("{}:{}: a number on the line does not fit a double ({}) (fix: write numbers within "
                                   "about 1.8e308, or as strings)",
                                   core::echo_label(path), number, e.what()));
  }
  if (!value.is_object()) {
    throw PrepareError(fmt::format("{}:{}: a JSON {}, not an object (fix: write one object per line, "
                                   "such as {{\"{}\": \"...\"}})",
                                   core::echo_label(path), number, value.type_name(), core::echo_value(key)));
  }
  const auto field = value.find(key);
  if (field == value.end()) {
    throw PrepareError(fmt::format("{}:{}: no field \"{}\" (fix: add it, or name the field holding the "
                                   "text with --json-key)",
                                   core::echo_label(path), number, core::echo_value(key)));
  }
  if (!field->is_string()) {
    throw PrepareError(fmt::format("{}:{}: field \"{}\" is a {}, not a string (fix: store the document's "
                                   "text as one string)",
                                   core::echo_label(path), number, core::echo_value(key), field->type_name()));
  }
  return field->get<std::string>();
}

void read_jsonl(const std::string& path, const std::string& key,
                const std::function<void(std::string_view)>& on_document,
                const std::function<void(int64_t)>& on_bytes) {
  read_jsonl_lines(path, [&](int64_t number, std::string_view line) {
    on_document(jsonl_text(path, number, line, key));
  }, on_bytes);
}

void read_separated(const std::string& path, const std::string& separator,
                    const std::function<void(std::string_view)>& on_document,
                    const std::function<void(int64_t)>& on_bytes) {
  std::string document;
  int64_t pending_bytes = 0;
  const auto flush = [&] {
    if (!document.empty()) on_document(document);
    document.clear();
    on_bytes(pending_bytes);
    pending_bytes = 0;
  };
  for_each_line(path, [&](std::string_view line, bool newline) {
    pending_bytes += static_cast<int64_t>(line.size()) + (newline ? 1 : 0);
    std::string_view bare = line;
    if (!bare.empty() && bare.back() == '\r') bare.remove_suffix(1);
    if (bare == separator) {
      flush();
      return;
    }
    document += line;
    if (newline) document += '\n';
  });
  flush();
}

}  // namespace

void read_jsonl_lines(const std::string& path, const std::function<void(int64_t, std::string_view)>& on_line,
                      const std::function<void(int64_t)>& on_bytes) {
  int64_t number = 0;
  for_each_line(path, [&](std::string_view line, bool newline) {
    ++number;
    if (!is_blank(line)) on_line(number, line);
    on_bytes(static_cast<int64_t>(line.size()) + (newline ? 1 : 0));
  });
}

std::string read_input_file(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_read(what, path, errno);
  std::string bytes;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      fail_read(what, path, error);
    }
    if (n == 0) break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

InputFormat parse_input_format(const std::string& text) {
  if (text == "auto") return InputFormat::kAuto;
  if (text == "text") return InputFormat::kText;
  if (text == "jsonl") return InputFormat::kJsonl;
  if (text == "chat") return InputFormat::kChat;
  throw PrepareError(fmt::format("--input-format {}: unknown (fix: auto, text, jsonl or chat)", core::echo_value(text)));
}

InputFormat resolved_format(const std::string& path, const InputOptions& options) {
  if (options.format != InputFormat::kAuto) return options.format;
  const auto extension = fs::path(path).extension().string();
  return extension == ".jsonl" || extension == ".json" ? InputFormat::kJsonl : InputFormat::kText;
}

int64_t check_inputs(const std::vector<std::string>& paths) {
  if (paths.empty()) throw PrepareError("no input files (fix: name at least one with --input)");
  int64_t total = 0;
  for (const auto& path : paths) {
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (!fs::exists(status)) {
      throw PrepareError(fmt::format("input {}: no such file (fix: check the path)", core::echo_label(path)));
    }
    if (!fs::is_regular_file(status)) {
      throw PrepareError(fmt::format("input {}: not a regular file (fix: name the files inside a folder, "
                                     "e.g. DIR/*.txt)",
                                     core::echo_label(path)));
    }
    if (::access(path.c_str(), R_OK) != 0) {
      throw PrepareError(fmt::format("input {}: cannot read it: {} (fix: check its permissions)", core::echo_label(path),
                                     std::strerror(errno)));
    }
    total += static_cast<int64_t>(fs::file_size(path, ec));
  }
  return total;
}

void read_documents(const std::string& path, const InputOptions& options,
                    const std::function<void(std::string_view)>& on_document,
                    const std::function<void(int64_t)>& on_bytes) {
  if (resolved_format(path, options) == InputFormat::kJsonl) {
    read_jsonl(path, options.json_key, on_document, on_bytes);
  } else if (options.document_separator) {
    read_separated(path, *options.document_separator, on_document, on_bytes);
  } else {
    const std::string text = read_input_file(path, "input");
    on_document(text);
    on_bytes(static_cast<int64_t>(text.size()));
  }
}

}  // namespace ppctl::prepare
