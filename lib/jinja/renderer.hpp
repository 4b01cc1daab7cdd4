// The renderer: walks a Program over a context, within the Limits of one render (one instance per render).
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "jinja/ast.hpp"
#include "jinja/value.hpp"

namespace ppctl::jinja {

class Renderer {
 public:
  Renderer(const std::string& origin, const RenderOptions& options);

  /// Renders `program` over `context`; throws TemplateError (origin and line of the failing node).
  Rendered run(const Program& program, const Json& context);

  Value eval(const Expr& e);
  /// Calls a callable value (macro, global, bound method); EvalError when `callee` cannot be called.
  Value call(const Value& callee, const CallArgs& args);
  /// Counts `n` units of work against Limits::max_steps.
  void charge(int64_t n);
  /// The clock of strftime_now.
  std::time_t now() const;
  const Limits& limits() const { return options_.limits; }

  using Frame = std::unordered_map<std::string, Value>;
  using Scope = std::vector<std::shared_ptr<Frame>>;

  /// Runs `body` in a fresh frame above `scope` (a macro's: the scope where it was defined), writing to a
  /// fresh output; returns what it wrote.
  std::string render_in(const Scope& scope, Frame frame, const Body& body);

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body);
  Flow exec(const Node& n);
  Flow exec_for(const Node& n);
  void exec_set(const Node& n);
  void write(const std::string& s);
  [[noreturn]] void fail(const std::string& message, Failure failure = Failure::kTemplate) const;
  Value lookup(const std::string& name) const;
  Value eval_inner(const Expr& e);
  Value attribute(const Value& object, const std::string& name);
  Value item(const Value& object, const Value& key);
  Value slice(const Expr& e);
  Value call_expr(const Expr& e);
  CallArgs arguments(const Expr& e, size_t first);
  void assign(const std::vector<std::string>& targets, const Value& value);

  struct Depth;

  std::string origin_;
  RenderOptions options_;
  Scope scope_;
  std::string* out_ = nullptr;
  std::vector<std::pair<size_t, size_t>> generation_;
  int64_t steps_ = 0;
  int depth_ = 0;
  int line_ = 0;
};

/// Python's binary operators (+ - * / // % ** ~) and comparisons (== != < <= > >= in, not in).
Value binary_op(const std::string& op, const Value& a, const Value& b);
bool compare_op(const std::string& op, const Value& a, const Value& b);
/// The hint-carrying error for using `v` (Undefined) where jinja2 raises UndefinedError.
[[noreturn]] void undefined_error(const Value& v);

}  // namespace ppctl::jinja
