// Python's arithmetic, concatenation and comparison operators over template values, as jinja2 delegates
// them to Python (with jinja2's `~`, which joins str() of both sides, and its Undefined rules).
#include <cmath>
#include <limits>

#include "jinja/renderer.hpp"
#include "jinja/text.hpp"

namespace ppctl::jinja {
namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw EvalError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

[[noreturn]] void overflow() {
  throw EvalError("integer overflow (ppctl's chat-template engine computes with 64-bit integers)", Failure::kOverflow);
}

int64_t int_of(const Value& v) { return v.kind == Value::Kind::Int ? v.integer : (v.boolean ? 1 : 0); }
double real_of(const Value& v) { return v.kind == Value::Kind::Float ? v.real : static_cast<double>(int_of(v)); }

Value repeat(const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value::from(std::string()) : Value::from(std::vector<Value>{}, seq.is_tuple);
  const size_t unit = seq.is_string() ? seq.text.size() : seq.list->size();
  if (unit != 0 && static_cast<uint64_t>(times) > (uint64_t{1} << 28) / unit) {
    throw EvalError("a repetition of " + std::to_string(times) + " copies is too large");
  }
  if (seq.is_string()) {
    std::string out;
    out.reserve(unit * static_cast<size_t>(times));
    for (int64_t k = 0; k < times; ++k) out += seq.text;
    return Value::from(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::from(std::move(out), seq.is_tuple);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  const bool ints = a.kind != Value::Kind::Float && b.kind != Value::Kind::Float;
  if (op == "/") {
    if (real_of(b) == 0.0) throw EvalError("division by zero");
    return Value::from(real_of(a) / real_of(b));
  }
  if (ints) {
    const int64_t x = int_of(a), y = int_of(b);
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) overflow();
    } else if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) overflow();
    } else if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) overflow();
    } else if (op == "//" || op == "%") {
      if (y == 0) throw EvalError(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow();
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      r = op == "//" ? q : m;
    } else {  // **
      if (y < 0) return Value::from(std::pow(static_cast<double>(x), static_cast<double>(y)));
      r = 1;
      for (int64_t k = 0; k < y; ++k) {
        if (__builtin_mul_overflow(r, x, &r)) overflow();
        if (r == 0 || r == 1) break;
      }
      if (r == -1 || (x == -1)) r = (y % 2 == 0) ? 1 : -1;
    }
    return Value::from(r);
  }
  const double x = real_of(a), y = real_of(b);
  if (op == "+") return Value::from(x + y);
  if (op == "-") return Value::from(x - y);
  if (op == "*") return Value::from(x * y);
  if (op == "**") return Value::from(std::pow(x, y));
  if (y == 0.0) throw EvalError("float division by zero");
  const double m = std::fmod(x, y);
  const double mod = (m != 0.0 && ((m < 0) != (y < 0))) ? m + y : m;
  if (op == "%") return Value::from(mod);
  return Value::from(std::floor((x - mod) / y + 0.0));
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::from(to_str(a) + to_str(b));
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value::from(a.text + b.text);
    if (a.kind == Value::Kind::List && b.kind == Value::Kind::List && a.is_tuple == b.is_tuple) {
      std::vector<Value> out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::from(std::move(out), a.is_tuple);
    }
    if (a.is_string() || b.is_string()) {
      throw EvalError("can only concatenate str (not \"" + (a.is_string() ? b : a).type_name() + "\") to str");
    }
  }
  if (op == "*") {
    const bool seq_a = a.is_string() || a.kind == Value::Kind::List;
    const bool seq_b = b.is_string() || b.kind == Value::Kind::List;
    if (seq_a && (b.kind == Value::Kind::Int || b.kind == Value::Kind::Bool)) return repeat(a, int_of(b));
    if (seq_b && (a.kind == Value::Kind::Int || a.kind == Value::Kind::Bool)) return repeat(b, int_of(a));
  }
  if (op == "%" && a.is_string()) throw EvalError("'%' string formatting is not supported by ppctl's chat-template engine");
  unsupported(op, a, b);
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (a.is_undefined()) undefined_error(a);
      if (!a.is_string()) throw EvalError("'in <string>' requires string as left operand, not " + a.type_name());
      found = b.text.find(a.text) != std::string::npos;
    } else if (b.kind == Value::Kind::List) {
      for (const auto& item : *b.list) found = found || equal(a, item);
    } else if (b.kind == Value::Kind::Dict) {
      found = a.is_string() && b.dict->find(a.text) != nullptr;
    } else if (!b.is_undefined()) {
      throw EvalError("argument of type '" + b.type_name() + "' is not iterable");
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return less(a, b) || equal(a, b);
  return less(b, a) || equal(a, b);  // >=
}

}  // namespace ppctl::jinja
