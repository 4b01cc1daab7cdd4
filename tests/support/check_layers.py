#!/usr/bin/env python3
"""Checks the house rules of lib/ (issue 22): every #include "folder/..." in lib/ points to the same folder
or one below it in LAYERS (never upward); no lib/ folder holds more than MAX_SOURCES .cpp files; and no
file is over MAX_LINES lines unless its first lines say why (a comment containing "lines:").

Usage: check_layers.py LIB_DIR       the checks; exit 1 naming every break
       check_layers.py --self-test   shows that each check fails on a made-up tree that breaks it
"""
import pathlib
import re
import sys
import tempfile

# lib/'s folders from the bottom up: a folder may include only itself and the folders before it.
LAYERS = ["core", "jinja", "config", "plan", "schedule", "tune", "data", "prepare", "launch", "comm", "model", "checkpoint", "interop",
          "runtime", "observe", "optim", "train", "job"]
MAX_SOURCES = 13   # "about 12" .cpp files per folder
MAX_LINES = 800
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def problems(lib: pathlib.Path) -> list:
    found = []
    folders = sorted(p.name for p in lib.iterdir() if p.is_dir())
    for folder in folders:
        if folder not in LAYERS:
            found.append(f"lib/{folder}/: not in LAYERS of {__file__} (fix: add it where its includes put it)")
    for path in sorted(lib.rglob("*")):
        if path.suffix not in (".cpp", ".hpp") or not path.is_file():
            continue
        rel = path.relative_to(lib)
        folder = rel.parts[0]
        if folder not in LAYERS:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for included in INCLUDE.findall(text):
            if included in LAYERS and LAYERS.index(included) > LAYERS.index(folder):
                found.append(f"lib/{rel}: includes {included}/, which is above {folder}/ "
                             f"(order: {' < '.join(LAYERS)}; fix: move the code down or the include up)")
        lines = text.count("\n")
        head = "\n".join(text.splitlines()[:3])
        if lines > MAX_LINES and "lines:" not in head:
            found.append(f"lib/{rel}: {lines} lines, over {MAX_LINES} without a reason in its first lines "
                         "(fix: split it, or say why at its top in a comment with 'lines:')")
    for folder in folders:
        sources = len(list((lib / folder).glob("*.cpp")))
        if sources > MAX_SOURCES:
            found.append(f"lib/{folder}/: {sources} .cpp files, over {MAX_SOURCES} (fix: split the folder)")
    return found


def self_test() -> int:
    with tempfile.TemporaryDirectory(prefix="ppctl_layers_") as tmp:
        lib = pathlib.Path(tmp)
        (lib / "core").mkdir()
        (lib / "train").mkdir()
        (lib / "core" / "a.hpp").write_text('#include "train/b.hpp"\n')
        (lib / "train" / "b.hpp").write_text('#include "core/a.hpp"\n' + "x\n" * (MAX_LINES + 1))
        for i in range(MAX_SOURCES + 1):
            (lib / "train" / f"s{i}.cpp").write_text("\n")
        got = problems(lib)
        want = ["includes train/, which is above core/", "over 800 without a reason", ".cpp files, over"]
        missing = [w for w in want if not any(w in g for g in got)]
        if missing or len(got) != 3:
            print("self-test failed: expected one problem for each of", want, "got", got)
            return 1
        (lib / "train" / "b.hpp").write_text('// lines: one table\n' + "x\n" * (MAX_LINES + 1))
        if any("over 800" in g for g in problems(lib)):
            print("self-test failed: a file that says why it is long was still reported")
            return 1
    print("self-test passed: each break was found")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    found = problems(pathlib.Path(sys.argv[1]))
    for line in found:
        print(line)
    print(f"lib/ layers: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
