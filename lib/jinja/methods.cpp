// The Python methods of str, dict and list that chat templates call (`content.strip()`, `message.get(...)`),
// limited as jinja2's ImmutableSandboxedEnvironment limits them: nothing that changes a list or dict.
#include <algorithm>
#include <set>

#include "jinja/builtins.hpp"
#include "jinja/renderer.hpp"
#include "jinja/text.hpp"

namespace ppctl::jinja {
namespace {

std::optional<std::string> opt_text(const CallArgs& a, size_t index, const char* name) {
  const Value* v = a.get(index, name);
  if (!v || v->kind == Value::Kind::None) return std::nullopt;
  if (!v->is_string()) throw EvalError(std::string("argument '") + name + "' must be str or None, not " + v->type_name());
  return v->text;
}

long opt_long(const CallArgs& a, size_t index, const char* name, long fallback) {
  const Value* v = a.get(index, name);
  if (!v) return fallback;
  if (v->kind != Value::Kind::Int) throw EvalError(std::string("argument '") + name + "' must be an integer");
  return static_cast<long>(std::clamp<int64_t>(v->integer, -1, 1L << 30));
}

const Value& required(const CallArgs& a, size_t index, const char* method) {
  if (a.positional.size() <= index) throw EvalError(std::string(method) + "() is missing an argument");
  return a.positional[index];
}

Value strings(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  for (const auto& p : parts) out.push_back(Value::from(p));
  return Value::from(std::move(out));
}

/// startswith / endswith: a prefix or a tuple of them.
bool affix(const std::string& s, const Value& what, bool at_start) {
  if (what.kind == Value::Kind::List && what.is_tuple) {
    return std::any_of(what.list->begin(), what.list->end(), [&](const Value& w) { return affix(s, w, at_start); });
  }
  if (!what.is_string()) throw EvalError("startswith/endswith first arg must be str or a tuple of str");
  const std::string& w = what.text;
  return w.size() <= s.size() && (at_start ? s.compare(0, w.size(), w) == 0 : s.compare(s.size() - w.size(), w.size(), w) == 0);
}

/// Index in code points of the byte offset `at` of `s`.
int64_t code_points_before(const std::string& s, size_t at) {
  return static_cast<int64_t>(text::code_point_offsets(std::string_view(s).substr(0, at)).size()) - 1;
}

bool all_of_class(const std::string& s, int (*pred)(int)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)) != 0; });
}

Value string_method(const std::string& s, const std::string& name, const CallArgs& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::from(text::strip(s, opt_text(a, 0, "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const auto sep = opt_text(a, 0, "sep");
    if (sep && sep->empty()) throw EvalError("empty separator");
    return strings(text::split(s, sep, opt_long(a, 1, "maxsplit", -1), name == "rsplit"));
  }
  if (name == "splitlines") return strings(text::splitlines(s));
  if (name == "startswith" || name == "endswith") return Value::from(affix(s, required(a, 0, name.c_str()), name == "startswith"));
  if (name == "replace") {
    const Value& old = required(a, 0, "replace");
    const Value& with = required(a, 1, "replace");
    if (!old.is_string() || !with.is_string()) throw EvalError("replace() arguments must be str");
    return Value::from(text::replace(s, old.text, with.text, opt_long(a, 2, "count", -1)));
  }
  if (name == "upper") return Value::from(text::upper(s));
  if (name == "lower") return Value::from(text::lower(s));
  if (name == "title") return Value::from(text::title(s));
  if (name == "capitalize") return Value::from(text::capitalize(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const Value& sub = required(a, 0, name.c_str());
    if (!sub.is_string()) throw EvalError("must be str, not " + sub.type_name());
    if (name == "count") {
      if (sub.text.empty()) return Value::from(code_points_before(s, s.size()) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub.text); at != std::string::npos; at = s.find(sub.text, at + sub.text.size())) ++n;
      return Value::from(n);
    }
    const size_t at = name[0] == 'r' ? s.rfind(sub.text) : s.find(sub.text);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") throw EvalError("substring not found");
      return Value::from(int64_t{-1});
    }
    return Value::from(code_points_before(s, at));
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& item : iterate(required(a, 0, "join"))) {
      if (!item.is_string()) throw EvalError("sequence item: expected str instance, " + item.type_name() + " found");
      if (!first) out += s;
      first = false;
      out += item.text;
    }
    return Value::from(std::move(out));
  }
  if (name == "isdigit") return Value::from(all_of_class(s, ::isdigit));
  if (name == "isalpha") return Value::from(all_of_class(s, ::isalpha));
  if (name == "isalnum") return Value::from(all_of_class(s, ::isalnum));
  if (name == "isspace") {
    const auto parts = text::split(s, std::nullopt, -1, false);
    return Value::from(!s.empty() && parts.empty());
  }
  if (name == "isupper" || name == "islower") {
    bool any = false, ok = true;
    for (char c : s) {
      const bool up = c >= 'A' && c <= 'Z', low = c >= 'a' && c <= 'z';
      any = any || up || low;
      ok = ok && !(name == "isupper" ? low : up);
    }
    return Value::from(any && ok);
  }
  throw EvalError("str has no method '" + name + "' in ppctl's chat-template engine");
}

