// jinja2's built-in filters that chat templates use (jinja2/filters.py), with `tojson` as transformers
// replaces it (json.dumps with ensure_ascii=False, indent, separators, sort_keys).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "jinja/builtins.hpp"
#include "jinja/renderer.hpp"
#include "jinja/text.hpp"

namespace ppctl::jinja {
namespace {

using Filter = std::function<Value(Renderer&, const Value&, const CallArgs&)>;

bool flag(const CallArgs& a, size_t index, const char* name, bool fallback) {
  const Value* v = a.get(index, name);
  return v ? truthy(*v) : fallback;
}

std::optional<std::string> opt_string(const CallArgs& a, size_t index, const char* name) {
  const Value* v = a.get(index, name);
  if (!v || v->kind == Value::Kind::None) return std::nullopt;
  if (!v->is_string()) throw EvalError(std::string("argument '") + name + "' must be a string");
  return v->text;
}

int64_t int_arg(const CallArgs& a, size_t index, const char* name, int64_t fallback) {
  const Value* v = a.get(index, name);
  if (!v || v->kind == Value::Kind::None) return fallback;
  if (v->kind == Value::Kind::Int) return v->integer;
  if (v->kind == Value::Kind::Bool) return v->boolean;
  throw EvalError(std::string("argument '") + name + "' must be an integer");
}

/// jinja2's environment.getitem over a dotted path ("a.b", "items.0"), as attribute= arguments use it.
Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t from = 0;
  while (true) {
    const size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (cur.is_undefined()) return cur;
    if (cur.kind == Value::Kind::List && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const size_t i = std::stoul(part);
      cur = i < cur.list->size() ? (*cur.list)[i] : Value::undefined("no element " + part);
    } else if (cur.is_mapping()) {
      const Value* found = cur.dict->find(part);
      cur = found ? *found : Value::undefined("'dict object' has no attribute '" + part + "'");
    } else {
      cur = Value::undefined("'" + cur.type_name() + " object' has no attribute '" + part + "'");
    }
    if (dot == std::string::npos) return cur;
    from = dot + 1;
  }
}

/// The sort key: lower-cased strings unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value::from(text::lower(v.text)) : v;
}

std::vector<Value> sorted(std::vector<Value> items, bool reverse, bool case_sensitive,
                          const std::optional<std::string>& attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : items) {
    Value key = attribute ? attribute_path(item, *attribute) : item;
    keyed.emplace_back(sort_key(key, case_sensitive), std::move(item));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less(b.first, a.first) : less(a.first, b.first);
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

/// select / reject / selectattr / rejectattr: keep the items whose (attribute's) test result is `keep`.
Value select(Renderer& r, const Value& seq, const CallArgs& a, bool by_attribute, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (a.positional.empty() || !a.positional[0].is_string()) throw EvalError("selectattr/rejectattr need an attribute name");
    attribute = a.positional[next++].text;
  }
  std::string test;
  if (next < a.positional.size()) {
    if (!a.positional[next].is_string()) throw EvalError("the test name must be a string");
    test = a.positional[next++].text;
    if (!has_test(test)) throw EvalError("no test named '" + test + "' (not in ppctl's chat-template subset)");
  }
  CallArgs test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<long>(next), a.positional.end());
  test_args.keywords = a.keywords;
  std::vector<Value> out;
  for (const auto& item : iterate(seq)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    const bool passed = test.empty() ? truthy(subject) : apply_test(r, test, subject, test_args);
    if (passed == keep) out.push_back(item);
  }
  return Value::from(std::move(out));
}

