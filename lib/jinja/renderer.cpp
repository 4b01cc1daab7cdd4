// The renderer (see renderer.hpp): statements, scopes, attribute and item lookup as jinja2's sandbox does
// them (jinja2/sandbox.py, jinja2/runtime.py), macros, limits.
#include "jinja/renderer.hpp"

#include <algorithm>

#include "jinja/builtins.hpp"
#include "jinja/text.hpp"

namespace ppctl::jinja {

struct Renderer::Depth {
  Renderer& r;
  explicit Depth(Renderer& renderer) : r(renderer) {
    if (++r.depth_ > r.options_.limits.max_depth) {
      r.fail("evaluation nests deeper than the limit max_depth = " + std::to_string(r.options_.limits.max_depth) +
             " (macro recursion, or nesting too deep)",
             Failure::kLimit);
    }
  }
  ~Depth() { --r.depth_; }
};

namespace {

/// A `{% macro %}`: its parameters and body, run in the scope where it was defined. It holds that scope
/// weakly: the macro lives in one of its frames, and a strong hold would be a cycle that is never freed.
class Macro : public Callable {
 public:
  Macro(const Node& node, const Renderer::Scope& scope, Value caller = {})
      : node_(node), scope_(scope.begin(), scope.end()), caller_(std::move(caller)) {}

  Value call(Renderer& r, const CallArgs& args) const override {
    const auto& params = node_.params;
    if (args.positional.size() > params.size()) {
      throw EvalError("macro '" + node_.name + "' takes not more than " + std::to_string(params.size()) +
                      " argument(s)");
    }
    Renderer::Frame frame;
    for (size_t k = 0; k < params.size(); ++k) {
      const Value* given = args.get(k, params[k].first);
      if (given) {
        frame[params[k].first] = *given;
      } else if (params[k].second) {
        frame[params[k].first] = r.eval(*params[k].second);
      } else {
        frame[params[k].first] = Value::undefined("parameter '" + params[k].first + "' was not provided");
      }
    }
    for (const auto& kw : args.keywords) {
      const bool known = std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == kw.first; });
      if (!known) throw EvalError("macro '" + node_.name + "' takes no keyword argument '" + kw.first + "'");
    }
    if (!caller_.is_undefined()) frame["caller"] = caller_;
    Renderer::Scope scope;
    for (const auto& weak : scope_) {
      scope.push_back(weak.lock());
      if (!scope.back()) throw EvalError("macro '" + name() + "' is called after the block that defined it ended");
    }
    return Value::from(r.render_in(scope, std::move(frame), node_.body));
  }

  std::string name() const override { return node_.name.empty() ? "caller" : node_.name; }
  /// This macro with `caller` defined in its body (`{% call %}`).
  Macro with_caller(Value caller) const {
    Macro m = *this;
    m.caller_ = std::move(caller);
    return m;
  }

 private:
  const Node& node_;
  std::vector<std::weak_ptr<Renderer::Frame>> scope_;
  Value caller_;
};

/// loop.cycle(a, b, ...): the argument at loop.index0 modulo their count.
class Cycle : public Callable {
 public:
  explicit Cycle(int64_t index0) : index0_(index0) {}
  Value call(Renderer&, const CallArgs& args) const override {
    if (args.positional.empty()) throw EvalError("no items for cycling given");
    return args.positional[static_cast<size_t>(index0_) % args.positional.size()];
  }
  std::string name() const override { return "loop.cycle"; }

 private:
  int64_t index0_;
};

}  // namespace

void undefined_error(const Value& v) {
  throw EvalError(v.text.empty() ? std::string("a value is undefined") : v.text, Failure::kUndefined);
}

Renderer::Renderer(const std::string& origin, const RenderOptions& options) : origin_(origin), options_(options) {}

void Renderer::fail(const std::string& message, Failure failure) const {
  throw TemplateError(origin_, line_, message, failure);
}

void Renderer::charge(int64_t n) {
  steps_ += n;
  if (steps_ > options_.limits.max_steps) {
    fail("rendering takes more than the limit max_steps = " + std::to_string(options_.limits.max_steps) +
         " steps (a loop too long, or a range too large)",
         Failure::kLimit);
  }
}

