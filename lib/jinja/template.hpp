// The public face of the chat-template engine: parse a Jinja template once, render it over a JSON context.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bad_input.hpp"

namespace ppctl::jinja {

/// The context a template reads (`messages`, `add_generation_prompt`, `bos_token`, ...). Ordered so that
/// `tojson` and iteration over a mapping keep the key order of the input, as Python dicts do.
using Json = nlohmann::ordered_json;

/// Bounds on one render; crossing one throws TemplateError naming the limit and the template's origin.
/// The parser applies `max_depth` to nesting too (its defaults, since a Template is parsed before any
/// render options are known).
struct Limits {
  int64_t max_output_bytes = int64_t{1} << 22;  ///< bytes of rendered text
  int64_t max_steps = 50'000'000;               ///< evaluation steps: expressions, statements, loop turns
  int max_depth = 200;                          ///< nested macro calls, loops and expressions
};

/// How to render. `now` is the clock of the `strftime_now(format)` global, formatted in local time as
/// transformers' `datetime.now().strftime(format)` does; unset, the current time.
struct RenderOptions {
  Limits limits;
  std::optional<std::time_t> now;
};

/// What render() writes: the text, and the byte ranges [begin, end) of `text` written inside
/// `{% generation %} ... {% endgeneration %}` blocks (transformers' AssistantTracker; it counts Python
/// characters, these count bytes of the UTF-8 text), in the order the blocks ended.
struct Rendered {
  std::string text;
  std::vector<std::pair<size_t, size_t>> generation;
};

/// What a TemplateError is about, so that a caller can say how to fix it: the template itself (a syntax or
/// type error, a construct outside the subset), `raise_exception(msg)` called by the template, a crossed
/// Limits bound (steps, output bytes, depth; also a context value nested deeper than max_depth), an undefined
/// value used where jinja2 raises UndefinedError (a field the context lacks), or a 64-bit integer overflow.
enum class Failure : uint8_t { kTemplate, kRaised, kLimit, kUndefined, kOverflow };

/// A template that cannot be parsed or rendered: a syntax error, a construct outside the supported subset
/// or outside the sandbox (include, import, extends, ...), an unknown filter/test/function, an undefined
/// value used where jinja2 raises UndefinedError, a type error, `raise_exception(msg)` called by the
/// template itself, or a crossed Limits bound. `what()` reads `ORIGIN:LINE: MESSAGE`. Bad input (exit
/// code 2), as every DataError.
class TemplateError : public ppctl::DataError {
 public:
  TemplateError(const std::string& origin, int line, const std::string& message,
                Failure failure = Failure::kTemplate);
  const std::string& origin() const noexcept { return origin_; }
  Failure failure() const noexcept { return failure_; }
  int line() const noexcept { return line_; }
  /// The message without origin and line (for `raise_exception`, the template's own text).
  const std::string& message() const noexcept { return message_; }

 private:
  std::string origin_;
  int line_;
  std::string message_;
  Failure failure_;
};

struct Program;  // the parsed template (jinja/ast.hpp)

/// A Jinja template in the subset Hugging Face chat templates use, rendered as transformers'
/// `render_jinja_template` (transformers/utils/chat_template_utils.py) renders it: jinja2's
/// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols extension
/// (break/continue), the `generation` block, the globals `raise_exception`, `strftime_now`, `namespace`
/// and `dict`, and `tojson` as Python's `json.dumps(x, ensure_ascii=False, ...)`. The subset and its
/// limits are listed in docs/chat-templates.md. Thread-safe: render() does not change the Template.
class Template {
 public:
  /// Parses `source`; `origin` names it in every message (a file path, or "PATH: chat_template").
  /// Throws TemplateError on a syntax error, a construct outside the subset or the sandbox, an unknown
  /// filter or test, or nesting deeper than `limits.max_depth`.
  Template(std::string_view source, std::string origin, const Limits& limits = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  /// Renders over `context` (an object: its keys are the template's variables). Throws TemplateError
  /// (see above), also when a value of `context` nests deeper than `options.limits.max_depth` (converting
  /// it recurses once per level); never changes `context`.
  Rendered render(const Json& context, const RenderOptions& options = {}) const;

  const std::string& origin() const noexcept { return origin_; }

 private:
  std::string origin_;
  std::shared_ptr<const Program> program_;
};

}  // namespace ppctl::jinja
