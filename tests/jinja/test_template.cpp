// Unit tests of lib/jinja: constructs, errors (origin, line, construct named) and limits. Byte-for-byte parity
// with jinja2 is tests/jinja/test_jinja2_parity.py's.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "jinja/template.hpp"

using Catch::Matchers::ContainsSubstring;
using ppctl::jinja::Json;
using ppctl::jinja::Limits;
using ppctl::jinja::RenderOptions;
using ppctl::jinja::Template;
using ppctl::jinja::TemplateError;

namespace {

std::string render(const std::string& source, const Json& context = Json::object(), const RenderOptions& options = {}) {
  return Template(source, "t.jinja").render(context, options).text;
}

/// The message of the TemplateError that parsing or rendering `source` throws ("" if none).
std::string error_of(const std::string& source, const Json& context = Json::object(), const RenderOptions& options = {},
                     const Limits& parse_limits = {}) {
  try {
    Template(source, "chat.jinja", parse_limits).render(context, options);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("jinja: whitespace control as transformers configures jinja2 (trim_blocks, lstrip_blocks)") {
  CHECK(render("a\n  {% if true %}\n  b\n  {% endif %}\nc") == "a\n  b\nc");
  CHECK(render("a  {{- ' x ' -}}  b") == "a x b");
  CHECK(render("a {#- gone -#} b") == "ab");
  CHECK(render("  {%+ if true %}x{% endif +%}\ny") == "  x\ny");
  CHECK(render("x\n") == "x");  // one trailing newline dropped
}

TEST_CASE("jinja: statements: if, for with loop variables, set, namespace, macro, break and continue") {
  CHECK(render("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
               {{"xs", {"a", "b"}}}) == "1a,2b");
  CHECK(render("{% for x in [1, 2, 3, 4] if x is even %}{{ loop.length }}{{ x }}{% else %}none{% endfor %}") == "2224");
  CHECK(render("{% for x in [] %}x{% else %}none{% endfor %}") == "none");
  CHECK(render("{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
               "{{ i }}{% endfor %}") == "02");
  CHECK(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}") ==
        "6");
  CHECK(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}") == "1");
  CHECK(render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m('A') }}{{ m('C', b='D') }}") == "ABCD");
  CHECK(render("{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}", {{"d", {{"z", 1}, {"a", 2}}}}) == "z1a2");
}

TEST_CASE("jinja: expressions, Python str() of values, methods and filters") {
  CHECK(render("{{ 7 // 2 }} {{ -7 % 3 }} {{ 1 / 4 }} {{ 2 ** 8 }} {{ 'a' ~ 1 ~ none }}") == "3 2 0.25 256 a1None");
  CHECK(render("{{ [1, 'a', none, true, 1.5, {'k': (1,)}] }}") == "[1, 'a', None, True, 1.5, {'k': (1,)}]");
  CHECK(render("{{ s[::-1] }}{{ s[1:3] }}{{ s[-1] }}", {{"s", "h\xc3\xa9llo"}}) == "oll\xc3\xa9h\xc3\xa9lo");
  CHECK(render("{{ ' a b '.strip().split(' ') }}{{ 'xxay'.lstrip('x') }}{{ 'a,b'.rsplit(',', 1)[0] }}") == "['a', 'b']aya");
  CHECK(render("{{ m.get('x', 'd') }}{{ m|tojson }}{{ m|tojson(indent=2) }}", {{"m", {{"b", "\xc3\xa9"}}}}) ==
        "d{\"b\": \"\xc3\xa9\"}{\n  \"b\": \"\xc3\xa9\"\n}");
  CHECK(render("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|join('+') }}",
               {{"ms", {{{"role", "user"}, {"c", "1"}}, {{"role", "x"}, {"c", "2"}}, {{"role", "user"}, {"c", "3"}}}}}) ==
        "1+3");
  CHECK(render("{{ x|default('d') }}{{ x is defined }}{{ 'a' if x else 'b' }}[{{ x }}]") == "dFalseb[]");
}

TEST_CASE("jinja: generation blocks record the byte spans they write") {
  const auto r = Template("a{% generation %}\xc3\xa9{{ x }}{% endgeneration %}b", "t").render({{"x", "yz"}});
  CHECK(r.text == "a\xc3\xa9yzb");
  REQUIRE(r.generation.size() == 1);
  CHECK(r.generation[0] == std::pair<size_t, size_t>{1, 5});
}

TEST_CASE("jinja: strftime_now reads the pinned clock") {
  RenderOptions options;
  options.now = 0;
  CHECK(render("{{ strftime_now('%Y') }}", Json::object(), options).substr(0, 3) == "197");
}

TEST_CASE("jinja: errors name the origin, the line and the construct") {
  CHECK_THAT(error_of("a\n{% include 'x.jinja' %}"), ContainsSubstring("chat.jinja:2:") && ContainsSubstring("include"));
  CHECK_THAT(error_of("{% extends 'base' %}"), ContainsSubstring("extends") && ContainsSubstring("not allowed"));
  CHECK_THAT(error_of("{% import 'm' as m %}"), ContainsSubstring("import"));
  CHECK_THAT(error_of("\n\n{{ x|frobnicate }}"), ContainsSubstring("chat.jinja:3:") && ContainsSubstring("frobnicate"));
  CHECK_THAT(error_of("{{ x is shiny }}"), ContainsSubstring("shiny"));
  CHECK_THAT(error_of("{% filter upper %}x{% endfilter %}"), ContainsSubstring("filter") && ContainsSubstring("not supported"));
  CHECK_THAT(error_of("{% if x %}"), ContainsSubstring("endif"));
  CHECK_THAT(error_of("{{ frob() }}"), ContainsSubstring("'frob' is undefined"));
  CHECK_THAT(error_of("{{ x.y.z }}", {{"x", Json::object()}}), ContainsSubstring("has no attribute 'y'"));
  CHECK_THAT(error_of("{{ [].append(1) }}"), ContainsSubstring("unsafe"));
  CHECK_THAT(error_of("{{ 'a' + 1 }}"), ContainsSubstring("concatenate"));
  CHECK_THAT(error_of("{% break %}"), ContainsSubstring("outside a for loop"));
}

TEST_CASE("jinja: raise_exception is a TemplateError with the template's message, origin and line") {
  try {
    Template("line 1\n{{ raise_exception('System role not supported') }}", "gemma.jinja").render(Json::object());
    FAIL("no error");
  } catch (const TemplateError& e) {
    CHECK(e.message() == "System role not supported");
    CHECK(e.line() == 2);
    CHECK(std::string(e.what()) == "gemma.jinja:2: System role not supported");
  }
}

TEST_CASE("jinja: limits: steps, output, recursion, parse depth") {
  RenderOptions options;
  options.limits.max_steps = 100000;
  CHECK_THAT(error_of("{% for i in range(1000000000000) %}{% endfor %}", Json::object(), options),
             ContainsSubstring("max_steps") && ContainsSubstring("chat.jinja"));
  CHECK_THAT(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                      Json::object(), options),
             ContainsSubstring("max_steps"));
  options.limits.max_steps = 50'000'000;
  options.limits.max_output_bytes = 1000;
  CHECK_THAT(error_of("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", Json::object(), options),
             ContainsSubstring("max_output_bytes"));
  CHECK_THAT(error_of("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                      Json::object(), options),
             ContainsSubstring("max_output_bytes"));
  CHECK_THAT(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), ContainsSubstring("max_depth"));
  CHECK_THAT(error_of("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}"), ContainsSubstring("max_depth"));
  std::string chain = "{{ 1";
  for (int k = 0; k < 1000; ++k) chain += " + 1";
  CHECK_THAT(error_of(chain + " }}"), ContainsSubstring("max_depth"));
  Limits small;
  small.max_depth = 5;
  CHECK_THAT(error_of("{% if 1 %}{% if 1 %}{% if 1 %}{% if 1 %}{% if 1 %}{% endif %}{% endif %}{% endif %}{% endif %}"
                      "{% endif %}", Json::object(), {}, small),
             ContainsSubstring("max_depth"));
}

