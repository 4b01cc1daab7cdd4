// The values a template computes with: Python's None, bool, int, float, str, list, tuple, dict, plus jinja2's
// Undefined, namespace() objects and callables (macros, bound methods, globals).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/template.hpp"

namespace ppctl::jinja {

/// A failure while evaluating, without a position; the renderer adds origin and line (TemplateError) and
/// keeps its kind.
class EvalError : public std::runtime_error {
 public:
  explicit EvalError(const std::string& message, Failure failure = Failure::kTemplate)
      : std::runtime_error(message), failure_(failure) {}
  Failure failure() const noexcept { return failure_; }

 private:
  Failure failure_;
};

struct Value;
class Renderer;

/// A mapping with string keys in insertion order (Python dicts keep it; so do namespace() objects).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

/// Arguments of a call: positional, then keyword in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  /// The argument at `index` or named `name`, or nullptr; removes nothing.
  const Value* get(size_t index, std::string_view name) const;
  /// Throws EvalError when more than `max_positional` positional or a keyword not in `names` was given.
  void check(std::string_view callee, size_t max_positional, std::initializer_list<std::string_view> names) const;
};

/// Something a template can call: a macro, a global function, a bound method.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual Value call(Renderer& renderer, const CallArgs& args) const = 0;
  virtual std::string name() const = 0;
};

/// One value. Lists, dicts and namespaces are shared (Python's reference semantics); only namespaces can be
/// changed after they are made (`set ns.attr = ...`), as in jinja2's ImmutableSandboxedEnvironment.
struct Value {
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };
  Kind kind = Kind::Undefined;
  bool is_tuple = false;   // a List written as a tuple: prints as (a, b)
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;        // String: the UTF-8 text; Undefined: why it is undefined (jinja2's hint)
  std::shared_ptr<std::vector<Value>> list;
  std::shared_ptr<Dict> dict;  // Dict and Namespace
  std::shared_ptr<const Callable> callable;

  static Value undefined(std::string hint);
  static Value none();
  static Value from(bool b);
  static Value from(int64_t i);
  static Value from(double d);
  static Value from(std::string s);
  static Value from(std::vector<Value> items, bool tuple = false);
  static Value from(Dict d);
  static Value namespace_of(Dict d);
  static Value from(std::shared_ptr<const Callable> c);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_mapping() const { return kind == Kind::Dict || kind == Kind::Namespace; }
  /// Python's name of the type, as in its error messages ("str", "NoneType", ...).
  std::string type_name() const;
};

/// Python's truth value (jinja2's Undefined is false).
bool truthy(const Value& v);
/// Python's str(v), as `{{ v }}` prints it (Undefined prints as nothing).
std::string to_str(const Value& v);
/// Python's repr(v) (strings quoted as Python quotes them).
std::string to_repr(const Value& v);
/// Python's ==, with 1 == 1.0 == True; Undefined equals only Undefined.
bool equal(const Value& a, const Value& b);
/// Python's <: numbers with numbers, strings by code point, lists element-wise; else EvalError.
bool less(const Value& a, const Value& b);
/// The elements `for` and the iterating filters see: a list's items, a dict's keys, a string's characters
/// (code points), nothing for Undefined. EvalError for what Python cannot iterate.
std::vector<Value> iterate(const Value& v);
/// The value of a JSON document (objects keep their key order). EvalError (Failure::kLimit) when its
/// containers nest deeper than `max_depth` (the conversion recurses once per level: a value nested tens of
/// thousands deep would overflow the stack), Failure::kOverflow for an integer above int64's range.
Value from_json(const Json& j, int max_depth);
/// Python's `json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...)`; indent < 0
/// means None. EvalError for what json.dumps refuses (Undefined, callables, namespaces).
std::string to_json(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep,
                    bool sort_keys, bool ensure_ascii);
/// Python's repr(float): the shortest text that reads back, with ".0" or an exponent as Python writes it.
std::string float_repr(double d);

}  // namespace ppctl::jinja
