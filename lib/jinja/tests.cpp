// jinja2's built-in tests (`x is defined`, `x is string`, ...; jinja2/tests.py) that chat templates use.
#include <functional>
#include <map>

#include "jinja/builtins.hpp"
#include "jinja/renderer.hpp"
#include "jinja/text.hpp"

namespace ppctl::jinja {
namespace {

using Test = std::function<bool(const Value&, const CallArgs&)>;

const Value& operand(const CallArgs& a, const char* test) {
  if (a.positional.empty()) throw EvalError(std::string("the test '") + test + "' needs an argument");
  return a.positional[0];
}

bool cased(const std::string& s, bool want_lower) {
  bool any = false;
  for (char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      any = true;
      if ((c >= 'a' && c <= 'z') != want_lower) return false;
    }
  }
  return any;
}

int64_t integer_of(const Value& v, const char* test) {
  if (v.kind == Value::Kind::Int) return v.integer;
  if (v.kind == Value::Kind::Bool) return v.boolean;
  throw EvalError(std::string("the test '") + test + "' needs an integer");
}

const std::map<std::string, Test, std::less<>>& tests() {
  using K = Value::Kind;
  static const std::map<std::string, Test, std::less<>> table = {
      {"boolean", [](const Value& v, const CallArgs&) { return v.kind == K::Bool; }},
      {"callable", [](const Value& v, const CallArgs&) { return v.kind == K::Callable; }},
      {"defined", [](const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"divisibleby", [](const Value& v, const CallArgs& a) {
         const int64_t d = integer_of(operand(a, "divisibleby"), "divisibleby");
         if (d == 0) throw EvalError("integer modulo by zero");
         return d == -1 || integer_of(v, "divisibleby") % d == 0;
       }},
      {"eq", [](const Value& v, const CallArgs& a) { return compare_op("==", v, operand(a, "eq")); }},
      {"escaped", [](const Value&, const CallArgs&) { return false; }},
      {"even", [](const Value& v, const CallArgs&) { return integer_of(v, "even") % 2 == 0; }},
      {"false", [](const Value& v, const CallArgs&) { return v.kind == K::Bool && !v.boolean; }},
      {"float", [](const Value& v, const CallArgs&) { return v.kind == K::Float; }},
      {"ge", [](const Value& v, const CallArgs& a) { return compare_op(">=", v, operand(a, "ge")); }},
      {"gt", [](const Value& v, const CallArgs& a) { return compare_op(">", v, operand(a, "gt")); }},
      {"in", [](const Value& v, const CallArgs& a) { return compare_op("in", v, operand(a, "in")); }},
      {"integer", [](const Value& v, const CallArgs&) { return v.kind == K::Int; }},
      {"iterable", [](const Value& v, const CallArgs&) {
         return v.kind == K::List || v.kind == K::Dict || v.kind == K::String || v.kind == K::Undefined;
       }},
      {"le", [](const Value& v, const CallArgs& a) { return compare_op("<=", v, operand(a, "le")); }},
      {"lower", [](const Value& v, const CallArgs&) { return v.is_string() && cased(v.text, true); }},
      {"lt", [](const Value& v, const CallArgs& a) { return compare_op("<", v, operand(a, "lt")); }},
      {"mapping", [](const Value& v, const CallArgs&) { return v.kind == K::Dict; }},
      {"ne", [](const Value& v, const CallArgs& a) { return compare_op("!=", v, operand(a, "ne")); }},
      {"none", [](const Value& v, const CallArgs&) { return v.kind == K::None; }},
      {"number", [](const Value& v, const CallArgs&) { return v.is_number(); }},
      {"odd", [](const Value& v, const CallArgs&) { return integer_of(v, "odd") % 2 != 0; }},
      {"sameas", [](const Value& v, const CallArgs& a) {
         const Value& o = operand(a, "sameas");
         if (v.kind != o.kind) return false;
         switch (v.kind) {
           case K::None: case K::Undefined: return true;
           case K::Bool: return v.boolean == o.boolean;
           case K::List: return v.list == o.list;
           case K::Dict: case K::Namespace: return v.dict == o.dict;
           case K::Callable: return v.callable == o.callable;
           default: return equal(v, o);  // small ints and interned strings are the same object in CPython
         }
       }},
      {"sequence", [](const Value& v, const CallArgs&) {
         return v.kind == K::List || v.kind == K::Dict || v.kind == K::String || v.kind == K::Undefined;
       }},
      {"string", [](const Value& v, const CallArgs&) { return v.is_string(); }},
      {"true", [](const Value& v, const CallArgs&) { return v.kind == K::Bool && v.boolean; }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"upper", [](const Value& v, const CallArgs&) { return v.is_string() && cased(v.text, false); }},
  };
  return table;
}

const std::map<std::string, std::string, std::less<>>& aliases() {
  static const std::map<std::string, std::string, std::less<>> table = {
      {"equalto", "eq"}, {"greaterthan", "gt"}, {"lessthan", "lt"}};
  return table;
}

}  // namespace

bool has_test(std::string_view name) { return tests().count(name) || aliases().count(name); }

bool apply_test(Renderer&, const std::string& name, const Value& subject, const CallArgs& args) {
  const auto alias = aliases().find(name);
  const auto it = tests().find(alias == aliases().end() ? name : alias->second);
  if (it == tests().end()) throw EvalError("no test named '" + name + "'");
  return it->second(subject, args);
}

}  // namespace ppctl::jinja
