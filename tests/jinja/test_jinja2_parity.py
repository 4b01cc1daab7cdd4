#!/usr/bin/env python3
"""lib/jinja against jinja2 as transformers runs it: every template of ../shared/chat-templates/ over generated
conversations (rendered by transformers' own render_jinja_template, strftime_now's clock pinned), and synthetic
templates for each supported construct (rendered by transformers' compiled environment). Requires byte-identical
text, the same generation spans (smollm3's {% generation %} tags), and an error from ppctl wherever jinja2
raises (with the same message where the template raises it itself).

Usage: test_jinja2_parity.py JINJA_RENDER CHAT_TEMPLATES_DIR
"""
import datetime
import json
import pathlib
import random
import subprocess
import sys
import tempfile

from transformers.utils import chat_template_utils as ctu

NOW = 1752148800  # 2025-07-10 12:00:00 UTC
BOS_EOS = {
    "llama-3.1-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.2-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.3-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "qwen2.5-instruct": (None, "<|im_end|>"),
    "qwen3": (None, "<|im_end|>"),
    "mistral-7b-instruct-v0.3": ("<s>", "</s>"),
    "mistral-nemo-instruct": ("<s>", "</s>"),
    "gemma-2-it": ("<bos>", "<eos>"),
    "phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "deepseek-r1-distill-qwen": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "smollm2-instruct": ("<|im_start|>", "<|im_end|>"),
    "smollm3": (None, "<|im_end|>"),
}
THINKING = {"qwen3", "smollm3"}
THINK_CONTENT = {"qwen3", "deepseek-r1-distill-qwen"}
CASES_PER_TEMPLATE = 24

TEXTS = [
    "Hello!",
    "What is 2 + 2?",
    "  leading and trailing spaces  ",
    "Line one\nLine two\n\nLine four after a blank line",
    "Unicode: café, naïve, Ελληνικά, 日本語のテキスト, emoji 😀🚀👩‍💻",
    'Quotes: "double", \'single\', `back`, and a backslash \\ here',
    "JSON-ish: {\"key\": [1, 2, 3]} and <tags> & ampersands",
    "Tabs\tand\ttabs\r\nand a CRLF",
    "/think Please reason about this.",
    "Ends with newline\n",
    "Über-long " + "word " * 40,
]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city, in °C",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "Name"},
                                                           "days": {"type": "integer"}},
                         "required": ["city"]}}}]


class PinnedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.datetime.fromtimestamp(NOW, tz)


def conversation(rng: random.Random, name: str, index: int) -> dict:
    """One case: the chat and the keyword arguments of render_jinja_template."""
    chat = []
    if index % 2 == 0:
        chat.append({"role": "system", "content": rng.choice(TEXTS)})
    turns = 1 + index % 4
    for turn in range(turns):
        chat.append({"role": "user", "content": rng.choice(TEXTS)})
        last = turn == turns - 1
        if not last or index % 3 != 0:
            content = rng.choice(TEXTS)
            if name in THINK_CONTENT and rng.random() < 0.5:
                content = "<think>\nLet me think: " + rng.choice(TEXTS) + "\n</think>\n\n" + content
            chat.append({"role": "assistant", "content": content})
    kwargs = {"add_generation_prompt": index % 2 == 1 or index % 5 == 0}
    bos, eos = BOS_EOS[name]
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    if name in THINKING and index % 3 != 2:
        kwargs["enable_thinking"] = index % 3 == 0
    if index % 7 == 3:
        kwargs["tools"] = TOOLS
    return {"chat": chat, "kwargs": kwargs}


def context_of(case: dict) -> dict:
    """What render_jinja_template passes to the template (messages after its own aliasing)."""
    kwargs = dict(case["kwargs"])
    tools = kwargs.pop("tools", None)
    agp = kwargs.pop("add_generation_prompt")
    messages = ctu._alias_reasoning_fields(ctu._plain_template_data(case["chat"]))
    return {"messages": messages, "tools": tools, "documents": None, "add_generation_prompt": agp, **kwargs}


