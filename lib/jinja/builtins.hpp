// The filters, tests, methods and global functions a template may call (jinja2's builtins that chat
// templates use, the Python str/dict/list methods they call, and transformers' globals).
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.hpp"

namespace ppctl::jinja {

/// Whether a filter / test named so exists (the parser refuses the others, as jinja2's compiler does).
bool has_filter(std::string_view name);
bool has_test(std::string_view name);

/// `subject | name(args)`. Throws EvalError on bad arguments or types.
Value apply_filter(Renderer& r, const std::string& name, const Value& subject, const CallArgs& args);
/// `subject is name(args)`.
bool apply_test(Renderer& r, const std::string& name, const Value& subject, const CallArgs& args);
/// `object.name` when `object` is a str, dict or list and `name` one of the Python methods the sandbox lets a
/// template call: a callable bound to `object`; else Undefined (no such attribute).
Value method_of(const Value& object, const std::string& name);
/// The globals: range, namespace, dict, raise_exception, strftime_now, lipsum-free; Undefined if none.
Value global(const std::string& name);

}  // namespace ppctl::jinja