std::time_t Renderer::now() const { return options_.now ? *options_.now : std::time(nullptr); }

Rendered Renderer::run(const Program& program, const Json& context) {
  if (!context.is_object()) throw TemplateError(origin_, 0, "the context must be a JSON object");
  auto globals = std::make_shared<Frame>();
  Rendered result;
  try {
    for (const auto& [k, v] : context.items()) {
      try {
        (*globals)[k] = from_json(v, options_.limits.max_depth - 1);
      } catch (const EvalError& e) {  // the template has not started: name the variable, not a line
        throw TemplateError(origin_, 0, std::string(e.what()) + " = " + std::to_string(options_.limits.max_depth) +
                                            " (context variable '" + k + "')",
                            e.failure());
      }
    }
    scope_ = {globals, std::make_shared<Frame>()};
    out_ = &result.text;
    exec(program.body);
  } catch (const EvalError& e) {
    fail(e.what(), e.failure());
  }
  result.generation = std::move(generation_);
  return result;
}

std::string Renderer::render_in(const Scope& scope, Frame frame, const Body& body) {
  Depth guard(*this);
  Scope saved = std::move(scope_);
  scope_ = scope;
  scope_.push_back(std::make_shared<Frame>(std::move(frame)));
  std::string text;
  std::string* saved_out = out_;
  out_ = &text;
  const int line = line_;
  try {
    exec(body);
  } catch (...) {
    out_ = saved_out;
    scope_ = std::move(saved);
    throw;
  }
  out_ = saved_out;
  scope_ = std::move(saved);
  line_ = line;
  return text;
}

void Renderer::write(const std::string& s) {
  out_->append(s);
  if (static_cast<int64_t>(out_->size()) > options_.limits.max_output_bytes) {
    fail("the output grows past the limit max_output_bytes = " + std::to_string(options_.limits.max_output_bytes),
         Failure::kLimit);
  }
}