TEST_CASE("jinja: a failure says its kind (raised, limit, undefined, overflow, template), for the caller's fix") {
  using ppctl::jinja::Failure;
  const auto kind_of = [](const std::string& source, const Json& context = Json::object()) {
    try {
      Template(source, "chat.jinja").render(context);
    } catch (const TemplateError& e) {
      return e.failure();
    }
    FAIL("no TemplateError");
    return Failure::kTemplate;
  };
  CHECK(kind_of("{{ raise_exception('no') }}") == Failure::kRaised);
  CHECK(kind_of("{% for i in range(100000000) %}{% endfor %}") == Failure::kLimit);
  CHECK(kind_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}") == Failure::kLimit);
  CHECK(kind_of("{% for i in range(1000000) %}{{ 'x' * 1000 }}{% endfor %}") == Failure::kLimit);
  CHECK(kind_of("{{ m.name.upper() }}", Json{{"m", Json::object()}}) == Failure::kUndefined);
  CHECK(kind_of("{{ 9223372036854775807 + 1 }}") == Failure::kOverflow);
  CHECK(kind_of("{{ x }}", Json{{"x", Json(uint64_t{18446744073709551615u})}}) == Failure::kOverflow);
  CHECK(kind_of("{{ 'a' + 1 }}") == Failure::kTemplate);
}

TEST_CASE("jinja: a context value nested deeper than max_depth is refused, not converted (the stack)") {
  // Built without recursion (nlohmann's copy would recurse): arrays in arrays, `depth` levels below "x".
  const auto nested = [](int depth) {
    Json root = Json::object();
    Json* at = &root["x"];
    for (int k = 0; k < depth; ++k) {
      *at = Json::array({nullptr});
      at = &(*at)[0];
    }
    *at = Json::array();
    return root;
  };
  Limits small;
  small.max_depth = 10;
  // The context object is level 1: "x" may hold 9 levels of containers.
  CHECK(error_of("{{ 1 }}", nested(8), RenderOptions{small, std::nullopt}).empty());
  CHECK_THAT(error_of("{{ 1 }}", nested(9), RenderOptions{small, std::nullopt}),
             ContainsSubstring("nests deeper than the limit max_depth = 10") && ContainsSubstring("'x'"));
  // At the default limit, a value 100,000 levels deep fails at once instead of overflowing the stack.
  const Json deep = nested(100000);
  CHECK_THAT(error_of("{{ 1 }}", deep), ContainsSubstring("max_depth = 200"));
}
