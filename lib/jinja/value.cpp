// Values and their Python behaviour: truth, str(), repr(), ==, <, iteration, JSON in and out (see value.hpp).
#include "jinja/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/text.hpp"

namespace ppctl::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keywords) {
    if (k == name) return &v;
  }
  return nullptr;
}

void CallArgs::check(std::string_view callee, size_t max_positional,
                     std::initializer_list<std::string_view> names) const {
  if (positional.size() > max_positional) {
    throw EvalError(std::string(callee) + "() takes at most " + std::to_string(max_positional) +
                    " positional argument(s) (" + std::to_string(positional.size()) + " given)");
  }
  for (const auto& kw : keywords) {
    if (std::find(names.begin(), names.end(), kw.first) == names.end()) {
      throw EvalError(std::string(callee) + "() got an unexpected keyword argument '" + kw.first + "'");
    }
  }
}

Value Value::undefined(std::string hint) {
  Value v;
  v.text = std::move(hint);
  return v;
}

Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}

Value Value::from(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.boolean = b;
  return v;
}

Value Value::from(int64_t i) {
  Value v;
  v.kind = Kind::Int;
  v.integer = i;
  return v;
}

Value Value::from(double d) {
  Value v;
  v.kind = Kind::Float;
  v.real = d;
  return v;
}

Value Value::from(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.text = std::move(s);
  return v;
}

Value Value::from(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind = Kind::List;
  v.is_tuple = tuple;
  v.list = std::make_shared<std::vector<Value>>(std::move(items));
  return v;
}

Value Value::from(Dict d) {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::namespace_of(Dict d) {
  Value v = from(std::move(d));
  v.kind = Kind::Namespace;
  return v;
}

Value Value::from(std::shared_ptr<const Callable> c) {
  Value v;
  v.kind = Kind::Callable;
  v.callable = std::move(c);
  return v;
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return is_tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.boolean;
    case Value::Kind::Int: return v.integer != 0;
    case Value::Kind::Float: return v.real != 0.0;
    case Value::Kind::String: return !v.text.empty();
    case Value::Kind::List: return !v.list->empty();
    case Value::Kind::Dict: return !v.dict->items.empty();
    case Value::Kind::Namespace:
    case Value::Kind::Callable: return true;
  }
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e_at = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e_at + 1);
  std::string digits;
  bool negative = false;
  for (size_t k = 0; k < e_at; ++k) {
    if (sci[k] == '-') negative = true;
    if (sci[k] >= '0' && sci[k] <= '9') digits += sci[k];
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else {
      const size_t point = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= point) {
        out += digits + std::string(point - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, point) + "." + digits.substr(point);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

namespace {

void append_repr(std::string& out, const Value& v);

void append_items(std::string& out, const std::vector<Value>& items, bool tuple) {
  out += tuple ? '(' : '[';
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += ", ";
    append_repr(out, items[k]);
  }
  if (tuple && items.size() == 1) out += ',';
  out += tuple ? ')' : ']';
}

void append_dict(std::string& out, const Dict& d) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : d.items) {
    if (!first) out += ", ";
    first = false;
    out += text::repr(k) + ": ";
    append_repr(out, v);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& v) {
  if (v.kind == Value::Kind::String) {
    out += text::repr(v.text);
  } else if (v.kind == Value::Kind::Undefined) {
    out += "Undefined";
  } else {
    out += to_str(v);
  }
}

}  // namespace

std::string to_str(const Value& v) {
  std::string out;
  switch (v.kind) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.boolean ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.integer);
    case Value::Kind::Float: return float_repr(v.real);
    case Value::Kind::String: return v.text;
    case Value::Kind::List: append_items(out, *v.list, v.is_tuple); return out;
    case Value::Kind::Dict: append_dict(out, *v.dict); return out;
    case Value::Kind::Namespace:
      out = "<Namespace ";
      append_dict(out, *v.dict);
      return out + ">";
    case Value::Kind::Callable: return "<function " + v.callable->name() + ">";
  }
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