Value dict_method(const Value& self, const std::string& name, const CallArgs& a) {
  const Dict& d = *self.dict;
  if (name == "get") {
    const Value& key = required(a, 0, "get");
    const Value* found = key.is_string() ? d.find(key.text) : nullptr;
    if (found) return *found;
    const Value* fallback = a.get(1, "default");
    return fallback ? *fallback : Value::none();
  }
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) {
    if (name == "keys") out.push_back(Value::from(k));
    if (name == "values") out.push_back(v);
    if (name == "items") out.push_back(Value::from(std::vector<Value>{Value::from(k), v}, true));
  }
  return Value::from(std::move(out));
}

Value list_method(const Value& self, const std::string& name, const CallArgs& a) {
  const Value& x = required(a, 0, name.c_str());
  const auto& items = *self.list;
  if (name == "count") {
    return Value::from(static_cast<int64_t>(std::count_if(items.begin(), items.end(), [&](const Value& v) { return equal(v, x); })));
  }
  for (size_t k = 0; k < items.size(); ++k) {
    if (equal(items[k], x)) return Value::from(static_cast<int64_t>(k));
  }
  throw EvalError(to_repr(x) + " is not in list");
}

const std::set<std::string>& string_methods() {
  static const std::set<std::string> names = {
      "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "replace", "upper",
      "lower", "title", "capitalize", "find", "rfind", "index", "rindex", "count", "join", "isdigit", "isalpha",
      "isalnum", "isspace", "isupper", "islower"};
  return names;
}

/// A method bound to its object, as `obj.name` evaluates in Python.
class BoundMethod : public Callable {
 public:
  BoundMethod(Value self, std::string name, bool unsafe) : self_(std::move(self)), name_(std::move(name)), unsafe_(unsafe) {}

  Value call(Renderer&, const CallArgs& a) const override {
    if (unsafe_) {
      throw EvalError("access to attribute '" + name_ + "' of '" + self_.type_name() +
                      "' object is unsafe (a chat template cannot change a list or dict)");
    }
    if (self_.is_string()) return string_method(self_.text, name_, a);
    if (self_.kind == Value::Kind::Dict) return dict_method(self_, name_, a);
    return list_method(self_, name_, a);
  }

  std::string name() const override { return self_.type_name() + "." + name_; }

 private:
  Value self_;
  std::string name_;
  bool unsafe_;
};

}  // namespace

Value method_of(const Value& object, const std::string& name) {
  static const std::set<std::string> dict_safe = {"get", "items", "keys", "values"};
  static const std::set<std::string> dict_unsafe = {"pop", "popitem", "setdefault", "update", "clear"};
  static const std::set<std::string> list_safe = {"index", "count"};
  static const std::set<std::string> list_unsafe = {"append", "extend", "insert", "pop", "remove", "clear", "sort",
                                                    "reverse"};
  bool known = false, unsafe = false;
  if (object.is_string()) {
    known = string_methods().count(name) > 0;
  } else if (object.kind == Value::Kind::Dict) {
    known = dict_safe.count(name) > 0;
    unsafe = dict_unsafe.count(name) > 0;
  } else if (object.kind == Value::Kind::List && !object.is_tuple) {
    known = list_safe.count(name) > 0;
    unsafe = list_unsafe.count(name) > 0;
  }
  if (!known && !unsafe) return Value::undefined("");
  return Value::from(std::make_shared<BoundMethod>(object, name, unsafe));
}

}  // namespace ppctl::jinja