Renderer::Flow Renderer::exec(const Body& body) {
  Depth guard(*this);
  for (const auto& n : body) {
    const Flow f = exec(*n);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::exec(const Node& n) {
  line_ = n.line;
  charge(1);
  switch (n.kind) {
    case Node::Kind::Text: write(n.text); return Flow::Normal;
    case Node::Kind::Output: {
      const Value v = eval(*n.expr);
      line_ = n.line;
      write(to_str(v));
      return Flow::Normal;
    }
    case Node::Kind::If:
      for (const auto& [cond, body] : n.branches) {
        if (!cond || truthy(eval(*cond))) return exec(body);
      }
      return Flow::Normal;
    case Node::Kind::For: return exec_for(n);
    case Node::Kind::Set: exec_set(n); return Flow::Normal;
    case Node::Kind::Macro:
      (*scope_.back())[n.name] = Value::from(std::make_shared<Macro>(n, scope_));
      return Flow::Normal;
    case Node::Kind::CallBlock: {
      const Expr& call = *n.expr;
      const Value callee = eval(*call.args[0]);
      const auto* macro =
          callee.kind == Value::Kind::Callable ? dynamic_cast<const Macro*>(callee.callable.get()) : nullptr;
      if (!macro) throw EvalError("'{% call %}' needs a macro to call");
      const CallArgs args = arguments(call, 1);
      const Value caller = Value::from(std::make_shared<Macro>(n, scope_));
      const Value text = macro->with_caller(caller).call(*this, args);
      line_ = n.line;
      write(to_str(text));
      return Flow::Normal;
    }
    case Node::Kind::Generation: {
      const size_t begin = out_->size();
      const Flow f = exec(n.body);
      generation_.emplace_back(begin, out_->size());
      return f;
    }
    case Node::Kind::Break: return Flow::Break;
    case Node::Kind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

void Renderer::assign(const std::vector<std::string>& targets, const Value& value) {
  Frame& frame = *scope_.back();
  if (targets.size() == 1) {
    frame[targets[0]] = value;
    return;
  }
  const std::vector<Value> items = iterate(value);
  if (items.size() != targets.size()) {
    throw EvalError(items.size() < targets.size()
                        ? "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                              std::to_string(items.size()) + ")"
                        : "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  }
  for (size_t k = 0; k < targets.size(); ++k) frame[targets[k]] = items[k];
}

Renderer::Flow Renderer::exec_for(const Node& n) {
  Depth guard(*this);
  const Value iterable = eval(*n.expr);
  std::vector<Value> items = iterate(iterable);
  charge(static_cast<int64_t>(items.size()));
  if (n.filter) {
    std::vector<Value> kept;
    for (auto& item : items) {
      scope_.push_back(std::make_shared<Frame>());
      try {
        assign(n.targets, item);
        const bool keep = truthy(eval(*n.filter));
        scope_.pop_back();
        if (keep) kept.push_back(std::move(item));
      } catch (...) {
        scope_.pop_back();
        throw;
      }
    }
    items = std::move(kept);
  }
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < length; ++k) {
    charge(1);
    Dict loop;
    loop.items = {{"index", Value::from(k + 1)},
                  {"index0", Value::from(k)},
                  {"revindex", Value::from(length - k)},
                  {"revindex0", Value::from(length - k - 1)},
                  {"first", Value::from(k == 0)},
                  {"last", Value::from(k == length - 1)},
                  {"length", Value::from(length)},
                  {"depth", Value::from(int64_t{1})},
                  {"depth0", Value::from(int64_t{0})},
                  {"previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("there is no previous item")},
                  {"nextitem", k + 1 < length ? items[static_cast<size_t>(k + 1)]
                                              : Value::undefined("there is no next item")},
                  {"cycle", Value::from(std::make_shared<Cycle>(k))}};
    scope_.push_back(std::make_shared<Frame>());
    Flow f = Flow::Normal;
    try {
      (*scope_.back())["loop"] = Value::namespace_of(std::move(loop));
      assign(n.targets, items[static_cast<size_t>(k)]);
      f = exec(n.body);
    } catch (...) {
      scope_.pop_back();
      throw;
    }
    scope_.pop_back();
    if (f == Flow::Break) break;
  }
  if (length == 0 && !n.else_body.empty()) return exec(n.else_body);
  return Flow::Normal;
}

void Renderer::exec_set(const Node& n) {
  Value value;
  if (n.expr) {
    value = eval(*n.expr);
  } else {
    value = Value::from(render_in(scope_, {}, n.body));
  }
  line_ = n.line;
  if (n.attr.empty()) {
    assign(n.targets, value);
    return;
  }
  const Value ns = lookup(n.targets[0]);
  if (ns.kind != Value::Kind::Namespace) throw EvalError("cannot assign attribute on non-namespace object");
  if (!n.attr.empty() && n.attr[0] == '_') {
    throw EvalError("a chat template cannot store an underscore-prefixed attribute on a namespace ('" + n.attr + "')");
  }
  ns.dict->set(n.attr, std::move(value));
}

Value Renderer::lookup(const std::string& name) const {
  for (auto it = scope_.rbegin(); it != scope_.rend(); ++it) {
    const auto found = (*it)->find(name);
    if (found != (*it)->end()) return found->second;
  }
  Value g = global(name);
  if (!g.is_undefined()) return g;
  return Value::undefined("'" + name + "' is undefined");
}

Value Renderer::eval(const Expr& e) {
  Depth guard(*this);
  line_ = e.line;
  charge(1);
  Value v = eval_inner(e);
  if (v.kind == Value::Kind::String) {
    charge(static_cast<int64_t>(v.text.size() / 16));
    if (static_cast<int64_t>(v.text.size()) > options_.limits.max_output_bytes) {
      fail("a string grows past the limit max_output_bytes = " + std::to_string(options_.limits.max_output_bytes),
           Failure::kLimit);
    }
  } else if (v.kind == Value::Kind::List) {
    charge(static_cast<int64_t>(v.list->size()));
  }
  return v;
}

CallArgs Renderer::arguments(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t k = first; k < e.args.size(); ++k) args.positional.push_back(eval(*e.args[k]));
  for (const auto& [key, value] : e.keywords) args.keywords.emplace_back(key, eval(*value));
  return args;
}

Value Renderer::call(const Value& callee, const CallArgs& args) {
  if (callee.kind == Value::Kind::Callable) {
    Depth guard(*this);
    return callee.callable->call(*this, args);
  }
  if (callee.is_undefined()) undefined_error(callee);
  throw EvalError("'" + callee.type_name() + "' object is not callable");
}

Value Renderer::call_expr(const Expr& e) {
  const Value callee = eval(*e.args[0]);
  const CallArgs args = arguments(e, 1);
  line_ = e.line;
  return call(callee, args);
}

Value Renderer::attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) undefined_error(object);
  if (!name.empty() && name[0] >= '0' && name[0] <= '9') return item(object, Value::from(static_cast<int64_t>(std::stoll(name))));
  if (object.kind == Value::Kind::Namespace) {
    const Value* v = object.dict->find(name);
    return v ? *v : Value::undefined("'Namespace object' has no attribute '" + name + "'");
  }
  Value method = method_of(object, name);
  if (!method.is_undefined()) return method;
  if (object.kind == Value::Kind::Dict) {
    const Value* v = object.dict->find(name);
    if (v) return *v;
  }
  const std::string what = object.kind == Value::Kind::None ? "'None'" : "'" + object.type_name() + " object'";
  return Value::undefined(what + " has no attribute '" + name + "'");
}

Value Renderer::item(const Value& object, const Value& key) {
  if (object.is_undefined()) undefined_error(object);
  if (object.kind == Value::Kind::Dict && key.is_string()) {
    const Value* v = object.dict->find(key.text);
    if (v) return *v;
  } else if ((object.kind == Value::Kind::List || object.is_string()) &&
             (key.kind == Value::Kind::Int || key.kind == Value::Kind::Bool)) {
    const int64_t i = key.kind == Value::Kind::Int ? key.integer : key.boolean;
    if (object.kind == Value::Kind::List) {
      const auto n = static_cast<int64_t>(object.list->size());
      const int64_t at = i < 0 ? i + n : i;
      if (at >= 0 && at < n) return (*object.list)[static_cast<size_t>(at)];
      return Value::undefined(object.type_name() + " object has no element " + std::to_string(i));
    }
    const auto offsets = text::code_point_offsets(object.text);
    const auto n = static_cast<int64_t>(offsets.size()) - 1;
    const int64_t at = i < 0 ? i + n : i;
    if (at >= 0 && at < n) {
      const auto b = offsets[static_cast<size_t>(at)];
      return Value::from(object.text.substr(b, offsets[static_cast<size_t>(at) + 1] - b));
    }
    return Value::undefined("str object has no element " + std::to_string(i));
  } else if (object.kind == Value::Kind::Namespace && key.is_string()) {
    return attribute(object, key.text);
  }
  if (key.is_string()) {
    Value method = method_of(object, key.text);
    if (!method.is_undefined()) return method;
  }
  const std::string what = object.kind == Value::Kind::None ? "'None'" : "'" + object.type_name() + " object'";
  return Value::undefined(what + " has no attribute " + to_repr(key));
}

namespace {

/// Python's slice.indices(): the start, stop and step over a sequence of length n.
void slice_bounds(const Value* start, const Value* stop, const Value* step, int64_t n, int64_t& b, int64_t& e,
                  int64_t& s) {
  auto as_int = [](const Value* v, int64_t fallback) -> int64_t {
    if (!v || v->kind == Value::Kind::None) return fallback;
    if (v->kind == Value::Kind::Int) return v->integer;
    if (v->kind == Value::Kind::Bool) return v->boolean;
    throw EvalError("slice indices must be integers or None");
  };
  s = as_int(step, 1);
  if (s == 0) throw EvalError("slice step cannot be zero");
  auto clamp = [&](int64_t i, bool upper) {
    if (i < 0) i += n;
    if (s > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1) + (upper ? 0 : 0);
  };
  b = (!start || start->kind == Value::Kind::None) ? (s > 0 ? 0 : n - 1) : clamp(as_int(start, 0), false);
  e = (!stop || stop->kind == Value::Kind::None) ? (s > 0 ? n : -1) : clamp(as_int(stop, 0), true);
}

}  // namespace

Value Renderer::slice(const Expr& e) {
  const Value object = eval(*e.args[0]);
  Value parts[3];
  for (int k = 0; k < 3; ++k) {
    if (e.args[static_cast<size_t>(k) + 1]) parts[k] = eval(*e.args[static_cast<size_t>(k) + 1]);
  }
  auto part = [&](int k) { return e.args[static_cast<size_t>(k) + 1] ? &parts[k] : nullptr; };
  if (object.is_undefined()) undefined_error(object);
  int64_t b = 0, end = 0, s = 1;
  if (object.kind == Value::Kind::List) {
    slice_bounds(part(0), part(1), part(2), static_cast<int64_t>(object.list->size()), b, end, s);
    std::vector<Value> out;
    for (int64_t i = b; s > 0 ? i < end : i > end; i += s) out.push_back((*object.list)[static_cast<size_t>(i)]);
    return Value::from(std::move(out), object.is_tuple);
  }
  if (object.is_string()) {
    const auto offsets = text::code_point_offsets(object.text);
    slice_bounds(part(0), part(1), part(2), static_cast<int64_t>(offsets.size()) - 1, b, end, s);
    std::string out;
    for (int64_t i = b; s > 0 ? i < end : i > end; i += s) {
      const auto at = offsets[static_cast<size_t>(i)];
      out.append(object.text, at, offsets[static_cast<size_t>(i) + 1] - at);
    }
    return Value::from(std::move(out));
  }
  throw EvalError("'" + object.type_name() + "' object is not subscriptable");
}

Value Renderer::eval_inner(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.literal;
    case Expr::Kind::Name: return lookup(e.name);
    case Expr::Kind::Attr: return attribute(eval(*e.args[0]), e.name);
    case Expr::Kind::Item: {
      const Value object = eval(*e.args[0]);
      return item(object, eval(*e.args[1]));
    }
    case Expr::Kind::Slice: return slice(e);
    case Expr::Kind::Call: return call_expr(e);
    case Expr::Kind::Filter: {
      const Value subject = eval(*e.args[0]);
      const CallArgs args = arguments(e, 1);
      line_ = e.line;
      return apply_filter(*this, e.name, subject, args);
    }
    case Expr::Kind::Test: {
      const Value subject = eval(*e.args[0]);
      const CallArgs args = arguments(e, 1);
      line_ = e.line;
      return Value::from(apply_test(*this, e.name, subject, args) != e.negated);
    }
    case Expr::Kind::Unary: {
      const Value v = eval(*e.args[0]);
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number()) throw EvalError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v.kind == Value::Kind::Bool ? Value::from(int64_t{v.boolean}) : v;
      if (v.kind == Value::Kind::Float) return Value::from(-v.real);
      return binary_op("-", Value::from(int64_t{0}), v);
    }
    case Expr::Kind::Binary: {
      const Value a = eval(*e.args[0]);
      const Value b = eval(*e.args[1]);
      line_ = e.line;
      return binary_op(e.name, a, b);
    }
    case Expr::Kind::Compare: {
      Value left = eval(*e.args[0]);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1]);
        if (!compare_op(e.ops[k], left, right)) return Value::from(false);
        left = std::move(right);
      }
      return Value::from(true);
    }
    case Expr::Kind::And: {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    case Expr::Kind::Or: {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    case Expr::Kind::Not: return Value::from(!truthy(eval(*e.args[0])));
    case Expr::Kind::Cond:
      if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined("the inline if's condition was false and it has no else");
    case Expr::Kind::ListLit:
    case Expr::Kind::TupleLit: {
      std::vector<Value> items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::from(std::move(items), e.kind == Expr::Kind::TupleLit);
    }
    case Expr::Kind::DictLit: {
      Dict d;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        const Value key = eval(*e.args[k]);
        if (!key.is_string()) throw EvalError("ppctl's chat-template engine supports only string keys in dict literals");
        d.set(key.text, eval(*e.args[k + 1]));
      }
      return Value::from(std::move(d));
    }
  }
  return {};
}

}  // namespace ppctl::jinja