namespace {

/// The number in a bool, int or float, as a double (for mixed comparisons).
double as_double(const Value& v) {
  return v.kind == Value::Kind::Float ? v.real : v.kind == Value::Kind::Int ? static_cast<double>(v.integer)
                                                                             : (v.boolean ? 1.0 : 0.0);
}

int64_t as_int(const Value& v) { return v.kind == Value::Kind::Int ? v.integer : (v.boolean ? 1 : 0); }

}  // namespace

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Value::Kind::Float && b.kind != Value::Kind::Float) return as_int(a) == as_int(b);
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.text == b.text;
    case Value::Kind::List:
      if (a.is_tuple != b.is_tuple || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case Value::Kind::Dict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* other = b.dict->find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    case Value::Kind::Namespace: return a.dict == b.dict;
    case Value::Kind::Callable: return a.callable == b.callable;
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Value::Kind::Float && b.kind != Value::Kind::Float) return as_int(a) < as_int(b);
    return as_double(a) < as_double(b);
  }
  if (a.is_string() && b.is_string()) return a.text < b.text;  // UTF-8 byte order is code point order
  if (a.kind == Value::Kind::List && b.kind == Value::Kind::List && a.is_tuple == b.is_tuple) {
    const auto& x = *a.list;
    const auto& y = *b.list;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equal(x[k], y[k])) return less(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  throw EvalError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind) {
    case Value::Kind::Undefined: return out;
    case Value::Kind::List: return *v.list;
    case Value::Kind::Dict:
      out.reserve(v.dict->items.size());
      for (const auto& kv : v.dict->items) out.push_back(Value::from(kv.first));
      return out;
    case Value::Kind::String: {
      const auto at = text::code_point_offsets(v.text);
      out.reserve(at.size());
      for (size_t k = 0; k + 1 < at.size(); ++k) out.push_back(Value::from(v.text.substr(at[k], at[k + 1] - at[k])));
      return out;
    }
    default: throw EvalError("'" + v.type_name() + "' object is not iterable");
  }
}

Value from_json(const Json& j, int max_depth) {
  if (j.is_structured() && max_depth <= 0) {
    throw EvalError("a value of the context nests deeper than the limit max_depth", Failure::kLimit);
  }
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value::from(j.get<bool>());
    case Json::value_t::number_integer: return Value::from(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) throw EvalError("integer " + std::to_string(u) + " is out of range", Failure::kOverflow);
      return Value::from(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return Value::from(j.get<double>());
    case Json::value_t::string: return Value::from(j.get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, max_depth - 1));
      return Value::from(std::move(items));
    }
    case Json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (const auto& [k, e] : j.items()) d.items.emplace_back(k, from_json(e, max_depth - 1));
      return Value::from(std::move(d));
    }
    default: throw EvalError("a JSON value of type " + std::string(j.type_name()) + " has no template value");
  }
}

namespace {

struct JsonWriter {
  int indent;
  std::string item_sep, key_sep;
  bool sort_keys, ensure_ascii;
  std::string out;

  void newline(int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  }

  void string(std::string_view s) {
    out += '"';
    size_t i = 0;
    while (i < s.size()) {
      size_t n = 1;
      const char32_t cp = text::decode_one(s.substr(i), &n);
      char buf[16];
      switch (cp) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
            if (cp >= 0x10000) {
              const char32_t c = cp - 0x10000;
              std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (static_cast<unsigned>(c) >> 10),
                            0xDC00 + (static_cast<unsigned>(c) & 0x3FF));
            } else {
              std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
            }
            out += buf;
          } else {
            out += s.substr(i, n);
          }
      }
      i += n;
    }
    out += '"';
  }

  void value(const Value& v, int level) {
    switch (v.kind) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.boolean ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.integer); return;
      case Value::Kind::Float:
        out += std::isnan(v.real) ? "NaN" : std::isinf(v.real) ? (v.real < 0 ? "-Infinity" : "Infinity")
                                                                : float_repr(v.real);
        return;
      case Value::Kind::String: string(v.text); return;
      case Value::Kind::List: {
        if (v.list->empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t k = 0; k < v.list->size(); ++k) {
          if (k) out += item_sep;
          newline(level + 1);
          value((*v.list)[k], level + 1);
        }
        newline(level);
        out += ']';
        return;
      }
      case Value::Kind::Dict: {
        if (v.dict->items.empty()) {
          out += "{}";
          return;
        }
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : v.dict->items) items.push_back(&kv);
        if (sort_keys) {
          std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        }
        out += '{';
        for (size_t k = 0; k < items.size(); ++k) {
          if (k) out += item_sep;
          newline(level + 1);
          string(items[k]->first);
          out += key_sep;
          value(items[k]->second, level + 1);
        }
        newline(level);
        out += '}';
        return;
      }
      default: throw EvalError("Object of type " + v.type_name() + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep,
                    bool sort_keys, bool ensure_ascii) {
  JsonWriter w{indent, item_sep, key_sep, sort_keys, ensure_ascii, {}};
  w.value(v, 0);
  return std::move(w.out);
}

}  // namespace ppctl::jinja
