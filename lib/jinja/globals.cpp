// The global functions a chat template may call: jinja2's range and namespace, and transformers' dict,
// raise_exception and strftime_now (transformers/utils/chat_template_utils.py).
#include <ctime>
#include <functional>
#include <map>

#include "jinja/builtins.hpp"
#include "jinja/renderer.hpp"

namespace ppctl::jinja {
namespace {

using Function = std::function<Value(Renderer&, const CallArgs&)>;

class Global : public Callable {
 public:
  Global(std::string name, Function f) : name_(std::move(name)), f_(std::move(f)) {}
  Value call(Renderer& r, const CallArgs& args) const override { return f_(r, args); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  Function f_;
};

int64_t integer(const Value& v) {
  if (v.kind == Value::Kind::Int) return v.integer;
  if (v.kind == Value::Kind::Bool) return v.boolean;
  throw EvalError("'" + v.type_name() + "' object cannot be interpreted as an integer");
}

Value range(Renderer& r, const CallArgs& a) {
  a.check("range", 3, {});
  if (a.positional.empty()) throw EvalError("range expected at least 1 argument, got 0");
  int64_t start = 0, stop = 0, step = 1;
  if (a.positional.size() == 1) {
    stop = integer(a.positional[0]);
  } else {
    start = integer(a.positional[0]);
    stop = integer(a.positional[1]);
    if (a.positional.size() == 3) step = integer(a.positional[2]);
  }
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  // Python's len(range(...)), in 128 bits so that no bound overflows.
  const __int128 distance = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 stride = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 length = distance <= 0 ? 0 : (distance + stride - 1) / stride;
  const int64_t exact = static_cast<int64_t>(std::min<__int128>(length, INT64_MAX / 2));
  r.charge(exact);  // refuses a range larger than the step budget before making it
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(exact));
  for (int64_t k = 0; k < exact; ++k) out.push_back(Value::from(start + k * step));
  return Value::from(std::move(out));
}

/// The keyword arguments (after an optional mapping) as a Dict, as dict() and namespace() take them.
Dict mapping_of(const CallArgs& a, const char* callee) {
  Dict d;
  if (a.positional.size() > 1) throw EvalError(std::string(callee) + "() takes at most one positional argument");
  if (!a.positional.empty()) {
    const Value& m = a.positional[0];
    if (!m.is_mapping()) throw EvalError(std::string(callee) + "() needs a mapping as its positional argument");
    d = *m.dict;
  }
  for (const auto& [k, v] : a.keywords) d.set(k, v);
  return d;
}

Value strftime_now(Renderer& r, const CallArgs& a) {
  a.check("strftime_now", 1, {});
  if (a.positional.empty() || !a.positional[0].is_string()) throw EvalError("strftime_now() needs a format string");
  const std::time_t t = r.now();
  std::tm local{};
  localtime_r(&t, &local);  // transformers: datetime.now().strftime(format), the local time
  const std::string& format = a.positional[0].text;
  if (format.empty()) return Value::from(std::string());
  for (size_t size = 256; size <= (size_t{1} << 20); size *= 4) {
    std::string out(size, '\0');
    const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
    if (n > 0) {
      out.resize(n);
      return Value::from(std::move(out));
    }
  }
  return Value::from(std::string());
}

const std::map<std::string, Value, std::less<>>& globals() {
  static const std::map<std::string, Value, std::less<>> table = [] {
    std::map<std::string, Value, std::less<>> t;
    auto add = [&](const std::string& name, Function f) {
      t[name] = Value::from(std::make_shared<Global>(name, std::move(f)));
    };
    add("range", range);
    add("namespace", [](Renderer&, const CallArgs& a) {
      Dict d = mapping_of(a, "namespace");
      for (const auto& kv : d.items) {
        if (!kv.first.empty() && kv.first[0] == '_') {
          throw EvalError("a chat template cannot store an underscore-prefixed attribute on a namespace ('" + kv.first + "')");
        }
      }
      return Value::namespace_of(std::move(d));
    });
    add("dict", [](Renderer&, const CallArgs& a) { return Value::from(mapping_of(a, "dict")); });
    add("raise_exception", [](Renderer&, const CallArgs& a) -> Value {
      throw EvalError(a.positional.empty() ? std::string() : to_str(a.positional[0]), Failure::kRaised);
    });
    add("strftime_now", strftime_now);
    return t;
  }();
  return table;
}

}  // namespace

Value global(const std::string& name) {
  const auto it = globals().find(name);
  return it == globals().end() ? Value::undefined("") : it->second;
}

}  // namespace ppctl::jinja
