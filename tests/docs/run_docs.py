#!/usr/bin/env python3
"""Checks the docs against the code: runs the Markdown files' command blocks, resolves their links, and compares the
generated spec reference with the committed one. CTest runs it as docs.* (tests/CMakeLists.txt).

  run_docs.py run FILE.md --ppctl BUILD/app/ppctl     run FILE's blocks (below), naming FILE:LINE of a failure
  run_docs.py links ROOT                             every relative link in ROOT's docs resolves (file and #anchor)
  run_docs.py reference ROOT --ppctl PPCTL           docs/spec-reference.md equals `ppctl help --markdown`, and
                                                     every field of lib/config/schema.cpp appears in it
  run_docs.py self-test --ppctl PPCTL                planted faults are caught (a failing block, a dead link, ...)

What a Markdown file's fenced blocks mean here (docs/development.md, "How the docs are tested", says it for
writers):
- ```sh / ```bash / ```shell blocks run in order, in one fresh scratch folder per file holding a copy of the
  repository's configs/, under `bash -euo pipefail`, with `ppctl` on PATH. `ppctl train` without `--steps` runs
  2 steps (a wrapper adds `--steps 2`), so the docs show the plain command and the suite stays short.
- The line before a block may be a marker comment:
    <!-- docs-test: skip (REASON) -->   not run; the reason is required (Slurm, a GPU, a download, ...)
    <!-- docs-test: fails -->           must exit non-zero; `fails N`: with exactly code N
    <!-- docs-test: file NAME -->       (a yaml or text block) written to NAME in the scratch folder
- Any other ```yaml block is a spec or part of one: its sections and their keys must be the schema's (from
  `ppctl help --markdown`), so a renamed field fails here.
- ```text, ```json and other blocks are shown, never run.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SHELL = {"sh", "bash", "shell"}
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([A-Za-z0-9_+-]*)")
BLOCK_TIMEOUT_S = 300
WRAPPER = """#!/usr/bin/env bash
# The docs test's ppctl: a train without --steps runs 2 steps.
if [ "${1:-}" = train ]; then
  for a in "$@"; do case "$a" in --steps|--steps=*) exec "$REAL_PPCTL" "$@";; esac; done
  shift; exec "$REAL_PPCTL" train --steps 2 "$@"
fi
exec "$REAL_PPCTL" "$@"
"""


class Block:
    def __init__(self, path, line, lang, text, marker):
        self.path, self.line, self.lang, self.text, self.marker = path, line, lang, text, marker

    def where(self):
        return f"{self.path}:{self.line}"


def blocks(path):
    """The fenced blocks of a Markdown file: language, text (indent removed), line of the fence, marker."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        marker = MARKER.match(lines[prev]).group(1) if prev >= 0 and MARKER.match(lines[prev]) else None
        out.append(Block(path, start + 1, lang, "\n".join(body) + "\n", marker))
    return out


def schema_fields(ppctl):
    """{section: {key, ...}} from `ppctl help --markdown`."""
    text = subprocess.run([ppctl, "help", "--markdown"], check=True, capture_output=True, text=True).stdout
    fields = {}
    for section, key in re.findall(r"^\| `([a-z_]+)\.([a-z_0-9]+)` \|", text, re.M):
        fields.setdefault(section, set()).add(key)
    return fields


def yaml_problems(block, fields):
    import yaml  # PyYAML, in the test venv (transformers needs it)
    try:
        doc = yaml.safe_load(block.text)
    except yaml.YAMLError as e:
        return [f"{block.where()}: the yaml block does not parse: {e}"]
    if not isinstance(doc, dict):
        return [f"{block.where()}: the yaml block is not a mapping of spec sections (fix: write a spec or part "
                f"of one, or mark it <!-- docs-test: skip (REASON) -->)"]
    problems = []
    for section, body in doc.items():
        if section not in fields:
            problems.append(f"{block.where()}: '{section}' is not a section of the job spec "
                            f"(sections: {', '.join(sorted(fields))})")
            continue
        for key in (body or {}) if isinstance(body, dict) else []:
            if key not in fields[section]:
                problems.append(f"{block.where()}: '{section}.{key}' is not a field of the job spec "
                                f"(fix: `ppctl help {section}` lists its fields)")
    return problems