Value map_filter(Renderer& r, const Value& seq, const CallArgs& a) {
  std::vector<Value> out;
  const Value* attribute = a.get(99, "attribute");
  if (attribute) {
    const Value* fallback = a.get(99, "default");
    for (const auto& item : iterate(seq)) {
      Value v = attribute_path(item, to_str(*attribute));
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return Value::from(std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].is_string()) throw EvalError("map() needs a filter name or attribute=");
  const std::string name = a.positional[0].text;
  if (!has_filter(name)) throw EvalError("no filter named '" + name + "' (not in ppctl's chat-template subset)");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keywords = a.keywords;
  for (const auto& item : iterate(seq)) out.push_back(apply_filter(r, name, item, rest));
  return Value::from(std::move(out));
}

Value to_int(const Value& v, const CallArgs& a) {
  const int64_t fallback = int_arg(a, 0, "default", 0);
  if (v.kind == Value::Kind::Int) return v;
  if (v.kind == Value::Kind::Bool) return Value::from(int64_t{v.boolean});
  if (v.kind == Value::Kind::Float) {
    if (!std::isfinite(v.real) || std::fabs(v.real) >= 9.2e18) return Value::from(fallback);
    return Value::from(static_cast<int64_t>(v.real));
  }
  if (v.is_string()) {
    const std::string s = text::strip(v.text, std::nullopt, true, true);
    std::string digits;
    for (char c : s) {
      if (c != '_') digits += c;
    }
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(digits.c_str(), &end, 10);
    if (!digits.empty() && *end == '\0' && errno == 0) return Value::from(static_cast<int64_t>(i));
    const double d = std::strtod(digits.c_str(), &end);
    if (!digits.empty() && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value::from(static_cast<int64_t>(d));
    }
  }
  return Value::from(fallback);
}

Value to_float(const Value& v, const CallArgs& a) {
  const Value* fallback = a.get(0, "default");
  if (v.kind == Value::Kind::Float) return v;
  if (v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool) return Value::from(static_cast<double>(v.kind == Value::Kind::Int ? v.integer : v.boolean));
  if (v.is_string()) {
    const std::string s = text::strip(v.text, std::nullopt, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value::from(d);
  }
  return fallback ? *fallback : Value::from(0.0);
}

size_t length_of(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return text::code_point_offsets(v.text).size() - 1;
    case Value::Kind::List: return v.list->size();
    case Value::Kind::Dict: return v.dict->items.size();
    default: throw EvalError("object of type '" + v.type_name() + "' has no len()");
  }
}

Value tojson(const Value& v, const CallArgs& a) {
  a.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  const Value* indent = a.get(1, "indent");
  int width = -1;
  if (indent && indent->kind != Value::Kind::None) {
    if (indent->kind != Value::Kind::Int) throw EvalError("tojson's indent must be an integer");
    width = static_cast<int>(std::clamp<int64_t>(indent->integer, 0, 64));
  }
  std::string item_sep = width < 0 ? ", " : ",", key_sep = ": ";
  if (const Value* sep = a.get(2, "separators"); sep && sep->kind != Value::Kind::None) {
    if (sep->kind != Value::Kind::List || sep->list->size() != 2 || !(*sep->list)[0].is_string() ||
        !(*sep->list)[1].is_string()) {
      throw EvalError("tojson's separators must be a pair of strings");
    }
    item_sep = (*sep->list)[0].text;
    key_sep = (*sep->list)[1].text;
  }
  return Value::from(to_json(v, width, item_sep, key_sep, flag(a, 3, "sort_keys", false), flag(a, 0, "ensure_ascii", false)));
}

/// jinja2's indent(width=4, first=False, blank=False).
Value indent(const Value& v, const CallArgs& a) {
  const Value* w = a.get(0, "width");
  const std::string pad = !w ? "    " : w->is_string() ? w->text : std::string(static_cast<size_t>(std::clamp<int64_t>(int_arg(a, 0, "width", 4), 0, 1024)), ' ');
  const bool first = flag(a, 1, "first", false), blank = flag(a, 2, "blank", false);
  const std::vector<std::string> lines = text::splitlines(to_str(v) + "\n");
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k) out += "\n";
    if (k && (blank || !lines[k].empty())) out += pad;
    out += lines[k];
  }
  return Value::from(first ? pad + out : out);
}

Value escape(const Value& v) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::from(std::move(out));
}

/// jinja2's title: each word (split at whitespace, '-', '(', '{', '[' and '<') gets an upper first letter and
/// lower others.
Value title_filter(const Value& v) {
  const std::string s = to_str(v);
  std::string out, word;
  auto flush = [&] {
    if (word.empty()) return;
    size_t n = 1;
    text::decode_one(word, &n);
    out += text::upper(word.substr(0, n)) + text::lower(word.substr(n));
    word.clear();
  };
  size_t i = 0;
  while (i < s.size()) {
    size_t n = 1;
    const char32_t cp = text::decode_one(std::string_view(s).substr(i), &n);
    if (text::is_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<') {
      flush();
      out += s.substr(i, n);
    } else {
      word += s.substr(i, n);
    }
    i += n;
  }
  flush();
  return Value::from(std::move(out));
}

