#!/usr/bin/env python3
"""Source scan of tests/: every test folder is fresh and unique, and is removed at the end (issue 12, fault 11).

Fixed names under the system temp dir (ppctl_parity_custom, ppctl_step_ckpt_*, ...) collide when two runs share
a machine, fail for another user after a root run, and let a test read an earlier run's files when its own
writes fail. Flags, per file type:
  C++ (.cpp, .hpp): temp_directory_path() or a "/tmp" literal on a line without a mkdtemp pattern (XXXXXX);
                    use tests/support/temp_dir.hpp (TempDir, process_temp_dir, write_checked).
  shell (.sh):      /tmp or $TMPDIR on a line without mktemp; mktemp in a file without a trap and an rm -rf
                    (the trap's cleanup) of what it made.
  Python (.py):     a "/tmp" literal, tempfile.gettempdir(), tempfile.mkdtemp() / mkstemp() (not removed on
                    their own); use tempfile.TemporaryDirectory.
Usage: check_temp_dirs.py TESTS_DIR (exit 1 listing FILE:LINE: problem), or --self-test.
"""
import pathlib
import re
import sys
import tempfile

CPP_TEMP = re.compile(r'temp_directory_path\s*\(|"/tmp\b')
SH_TEMP = re.compile(r'/tmp\b|\$\{?TMPDIR\b')
SH_TRAP = re.compile(r'^\s*trap\b', re.MULTILINE)
SH_REMOVE = re.compile(r'\brm\s+-[a-zA-Z]*r')
PY_TEMP = re.compile(r'["\']/tmp\b|tempfile\.(gettempdir|mkdtemp|mkstemp)\s*\(|\b(gettempdir|mkdtemp|mkstemp)\s*\(')
SELF = pathlib.Path(__file__).resolve()


def problems_in(path: pathlib.Path, text: str):
    """(line, message) for each fixed or unremoved temp folder in one file."""
    found = []
    lines = text.splitlines()
    if path.suffix in (".cpp", ".hpp"):
        for n, line in enumerate(lines, 1):
            if CPP_TEMP.search(line) and "XXXXXX" not in line:
                found.append((n, "a temp path without mkdtemp: use ppctl::test::TempDir (tests/support/temp_dir.hpp)"))
    elif path.suffix == ".sh":
        for n, line in enumerate(lines, 1):
            if SH_TEMP.search(line) and "mktemp" not in line:
                found.append((n, 'a fixed temp path: use WORK="$(mktemp -d)" and trap \'rm -rf "$WORK"\' EXIT'))
        if "mktemp" in text and not (SH_TRAP.search(text) and SH_REMOVE.search(text)):
            found.append((1, "mktemp without a trap that removes it (trap 'rm -rf \"$WORK\"' EXIT)"))
    elif path.suffix == ".py":
        for n, line in enumerate(lines, 1):
            if PY_TEMP.search(line):
                found.append((n, "a fixed or unremoved temp path: use tempfile.TemporaryDirectory()"))
    return found


def scan(root: pathlib.Path):
    out = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.resolve() == SELF or path.suffix not in (".cpp", ".hpp", ".sh", ".py"):
            continue
        text = path.read_text(errors="replace")
        out += [f"{path.relative_to(root)}:{n}: {message}" for n, message in problems_in(path, text)]
    return out


def self_test():
    """The scan flags each kind it is meant to flag and passes the accepted forms."""
    bad = {
        "a.cpp": 'auto d = fs::temp_directory_path() / "ppctl_parity_custom";\n',
        "b.cpp": 'auto d = std::filesystem::temp_directory_path() / ("x" + std::to_string(getpid()));\n',
        "c.hpp": 'const char* kDir = "/tmp/ppctl_step";\n',
        "d.sh": 'WORK=/tmp/ppctl_cli\nmkdir -p "$WORK"\n',
        "e.sh": 'WORK="$(mktemp -d)"\n',  # never removed
        "f.py": 'folder = "/tmp/ppctl_x"\n',
        "g.py": 'folder = tempfile.mkdtemp()\n',
    }
    good = {
        "h.cpp": 'std::string p = (fs::temp_directory_path() / "ppctl_x_XXXXXX").string();\nTempDir dir;\n',
        "i.sh": 'WORK="$(mktemp -d "${TMPDIR:-/tmp}/ppctl_cli_XXXXXX")"\ntrap \'rm -rf "$WORK"\' EXIT\n',
        "j.py": 'with tempfile.TemporaryDirectory(prefix="ppctl-") as folder:\n    pass\n',
    }
    with tempfile.TemporaryDirectory(prefix="ppctl-temp-scan-") as folder:
        root = pathlib.Path(folder)
        for name, text in {**bad, **good}.items():
            (root / name).write_text(text)
        flagged = {line.split(":")[0] for line in scan(root)}
    assert flagged == set(bad), f"flagged {sorted(flagged)}, expected {sorted(bad)}"
    print(f"self-test: {len(bad)} bad forms flagged, {len(good)} good forms passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = scan(pathlib.Path(sys.argv[1]))
    for line in found:
        print(line)
    print(f"{len(found)} test file line(s) with a fixed or unremoved temp folder", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
