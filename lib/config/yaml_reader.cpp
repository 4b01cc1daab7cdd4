// Reading YAML for the job spec loader: problems collected and thrown together, scalars typed by their text
// (YAML 1.2 core schema), integers in plain decimal only, values echoed in messages, the readers, the key walk.
#include "config/yaml_reader.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <regex>
#include <sstream>

#include "core/echo.hpp"
#include "core/error.hpp"
#include "core/integer_text.hpp"

namespace ppctl::config::detail {
namespace {

namespace fs = std::filesystem;

/// True for `"x"`, `'x'` and `!!str x`: the text is a string whatever it looks like.
bool is_string_tagged(const YAML::Node& node) {
  return node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str";
}

bool is_integer_text(const std::string& text) {
  static const std::regex pattern("[-+]?[0-9]+");
  return std::regex_match(text, pattern);
}

bool is_float_text(const std::string& text) {
  static const std::regex pattern(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  return std::regex_match(text, pattern);
}

bool is_non_finite_text(const std::string& text) {
  static const std::regex pattern(R"([-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))");
  return std::regex_match(text, pattern);
}

/// Plain scalars YAML reads as something other than a string (numbers, booleans): shown unquoted.
bool is_literal_text(const std::string& text) {
  static const std::regex booleans("true|True|TRUE|false|False|FALSE");
  return is_float_text(text) || is_non_finite_text(text) || std::regex_match(text, booleans);
}

/// What a scalar field got instead of a scalar, for hints: "a list", "a mapping", "an empty value".
std::string shape_name(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "an empty value";
}

/// Decimal integer (optional sign) -> int64.
Parse parse_int(const std::string& text, int64_t& out) {
  if (!is_integer_text(text)) return Parse::NotANumber;
  const char* first = text.data() + (text[0] == '+' ? 1 : 0);
  const auto [end, ec] = std::from_chars(first, text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range) return Parse::OutOfRange;
  return ec == std::errc() && end == text.data() + text.size() ? Parse::Ok : Parse::NotANumber;
}

/// The text of `e` when it is one plain (unquoted) scalar; otherwise reports `rule` with a hint built from
/// `kind` ("whole number", "number") and `example`, and returns nothing. Common start of the number readers.
std::optional<std::string> plain_scalar(Context& c, const Entry& e, const std::string& rule, const std::string& kind,
                                        const std::string& example) {
  if (!e.value.IsScalar()) {
    c.bad(e, rule, fmt::format("write one {} such as {}, not {}", kind, example, shape_name(e.value)));
    return std::nullopt;
  }
  if (is_string_tagged(e.value)) {
    c.bad(e, rule,
          is_float_text(e.value.Scalar()) ? "remove the quotes: a quoted value is a string"
                                          : fmt::format("write a {} such as {}", kind, example));
    return std::nullopt;
  }
  return e.value.Scalar();
}

/// Reports that `e` lies outside `range_text`, adding `why` to the rule when given.
void out_of_range(Context& c, const Entry& e, const std::string& range_text, const char* why,
                  const std::string& example) {
  std::string rule = "must be in " + range_text;
  if (why != nullptr) rule += std::string("; ") + why;
  c.bad(e, rule, fmt::format("use a value in {} such as {}", range_text, example));
}

/// Notes where each YAML document starts and ignores every other event.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

void Problems::add(int line, const std::string& path, const std::optional<std::string>& value,
                   const std::string& rule, const std::string& hint) {
  std::string text = fmt::format("{}:{}: ", source_, line);
  if (!path.empty()) text += core::echo_label(path) + ": ";
  if (value) text += "value " + core::echo_value(*value) + ": ";
  text += fmt::format("{} (fix: {})", rule, hint);
  problems_.push_back({line, std::move(text)});
}

void Problems::add_with_fix(int line, const std::string& path, const std::optional<std::string>& value,
                            const std::string& message) {
  std::string text = fmt::format("{}:{}: {}: ", source_, line, core::echo_label(path));
  if (value) text += "value " + core::echo_value(*value) + ": ";
  problems_.push_back({line, text + message});
}

void Problems::add_option(const std::string& option, const std::string& value, const std::string& rule,
                          const std::string& hint) {
  problems_.push_back({0, fmt::format("{} {}: {} (fix: {})", option, core::echo_value(value), rule, hint)});
}

void Problems::throw_if_any() {
  if (problems_.empty()) return;
  std::stable_sort(problems_.begin(), problems_.end(),
                   [](const Problem& a, const Problem& b) { return a.line < b.line; });
  std::vector<std::string> lines;
  for (auto& problem : problems_) lines.push_back(std::move(problem.text));
  throw ConfigError(std::move(lines));
}

int line_of(const YAML::Mark& mark) { return mark.is_null() || mark.line < 0 ? 1 : mark.line + 1; }
int line_of(const YAML::Node& node) { return line_of(node.Mark()); }

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// A value as the message shows it: `5`, `2.5`, `"four"`, `null`, `[1, 2]`, `{a: 1}` (long ones cut).
std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    return !is_string_tagged(node) && is_literal_text(text) ? text : quoted(text);
  }
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  out << node;
  std::string text = out.c_str();
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;  // cut by Problems::add (core::echo_value)
}

/// Finite YAML float or integer -> double (`.inf` and `.nan` are NotANumber; 1e999 is OutOfRange).
Parse parse_double(const std::string& text, double& out) {
  if (!is_float_text(text)) return Parse::NotANumber;
  const char* first = text.data() + (text[0] == '+' ? 1 : 0);
  const auto [end, ec] = std::from_chars(first, text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range) return Parse::OutOfRange;
  return ec == std::errc() && end == text.data() + text.size() ? Parse::Ok : Parse::NotANumber;
}

/// `a` or `a or b` (used to offer one or two example values).
std::string one_or_two(const std::optional<int64_t>& a, const std::optional<int64_t>& b) {
  if (a && b) return fmt::format("{} or {}", *a, *b);
  return fmt::format("{}", a ? *a : *b);
}

std::string resolve_against(const std::string& base_dir, const std::string& path) {
  const fs::path p(path);
  return (p.is_absolute() ? p : fs::path(base_dir) / p).lexically_normal().string();
}

bool read_int(Context& c, const Entry& e, const IntRange& range, int64_t example, int64_t& out) {
  const std::string rule = "must be an integer";
  const auto text = plain_scalar(c, e, rule, "whole number", std::to_string(example));
  if (!text) return false;
  int64_t value = 0;
  const Parse parsed = parse_int(*text, value);
  if (parsed != Parse::NotANumber && !core::is_plain_integer_text(*text)) {
    // `+3`, `007`, `-0`: YAML 1.2 reads them as integers, YAML 1.1 reads `010` as octal 8; one spelling only.
    c.bad(e, "must be an integer written in plain decimal digits, without a '+' sign or leading zeros",
          parsed == Parse::Ok ? fmt::format("write {}", value) : fmt::format("write a whole number such as {}", example));
    return false;
  }
  if (parsed == Parse::NotANumber) {
    std::string hint = fmt::format("write a whole number such as {}", example);
    // Beyond 9e15 a real has no fraction and does not convert to int64 (found by tests/fuzz): the plain hint.
    if (double real = 0; parse_double(*text, real) == Parse::Ok && std::abs(real) < 9e15) {
      const bool whole = real == std::floor(real);
      hint = whole ? fmt::format("write it in digits: {}", static_cast<int64_t>(real))
                   : fmt::format("use a whole number such as {}",
                                 one_or_two(static_cast<int64_t>(std::floor(real)),
                                            static_cast<int64_t>(std::ceil(real))));
    }
    c.bad(e, rule, hint);
    return false;
  }
  if (parsed == Parse::OutOfRange || !range.contains(value)) {
    out_of_range(c, e, range.text(), range.why, std::to_string(example));
    return false;
  }
  out = value;
  return true;
}

/// Reads a finite real number in `range` into `out`; integers are accepted. `example` appears in hints.
bool read_real(Context& c, const Entry& e, const RealRange& range, double example, double& out) {
  const std::string example_text = fmt::format("{}", example);
  const auto text = plain_scalar(c, e, "must be a number", "number", example_text);
  if (!text) return false;
  if (is_non_finite_text(*text)) {
    c.bad(e, "must be a finite number", fmt::format("use a value in {} such as {}", range.text(), example_text));
    return false;
  }
  double value = 0;
  const Parse parsed = parse_double(*text, value);
  if (parsed == Parse::NotANumber) {
    c.bad(e, "must be a number", fmt::format("write a number such as {}", example_text));
    return false;
  }
  if (parsed == Parse::OutOfRange || !range.contains(value)) {
    out_of_range(c, e, range.text(), nullptr, example_text);
    return false;
  }
  out = value;
  return true;
}

bool read_text(Context& c, const Entry& e, const std::string& what, const std::string& example, std::string& out) {
  if (!e.value.IsScalar() || e.value.Scalar().empty()) {
    c.bad(e, "must be a non-empty " + what, "write " + example);
    return false;
  }
  out = e.value.Scalar();
  return true;
}

void KeyWalk::for_each_key(const YAML::Node& map, const std::string& prefix, const std::vector<std::string>& known,
                           const KeyReader& read_key) {
  std::map<std::string, int> first_line;
  for (const auto& pair : map) {
    const YAML::Node& key = pair.first;
    const int line = line_of(key);
    const std::string name = key.IsScalar() ? key.Scalar() : describe(key);
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    if (const auto it = first_line.find(name); it != first_line.end()) {
      c_.problems.add(line, path, std::nullopt, "duplicate key",
                      fmt::format("keep one of them; the first is on line {}", it->second));
      continue;
    }
    first_line[name] = line;
    if (!key.IsScalar() || std::find(known.begin(), known.end(), name) == known.end()) {
      c_.problems.add(line, path, std::nullopt, "unknown key", unknown_key_hint_(name, prefix, known));
      continue;
    }
    const bool ok = read_key(name, Entry{path, line, pair.second});
    seen_[path] = {line, ok};
  }
}

void refuse_stuck_documents(const std::string& yaml_text) {
  std::istringstream in(yaml_text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  while (parser.HandleNextDocument(starts)) {
    const auto& m = starts.marks;
    if (m.size() >= 2 && m.back().pos == m[m.size() - 2].pos) {
      const auto at = static_cast<size_t>(std::max(m.back().pos, 0));
      throw YAML::ParserException(m.back(), fmt::format("unexpected '{}' where a value or key should start",
                                                        at < yaml_text.size() ? yaml_text.substr(at, 1) : ""));
    }
  }
}

}  // namespace ppctl::config::detail