Value extreme(const Value& seq, const CallArgs& a, bool want_max) {
  const auto attribute = opt_string(a, 1, "attribute");
  const auto items = sorted(iterate(seq), false, flag(a, 0, "case_sensitive", false), attribute);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  return want_max ? items.back() : items.front();
}

const std::map<std::string, Filter, std::less<>>& filters() {
  static const std::map<std::string, Filter, std::less<>> table = {
      {"abs", [](Renderer&, const Value& v, const CallArgs&) {
         if (v.kind == Value::Kind::Float) return Value::from(std::fabs(v.real));
         const Value zero = Value::from(int64_t{0});
         return less(v, zero) ? binary_op("-", zero, v) : binary_op("+", zero, v);
       }},
      {"capitalize", [](Renderer&, const Value& v, const CallArgs&) { return Value::from(text::capitalize(to_str(v))); }},
      {"count", [](Renderer&, const Value& v, const CallArgs&) { return Value::from(static_cast<int64_t>(length_of(v))); }},
      {"default", [](Renderer&, const Value& v, const CallArgs& a) {
         const Value* d = a.get(0, "default_value");
         const bool boolean = flag(a, 1, "boolean", false);
         if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value::from(std::string());
         return v;
       }},
      {"dictsort", [](Renderer&, const Value& v, const CallArgs& a) {
         if (!v.is_mapping()) throw EvalError("dictsort needs a mapping");
         const bool by_value = a.get(1, "by") && to_str(*a.get(1, "by")) == "value";
         std::vector<Value> pairs;
         for (const auto& [k, x] : v.dict->items) pairs.push_back(Value::from(std::vector<Value>{Value::from(k), x}, true));
         const std::string at = by_value ? "1" : "0";
         return Value::from(sorted(std::move(pairs), flag(a, 2, "reverse", false), flag(a, 0, "case_sensitive", false), at));
       }},
      {"escape", [](Renderer&, const Value& v, const CallArgs&) { return escape(v); }},
      {"first", [](Renderer&, const Value& v, const CallArgs&) {
         const auto items = iterate(v);
         return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
       }},
      {"float", [](Renderer&, const Value& v, const CallArgs& a) { return to_float(v, a); }},
      {"indent", [](Renderer&, const Value& v, const CallArgs& a) { return indent(v, a); }},
      {"int", [](Renderer&, const Value& v, const CallArgs& a) { return to_int(v, a); }},
      {"items", [](Renderer&, const Value& v, const CallArgs&) {
         if (v.is_undefined()) return Value::from(std::vector<Value>{});
         if (!v.is_mapping()) throw EvalError("Can only get item pairs from a mapping.");
         std::vector<Value> pairs;
         for (const auto& [k, x] : v.dict->items) pairs.push_back(Value::from(std::vector<Value>{Value::from(k), x}, true));
         return Value::from(std::move(pairs));
       }},
      {"join", [](Renderer&, const Value& v, const CallArgs& a) {
         const std::string sep = opt_string(a, 0, "d").value_or("");
         const auto attribute = opt_string(a, 1, "attribute");
         std::string out;
         bool first = true;
         for (const auto& item : iterate(v)) {
           if (!first) out += sep;
           first = false;
           out += to_str(attribute ? attribute_path(item, *attribute) : item);
         }
         return Value::from(std::move(out));
       }},
      {"last", [](Renderer&, const Value& v, const CallArgs&) {
         const auto items = iterate(v);
         return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
       }},
      {"length", [](Renderer&, const Value& v, const CallArgs&) { return Value::from(static_cast<int64_t>(length_of(v))); }},
      {"list", [](Renderer&, const Value& v, const CallArgs&) { return Value::from(iterate(v)); }},
      {"lower", [](Renderer&, const Value& v, const CallArgs&) { return Value::from(text::lower(to_str(v))); }},
      {"map", [](Renderer& r, const Value& v, const CallArgs& a) { return map_filter(r, v, a); }},
      {"max", [](Renderer&, const Value& v, const CallArgs& a) { return extreme(v, a, true); }},
      {"min", [](Renderer&, const Value& v, const CallArgs& a) { return extreme(v, a, false); }},
      {"reject", [](Renderer& r, const Value& v, const CallArgs& a) { return select(r, v, a, false, false); }},
      {"rejectattr", [](Renderer& r, const Value& v, const CallArgs& a) { return select(r, v, a, true, false); }},
      {"replace", [](Renderer&, const Value& v, const CallArgs& a) {
         const auto old = opt_string(a, 0, "old"), with = opt_string(a, 1, "new");
         if (!old || !with) throw EvalError("replace() needs old and new strings");
         return Value::from(text::replace(to_str(v), *old, *with, int_arg(a, 2, "count", -1)));
       }},
      {"reverse", [](Renderer&, const Value& v, const CallArgs&) {
         if (v.is_string()) {
           const auto chars = iterate(v);
           std::string out;
           for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->text;
           return Value::from(std::move(out));
         }
         auto items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::from(std::move(items));
       }},
      {"round", [](Renderer&, const Value& v, const CallArgs& a) {
         if (!v.is_number()) throw EvalError("round needs a number");
         const double x = v.kind == Value::Kind::Float ? v.real : static_cast<double>(v.kind == Value::Kind::Int ? v.integer : v.boolean);
         const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(int_arg(a, 0, "precision", 0), -300, 300)));
         const std::string method = opt_string(a, 1, "method").value_or("common");
         const double y = x * scale;
         const double r = method == "ceil" ? std::ceil(y) : method == "floor" ? std::floor(y) : std::nearbyint(y);
         return Value::from(r / scale);
       }},
      {"safe", [](Renderer&, const Value& v, const CallArgs&) { return v; }},
      {"select", [](Renderer& r, const Value& v, const CallArgs& a) { return select(r, v, a, false, true); }},
      {"selectattr", [](Renderer& r, const Value& v, const CallArgs& a) { return select(r, v, a, true, true); }},
      {"sort", [](Renderer&, const Value& v, const CallArgs& a) {
         return Value::from(sorted(iterate(v), flag(a, 0, "reverse", false), flag(a, 1, "case_sensitive", false),
                                   opt_string(a, 2, "attribute")));
       }},
      {"string", [](Renderer&, const Value& v, const CallArgs&) { return Value::from(to_str(v)); }},
      {"sum", [](Renderer&, const Value& v, const CallArgs& a) {
         const auto attribute = opt_string(a, 0, "attribute");
         const Value* start = a.get(1, "start");
         Value total = start ? *start : Value::from(int64_t{0});
         for (const auto& item : iterate(v)) total = binary_op("+", total, attribute ? attribute_path(item, *attribute) : item);
         return total;
       }},
      {"title", [](Renderer&, const Value& v, const CallArgs&) { return title_filter(v); }},
      {"tojson", [](Renderer&, const Value& v, const CallArgs& a) { return tojson(v, a); }},
      {"trim", [](Renderer&, const Value& v, const CallArgs& a) {
         return Value::from(text::strip(to_str(v), opt_string(a, 0, "chars"), true, true));
       }},
      {"unique", [](Renderer&, const Value& v, const CallArgs& a) {
         const bool case_sensitive = flag(a, 0, "case_sensitive", false);
         const auto attribute = opt_string(a, 1, "attribute");
         std::vector<Value> out, seen;
         for (const auto& item : iterate(v)) {
           const Value key = sort_key(attribute ? attribute_path(item, *attribute) : item, case_sensitive);
           if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
             seen.push_back(key);
             out.push_back(item);
           }
         }
         return Value::from(std::move(out));
       }},
      {"upper", [](Renderer&, const Value& v, const CallArgs&) { return Value::from(text::upper(to_str(v))); }},
      {"wordcount", [](Renderer&, const Value& v, const CallArgs&) {
         return Value::from(static_cast<int64_t>(text::split(to_str(v), std::nullopt, -1, false).size()));
       }},
  };
  return table;
}

const std::map<std::string, std::string, std::less<>>& aliases() {
  static const std::map<std::string, std::string, std::less<>> table = {{"d", "default"}, {"e", "escape"}};
  return table;
}

}  // namespace

bool has_filter(std::string_view name) { return filters().count(name) || aliases().count(name); }

Value apply_filter(Renderer& r, const std::string& name, const Value& subject, const CallArgs& args) {
  const auto alias = aliases().find(name);
  const std::string& real = alias == aliases().end() ? name : alias->second;
  const auto it = filters().find(real);
  if (it == filters().end()) throw EvalError("no filter named '" + name + "'");
  return it->second(r, subject, args);
}

}  // namespace ppctl::jinja