def marker_kind(block):
    """(kind, argument) of a block's marker: ('skip', reason), ('fails', code or None), ('file', name)."""
    if block.marker is None:
        return None, None
    m = re.fullmatch(r"skip\s*\((.+)\)", block.marker)
    if m:
        return "skip", m.group(1)
    m = re.fullmatch(r"fails(?:\s+(\d+))?", block.marker)
    if m:
        return "fails", int(m.group(1)) if m.group(1) else None
    m = re.fullmatch(r"file\s+(\S+)", block.marker)
    if m:
        return "file", m.group(1)
    return "bad", block.marker


def run_file(path, ppctl, repo, log=sys.stdout):
    """Runs one Markdown file's blocks; returns the list of problems (empty: it passed)."""
    ppctl = str(Path(ppctl).resolve())
    fields = None
    problems, ran, skipped = [], 0, 0
    with tempfile.TemporaryDirectory(prefix="ppctl-docs-") as scratch:
        scratch = Path(scratch)
        shutil.copytree(Path(repo) / "configs", scratch / "configs")
        bindir = scratch / ".bin"
        bindir.mkdir()
        (bindir / "ppctl").write_text(WRAPPER)
        (bindir / "ppctl").chmod(0o755)
        env = dict(os.environ, REAL_PPCTL=ppctl, PATH=f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        for block in blocks(path):
            kind, arg = marker_kind(block)
            if kind == "bad":
                problems.append(f"{block.where()}: unknown marker '{arg}' (fix: skip (REASON), fails [N] or file NAME)")
                continue
            if kind == "skip":
                skipped += 1
                continue
            if kind == "file":
                (scratch / arg).parent.mkdir(parents=True, exist_ok=True)
                (scratch / arg).write_text(block.text)
                continue
            if block.lang == "yaml":
                fields = fields or schema_fields(ppctl)
                problems += yaml_problems(block, fields)
                continue
            if block.lang not in SHELL:
                continue
            ran += 1
            print(f"--- {block.where()}", file=log, flush=True)
            try:
                result = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=scratch, env=env,
                                        stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                        timeout=BLOCK_TIMEOUT_S)
                code, output = result.returncode, result.stdout + result.stderr
            except subprocess.TimeoutExpired as e:
                code, output = None, f"timed out after {BLOCK_TIMEOUT_S} s\n{e.stdout or ''}{e.stderr or ''}"
            wanted_failure = kind == "fails"
            ok = (code == 0) if not wanted_failure else (code not in (0, None) and (arg is None or code == arg))
            if not ok:
                want = "exit 0" if not wanted_failure else (f"exit {arg}" if arg is not None else "a non-zero exit")
                tail = "\n".join(output.splitlines()[-40:])
                problems.append(f"{block.where()}: the block exited {code}, the doc expects {want}:\n"
                                f"{block.text}--- its output (last 40 lines):\n{tail}")
    print(f"{path}: {ran} block(s) run, {skipped} skipped, {len(problems)} problem(s)", file=log)
    return problems


