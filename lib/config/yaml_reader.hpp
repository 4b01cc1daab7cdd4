// Reading YAML for the job spec loader: the collected problems, lines, how scalars are typed, parsed and
// echoed, the typed readers of one value and the walk over a mapping's keys. Internal to config/; callers use
// load.hpp.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/suggest.hpp"

namespace ppctl::config::detail {

// ---------------------------------------------------------------------------------------------------------
// Problems: the collected messages.

/// One problem, kept with its line so that the final list reads from the top of the file down.
struct Problem {
  int line;
  std::string text;
};

/// Collects problems for one spec and throws them together.
class Problems {
 public:
  explicit Problems(std::string source) : source_(std::move(source)) {}

  /// Adds `SOURCE:LINE: PATH: value VALUE: RULE (fix: HINT)`; an empty `path` or absent `value` is left out
  /// (for problems with the whole document, or with a key rather than its value).
  void add(int line, const std::string& path, const std::optional<std::string>& value, const std::string& rule,
           const std::string& hint);

  /// As add, for a message that already ends in its own "(fix: ...)" (an error thrown by a reader of
  /// another file, e.g. a Hugging Face config.json), so that each problem carries one fix.
  void add_with_fix(int line, const std::string& path, const std::optional<std::string>& value,
                    const std::string& message);

  /// Adds `OPTION VALUE: RULE (fix: HINT)` for a command-line value (SpecOverrides); listed before the spec's.
  void add_option(const std::string& option, const std::string& value, const std::string& rule,
                  const std::string& hint);

  /// Throws ppctl::ConfigError with every problem, ordered by line (stable), if there is any.
  void throw_if_any();

 private:
  std::string source_;
  std::vector<Problem> problems_;
};

// ---------------------------------------------------------------------------------------------------------
// Scalars: how values are shown in messages and parsed. Plain (unquoted) scalars are typed by their text as
// in YAML 1.2's core schema; a quoted scalar is always a string, so `heads: "4"` is not an integer.

/// 1-based line of a node; 1 when yaml-cpp has no position for it.
int line_of(const YAML::Mark& mark);
int line_of(const YAML::Node& node);

/// `text` in double quotes, with `"` and `\` escaped and newlines and tabs written `\n`, `\t`. Call it as
/// `detail::quoted` on a non-const string: argument-dependent lookup finds std::quoted too, a closer match.
std::string quoted(const std::string& text);

/// A value as the message shows it: `5`, `2.5`, `"four"`, `null`, `[1, 2]`, `{a: 1}` (long ones cut).
std::string describe(const YAML::Node& node);

/// How a number's text parsed: a value, not a number at all, or a number outside the type's range.
enum class Parse { Ok, NotANumber, OutOfRange };

/// Finite YAML float or integer -> double (`.inf` and `.nan` are NotANumber; 1e999 is OutOfRange).
Parse parse_double(const std::string& text, double& out);

/// `a` or `a or b` (used to offer one or two example values).
std::string one_or_two(const std::optional<int64_t>& a, const std::optional<int64_t>& b);

// ---------------------------------------------------------------------------------------------------------
// Ranges.

/// Closed integer range; `why` (optional) explains the bound in the rule text.
struct IntRange {
  int64_t lo;
  int64_t hi;
  const char* why = nullptr;

  /// Whether `v` lies in [lo, hi].
  bool contains(int64_t v) const { return lo <= v && v <= hi; }
  /// The range as messages write it: `[1, 1024]`.
  std::string text() const { return fmt::format("[{}, {}]", lo, hi); }
};

/// Real range whose ends may be open: (0, 10], [0, 1), ...
struct RealRange {
  double lo;
  bool lo_open;
  double hi;
  bool hi_open;

  /// Whether `v` lies in the range, each end open or closed as given.
  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  /// The range as messages write it: `(0, 10]`.
  std::string text() const { return fmt::format("{}{}, {}{}", lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']'); }
};

// ---------------------------------------------------------------------------------------------------------
// Field readers. Each reads one YAML value into a JobSpec field, or reports why it cannot and returns false.

/// A value to read: its dotted YAML path (`model.heads`, `data.path[1]`), its line and the node.
struct Entry {
  std::string path;
  int line;
  YAML::Node value;
};

/// What readers share: the problem list and the folder relative data paths are resolved against.
struct Context {
  Problems& problems;
  std::string base_dir;  ///< absolute