def expected_real(source: str, name: str, case: dict) -> dict:
    try:
        kwargs = dict(case["kwargs"])
        texts, spans = ctu.render_jinja_template(conversations=[case["chat"]], chat_template=source,
                                                 return_assistant_tokens_mask=True, **kwargs)
        return {"text": texts[0], "generation": [list(s) for s in spans[0]]}
    except Exception as e:  # the template's own raise_exception, or jinja2's errors
        return {"error": f"{type(e).__name__}: {e}", "message": str(e)}


# Synthetic templates: (name, source, context). Each exercises one construct against jinja2.
SYNTHETIC = [
    ("whitespace", "a\n  {% if x %}\n    yes\n  {% endif %}\nb {{- ' c ' -}} d\n{#- c -#}\n  {%+ if 1 %}k{% endif +%}\nz\n", {"x": 1}),
    ("comments", "{# a comment #}\n  {# lstrip #}\nx{#- strip -#}  y", {}),
    ("if_elif", "{% for v in [0, 1, 2, 3] %}{% if v == 0 %}zero{% elif v == 1 %}one{% elif v is even %}even{% else %}odd{% endif %},{% endfor %}", {}),
    ("loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('x', 'y') }};{% endfor %}", {}),
    ("loop_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}{% for k, v in d|dictsort %}{{ k }}{{ v }}{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}", {"d": {"b": 2, "a": 1, "C": 3}}),
    ("loop_filter_else", "{% for m in ms if m.role != 'system' %}{{ loop.index }}:{{ m.role }}/{{ loop.length }} {% else %}none{% endfor %}{% for x in [] %}x{% else %}empty{% endfor %}", {"ms": [{"role": "system"}, {"role": "user"}, {"role": "assistant"}]}),
    ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("scoping", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }},{% endfor %}{{ x }}{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    ("namespace", "{% set ns = namespace(found=false, n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}", {}),
    ("macro_call", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}inside{% endcall %}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }}", {}),
    ("inline_if", "{{ 'a' if x else 'b' }}{{ 'c' if not x }}|{{ 'd' if y is defined else 'e' }}", {"x": 0}),
    ("arith", "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 1 / 4 }} {{ 10 / 5 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 3 * 'ab' }} {{ [1] * 2 }} {{ -3 }} {{ 2 ** -1 }} {{ 100000000000000000.0 }} {{ 1234567.0 }}", {}),
    ("concat_tilde", "{{ 'a' ~ 1 ~ none ~ true ~ [1, 'x'] ~ undefined_thing }}", {}),
    ("compare", "{{ 1 < 2 < 3 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'x' in 'xyz' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ [1, 2] < [1, 3] }} {{ none == none }}", {}),
    ("str_repr", "{{ [1, 'a', none, true, 1.5, (1,), {'k': \"it's\"}, 'say \"hi\"', 'both \\' \"'] }} {{ {'a': [1, {'b': none}]} }} {{ (1, 2) }}", {}),
    ("subscripts", "{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}{{ s[::-1] }}{{ s[::2] }}{{ l[-2:] }}{{ l[:-1] }}{{ l[::-2] }}{{ l[5] }}{{ d['k'] }}{{ d.k }}{{ l.0 }}", {"s": "héllo😀", "l": [1, 2, 3, 4], "d": {"k": "v"}}),
    ("str_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ t.strip('xy') }}|{{ t.lstrip('x') }}|{{ t.rstrip('y') }}|{{ s.split() }}|{{ c.split(',') }}|{{ c.split(',', 1) }}|{{ c.rsplit(',', 1) }}|{{ s.upper() }}{{ s.lower() }}{{ s.title() }}|{{ c.startswith('a') }}{{ c.endswith(('c', 'z')) }}|{{ c.replace(',', ';') }}|{{ c.find('b') }}{{ c.count(',') }}|{{ '-'.join(['a', 'b']) }}|{{ s.capitalize() }}", {"s": "  hello World \n", "t": "xxabcyy", "c": "a,b,c"}),
    ("dict_methods", "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d|length }}", {"d": {"a": 1, "b": [2]}}),
    ("filters_text", "{{ ' x '|trim }}|{{ 'abc'|upper }}|{{ 'ABC'|lower }}|{{ 'hello wORLD'|capitalize }}|{{ 'hello wORLD-foo'|title }}|{{ 'aXa'|replace('a', 'b') }}|{{ 'abc'|length }}|{{ 42|string }}|{{ '12'|int + 1 }}|{{ 'x'|int }}|{{ 3.9|int }}|{{ '1.5'|float }}|{{ 'héllo'|count }}|{{ 'a\nb'|indent(2, true) }}|{{ '<&>'|e }}", {}),
    ("filters_seq", "{{ l|join(', ') }}|{{ l|first }}|{{ l|last }}|{{ l|length }}|{{ l|sort }}|{{ l|reverse|list }}|{{ l|unique|list }}|{{ l|max }}|{{ l|min }}|{{ l|sum }}|{{ 'ab'|list }}|{{ d|items|list }}|{{ d|dictsort }}", {"l": [3, 1, 2, 3], "d": {"b": 1, "a": 2}}),
    ("filters_select", "{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}|{{ ms|rejectattr('role', 'eq', 'user')|list|length }}|{{ [0, 1, 2, 3]|select('odd')|list }}|{{ [0, 1, none]|reject('none')|list }}|{{ [0, 1, '']|select|list }}|{{ ms|map(attribute='missing', default='d')|list }}|{{ ['a', 'b']|map('upper')|list }}|{{ ms|selectattr('tool')|list }}", {"ms": [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1", "tool": True}, {"role": "user", "content": "u2"}]}),
    ("default", "{{ x|default('d') }}|{{ ''|default('e') }}|{{ ''|default('e', true) }}|{{ x|d('f') }}|{{ none|default('g') }}", {}),
    ("tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(indent=0) }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(sort_keys=true) }}|{{ 'é\"\\n'|tojson }}|{{ [1.0, 2.5, 1e100, none, true]|tojson }}|{{ {}|tojson }}|{{ []|tojson(indent=2) }}|{{ d|tojson(ensure_ascii=true) }}", {"d": {"z": "ünï 😀", "a": [1, {"b": None}], "t": "<tag>&'"}}),
    ("tests", "{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 's' is string }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is sequence }}{{ true is true }}{{ false is false }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ 1 is not none }}{{ 'a' is in ['a'] }}{{ 1 is eq 1 }}{{ 2 is gt 1 }}{{ 'abc' is lower }}{{ none is sameas none }}", {"x": 0}),
    ("undefined", "[{{ nope }}][{{ d.nope }}][{{ d['nope'] }}][{{ nope|length }}][{% for x in nope %}x{% endfor %}][{{ nope is defined }}][{{ 'a' in nope }}][{{ nope ~ 'z' }}][{{ not nope }}]", {"d": {}}),
    ("set_block", "{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]{% set a, b = [1, 2] %}{{ a }}{{ b }}", {}),
    ("raise", "{% if x %}{{ raise_exception('Bad role: ' ~ x) }}{% endif %}", {"x": "tool"}),
    ("undefined_attr_error", "{{ nope.attr }}", {}),
    ("type_error", "{{ 'a' + 1 }}", {}),
    ("strftime", "{{ strftime_now('%Y-%m-%d %H:%M %d %b %B') }}", {}),
    ("numbers_repr", "{{ 0.5 }} {{ 1/3 }} {{ 2.0 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 123456789012345678 }} {{ 5 // 2.0 }} {{ -5 % 3.0 }}", {}),
    ("dict_literal", "{% set d = {'a': 1, 'b': 'x'} %}{{ d }}{{ d.a }}{{ dict(x=1, y=2) }}{{ d['b'] }}", {}),
    ("string_escapes", "{{ 'tab\\there\\nnew \\u00e9 \\x41 \\\\ \\'q\\'' }}|{{ \"a\" 'b' }}", {}),
    ("whitespace_crlf", "line1\r\n  {% if 1 %}\r\n  in\r\n  {% endif %}\r\nend\r\n", {}),
    ("loop_nested", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }}{% if loop.last %};{% endif %}{% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("generation", "{% for m in ms %}<{{ m }}>{% generation %}[{{ m|upper }}]{% endgeneration %}{% endfor %}", {"ms": ["é", "b"]}),
]


def expected_synthetic(source: str, context: dict) -> dict:
    try:
        template = ctu._compile_jinja_template(source)
        blocks, spans = [], []
        with template.environment.activate_tracker(blocks, spans):
            for block in template.generate(**context):
                blocks.append(block)
        return {"text": "".join(blocks), "generation": [list(s) for s in spans]}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}", "message": str(e)}


def byte_spans(text: str, spans: list) -> list:
    return [[len(text[:b].encode()), len(text[:e].encode())] for b, e in spans]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, folder = sys.argv[1], pathlib.Path(sys.argv[2])
    ctu.datetime = PinnedDatetime  # strftime_now reads datetime.now() at call time
    templates, cases, expected, labels = {}, [], [], []
    paths = sorted(folder.glob("*.jinja"))
    if len(paths) < 12:
        print(f"jinja parity: expected the 12 chat templates in {folder}, found {len(paths)}")
        return 1
    for path in paths:
        name = path.stem
        source = path.read_text(encoding="utf-8")
        templates[name] = source
        rng = random.Random(name)
        for index in range(CASES_PER_TEMPLATE):
            case = conversation(rng, name, index)
            if name == "gemma-2-it" and index % 4 == 2:
                case["chat"] = [m for m in case["chat"] if m["role"] != "system"]  # gemma-2 refuses a system turn
            cases.append({"template": name, "context": context_of(case), "now": NOW})
            expected.append(expected_real(source, name, case))
            labels.append(f"{name} case {index}")
    for name, source, context in SYNTHETIC:
        templates["synthetic:" + name] = source
        cases.append({"template": "synthetic:" + name, "context": context, "now": NOW})
        expected.append(expected_synthetic(source, context))
        labels.append(f"synthetic {name}")
    with tempfile.TemporaryDirectory(prefix="ppctl_jinja_") as tmp:
        request, reply = pathlib.Path(tmp) / "in.json", pathlib.Path(tmp) / "out.json"
        request.write_text(json.dumps({"templates": templates, "cases": cases}, ensure_ascii=False), encoding="utf-8")
        subprocess.run([binary, str(request), str(reply)], check=True)
        got = json.loads(reply.read_text(encoding="utf-8"))
    failures, identical, errors_matched = [], 0, 0
    per_template = {}
    for label, want, have in zip(labels, expected, got):
        key = label.rsplit(" case ", 1)[0]
        per_template.setdefault(key, [0, 0])
        per_template[key][1] += 1
        if "error" in want:
            if "error" not in have:
                failures.append(f"{label}: jinja2 raised {want['error']!r}; ppctl rendered {have['text'][:200]!r}")
            elif want["error"].startswith("TemplateError") and have.get("message") != want["message"]:
                failures.append(f"{label}: jinja2 raised {want['message']!r}; ppctl raised {have['error']!r}")
            else:
                errors_matched += 1
                per_template[key][0] += 1
            continue
        if "error" in have:
            failures.append(f"{label}: ppctl raised {have['error']!r}; jinja2 rendered {want['text'][:200]!r}")
        elif have["text"] != want["text"]:
            a, b = have["text"], want["text"]
            at = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
            failures.append(f"{label}: text differs at character {at}: ppctl {a[max(0, at - 40):at + 60]!r} "
                            f"jinja2 {b[max(0, at - 40):at + 60]!r}")
        elif have["generation"] != byte_spans(want["text"], want["generation"]):
            failures.append(f"{label}: generation spans {have['generation']} != jinja2's "
                            f"{byte_spans(want['text'], want['generation'])}")
        else:
            identical += 1
            per_template[key][0] += 1
    for key, (ok, total) in sorted(per_template.items()):
        if not key.startswith("synthetic"):
            print(f"  {key}: {ok}/{total} cases match")
    for line in failures:
        print("FAIL", line)
    print(f"jinja parity: {len(cases)} cases ({len(paths)} templates x {CASES_PER_TEMPLATE} + {len(SYNTHETIC)} "
          f"synthetic): {identical} byte-identical, {errors_matched} raised as jinja2 raised, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