def slug(heading):
    """GitHub's anchor for a heading: its text (links reduced to their words) in lower case, every character but
    letters, digits, '_', '-' and spaces dropped, spaces turned into '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    in_fence = False
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def doc_files(root):
    root = Path(root)
    return [p for p in [root / "README.md", root / "configs" / "README.md", *sorted((root / "docs").glob("*.md"))]
            if p.exists()]


def link_problems(root):
    problems = []
    for path in doc_files(root):
        text = Path(path).read_text(encoding="utf-8")
        text_no_code = re.sub(r"```.*?```", "", text, flags=re.S)
        for m in re.finditer(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text_no_code):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            line = text_no_code[:m.start()].count("\n") + 1
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                problems.append(f"{path}: link to '{target}': {dest} does not exist")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{path}: link to '{target}': {dest.name} has no heading with anchor #{anchor}")
    return problems


def reference_problems(root, ppctl):
    root = Path(root)
    generated = subprocess.run([ppctl, "help", "--markdown"], check=True, capture_output=True, text=True).stdout
    committed_path = root / "docs" / "spec-reference.md"
    problems = []
    committed = committed_path.read_text(encoding="utf-8") if committed_path.exists() else ""
    if committed != generated:
        import difflib
        diff = "".join(list(difflib.unified_diff(committed.splitlines(True), generated.splitlines(True),
                                                 "docs/spec-reference.md (committed)", "ppctl help --markdown"))[:60])
        problems.append(f"docs/spec-reference.md differs from `ppctl help --markdown` (fix: ppctl help --markdown > "
                        f"docs/spec-reference.md):\n{diff}")
    # Every row of the schema table (read from its source, not through ppctl) appears in the reference.
    source = (root / "lib" / "config" / "schema.cpp").read_text(encoding="utf-8")
    table = source[source.index("std::vector<Section> schema("):]
    section = None
    for m in re.finditer(r'^\s*\{"([a-z_]+)",\s*$|(?:_field|\brow)\("([a-z_0-9]+)"', table, re.M):
        if m.group(1):
            section = m.group(1)
        elif section and f"| `{section}.{m.group(2)}` |" not in generated:
            problems.append(f"schema field {section}.{m.group(2)} is missing from `ppctl help --markdown`")
    return problems


def self_test(ppctl):
    """Plants one fault of each kind and checks that it is reported."""
    failures = []
    with tempfile.TemporaryDirectory(prefix="ppctl-docs-self-") as d:
        root = Path(d)
        (root / "configs").mkdir()
        (root / "docs").mkdir()
        cases = {
            "failing block": ("```sh\nppctl plan configs/missing.yaml\n```\n", "exited"),
            "unexpected success": ("<!-- docs-test: fails -->\n```sh\ntrue\n```\n", "expects a non-zero exit"),
            "wrong exit code": ("<!-- docs-test: fails 3 -->\n```sh\nexit 2\n```\n", "expects exit 3"),
            "renamed field": ("```yaml\npipeline:\n  stage: 4\n```\n", "'pipeline.stage' is not a field"),
            "unknown section": ("```yaml\npipe:\n  stages: 4\n```\n", "'pipe' is not a section"),
            "renamed flag": ("```sh\nppctl plan configs/x.yaml --no-such-flag\n```\n", "exited"),
            "skip without reason": ("<!-- docs-test: skip -->\n```sh\ntrue\n```\n", "unknown marker"),
        }
        (root / "configs" / "x.yaml").write_text("model: {vocab_size: 256}\n")
        for name, (text, expect) in cases.items():
            doc = root / "docs" / "case.md"
            doc.write_text(text)
            found = run_file(doc, ppctl, root, log=open(os.devnull, "w"))
            if not any(expect in p for p in found):
                failures.append(f"{name}: expected a problem with '{expect}', got {found}")
        passing = root / "docs" / "case.md"
        passing.write_text("<!-- docs-test: file job.txt -->\n```text\nhello\n```\n```sh\ngrep -q hello job.txt\n```\n"
                           "<!-- docs-test: fails 2 -->\n```sh\nexit 2\n```\n"
                           "<!-- docs-test: skip (needs a GPU) -->\n```sh\nfalse\n```\n")
        found = run_file(passing, ppctl, root, log=open(os.devnull, "w"))
        if found:
            failures.append(f"a correct doc reported problems: {found}")
        (root / "README.md").write_text("# Top\n\n[ok](docs/case.md) [self](#top) [gone](docs/gone.md) "
                                        "[bad anchor](docs/case.md#nowhere)\n")
        found = link_problems(root)
        for expect in ("docs/gone.md", "#nowhere"):
            if not any(expect in p for p in found):
                failures.append(f"dead link {expect} not reported: {found}")
        if len(found) != 2:
            failures.append(f"expected 2 dead links, got {found}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["run", "links", "reference", "self-test"])
    parser.add_argument("target", nargs="?", help="run: the Markdown file; links, reference: the repository root")
    parser.add_argument("--ppctl", help="the ppctl executable")
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[2]))
    args = parser.parse_args()
    if args.mode == "run":
        problems = run_file(args.target, args.ppctl, args.repo)
    elif args.mode == "links":
        problems = link_problems(args.target or args.repo)
    elif args.mode == "reference":
        problems = reference_problems(args.target or args.repo, args.ppctl)
    else:
        problems = self_test(args.ppctl)
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{'FAILED' if problems else 'OK'}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