  /// Reports a problem with the value of `entry`.
  void bad(const Entry& entry, const std::string& rule, const std::string& hint) {
    problems.add(entry.line, entry.path, describe(entry.value), rule, hint);
  }
};

/// `path` made absolute against `base_dir` when relative, normalised.
std::string resolve_against(const std::string& base_dir, const std::string& path);

/// Reads an integer in `range` into `out`; `example` (the field's default) appears in hints.
bool read_int(Context& c, const Entry& e, const IntRange& range, int64_t example, int64_t& out);

/// Reads a finite real number in `range` into `out`; integers are accepted. `example` appears in hints.
bool read_real(Context& c, const Entry& e, const RealRange& range, double example, double& out);

/// Other names users write for an enum value; used only for the did-you-mean hint, never accepted.
using HintAliases = std::vector<std::pair<std::string, std::string>>;

/// Reads one of `values` spelled as to_string() spells it (lower case, exact).
template <typename Enum>
bool read_enum(Context& c, const Entry& e, const std::vector<Enum>& values, const HintAliases& aliases, Enum& out) {
  std::vector<std::string> names;
  for (Enum v : values) names.push_back(to_string(v));
  if (e.value.IsScalar()) {
    for (Enum v : values) {
      if (e.value.Scalar() == to_string(v)) {
        out = v;
        return true;
      }
    }
  }
  std::optional<std::string> match;
  if (e.value.IsScalar()) {
    for (const auto& [alias, name] : aliases) {
      if (edit_distance(e.value.Scalar(), alias) == 0) match = name;
    }
    if (!match) match = closest_match(e.value.Scalar(), names);
  }
  c.bad(e, "must be one of " + join_names(names),
        match ? "did you mean '" + *match + "'?" : "write one of the listed values");
  return false;
}

/// Reads a non-empty string as written: a host name, a path. `what` names it in the rule, `example` in the hint.
bool read_text(Context& c, const Entry& e, const std::string& what, const std::string& example, std::string& out);

// ---------------------------------------------------------------------------------------------------------
// Mappings: the walk over their keys.

/// Where a key was seen (line of the key) and whether its value was accepted.
struct Seen {
  int line;
  bool ok;
  std::string label = "";  ///< how messages name the key when not by its path: "model.heads (from FILE n_head)"
};

/// Every key walked so far by its dotted path (`model`, `model.heads`, `data.blend[0].weight`).
using SeenKeys = std::map<std::string, Seen>;

/// Walks the mappings of a document key by key: reports the keys no reader gets (non-string, duplicate and
/// unknown ones) and records each other key in `seen` with its line and whether its reader accepted it.
class KeyWalk {
 public:
  /// The fix for the unknown key `name` in the mapping at `prefix` ("" at the top level) whose keys are
  /// `known`.
  using UnknownKeyHint = std::function<std::string(const std::string& name, const std::string& prefix,
                                                   const std::vector<std::string>& known)>;
  /// Reads the value of the key `name`; returns whether it was accepted.
  using KeyReader = std::function<bool(const std::string& name, const Entry& entry)>;

  KeyWalk(Context& c, SeenKeys& seen, UnknownKeyHint unknown_key_hint)
      : c_(c), seen_(seen), unknown_key_hint_(std::move(unknown_key_hint)) {}

  /// Walks the keys of `map`, whose dotted path is `prefix`: a repeated key is reported naming the line of
  /// the first, a key not in `known` with unknown_key_hint's fix; the others go to `read_key`.
  void for_each_key(const YAML::Node& map, const std::string& prefix, const std::vector<std::string>& known,
                    const KeyReader& read_key);

 private:
  Context& c_;
  SeenKeys& seen_;
  UnknownKeyHint unknown_key_hint_;
};

// ---------------------------------------------------------------------------------------------------------
// The document.

/// yaml-cpp 0.7's LoadAll never returns when a document starts with a token its parser does not consume
/// (a ',' outside [...] / {...} at the start of the text or after a top-level `- item`; found by
/// tests/fuzz/fuzz_spec_yaml.cpp): each call yields another empty document at the same place. This walks the
/// documents first and throws YAML::ParserException where a document starts where the one before it did, so
/// that LoadAll afterwards always ends.
void refuse_stuck_documents(const std::string& yaml_text);

}  // namespace ppctl::config::detail
