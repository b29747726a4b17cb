"""The type check as a ratchet: mypy's errors per file may go down, never up.

The code base was not written against mypy, so CI cannot ask for zero errors at once. It asks
that every file has exactly the errors of ``.ci/mypy-baseline.json`` (errors per file, as mypy
counted them when the baseline was written): more fails, and so does fewer, so the baseline is
lowered in the same change that fixed them and the gain cannot be lost again later:

    python .ci/mypy_check.py            # run mypy (pyproject.toml's [tool.mypy]) and compare
    python .ci/mypy_check.py --update   # write today's counts as the baseline

Exit 1 when a file has more errors than its baseline (its new errors are printed) or fewer (run
--update); 2 when mypy's output has no summary line of its own (``Success: ...`` or ``Found N
errors in M files``) or one that disagrees with the error lines: then mypy did not run (not
installed, crashed) and counting its output would pass on zero errors that nobody checked.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / ".ci" / "mypy-baseline.json"
#: one mypy error line: "path/to/file.py:12: error: ... [code]" (notes are not errors)
ERROR_LINE = re.compile(r"^(?P<path>[^:\s][^:]*\.py):\d+(?::\d+)?: error: ")
#: mypy's last line when it checked: "Success: no issues found in 9 source files" or
#: "Found 3 errors in 2 files (checked 9 source files)"
SUCCESS_LINE = re.compile(r"^Success: no issues found in \d+ source files?$")
FOUND_LINE = re.compile(r"^Found (?P<errors>\d+) errors? in (?P<files>\d+) files?\b")


def count_errors(lines: Iterable[str]) -> dict[str, int]:
    """Errors per file in mypy's output."""
    counts: Counter[str] = Counter()
    for line in lines:
        m = ERROR_LINE.match(line)
        if m:
            counts[m.group("path").replace("\\", "/")] += 1
    return dict(sorted(counts.items()))


def summary_problem(lines: list[str], counts: Mapping[str, int]) -> str | None:
    """Why mypy's output cannot be trusted as a count, or None when it can.

    A missing mypy (``No module named mypy``) also exits 1 with no error lines; without its
    own summary line that would read as zero errors, a pass nobody checked."""
    for line in reversed(lines):
        if SUCCESS_LINE.match(line.strip()):
            found = (0, 0)
            break
        m = FOUND_LINE.match(line.strip())
        if m:
            found = (int(m.group("errors")), int(m.group("files")))
            break
    else:
        return ("mypy printed no summary line ('Success: ...' or 'Found N errors in M files'):"
                " it did not run (pip install -r requirements-dev.txt)")
    counted = (sum(counts.values()), len(counts))
    if counted != found:
        return (f"mypy says {found[0]} errors in {found[1]} files, but {counted[0]} error lines"
                f" in {counted[1]} files were counted: its output format is not understood")
    return None


def compare(baseline: Mapping[str, int], now: Mapping[str, int]
            ) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    """(worse, better): the files whose count rose, and those whose count fell, each with
    (baseline, now). A file not in the baseline has a baseline of 0."""
    worse = {f: (baseline.get(f, 0), n) for f, n in now.items() if n > baseline.get(f, 0)}
    better = {f: (b, now.get(f, 0)) for f, b in baseline.items() if now.get(f, 0) < b}
    return worse, better


def run_mypy() -> list[str]:
    """mypy's output lines, stdout then stderr (so a failure to start is shown with them)."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode not in (0, 1):  # 2: mypy itself failed (bad config, crash)
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"mypy did not run (exit {proc.returncode})")
    return proc.stdout.splitlines() + proc.stderr.splitlines()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write today's counts as baseline")
    a = ap.parse_args(argv)
    lines = run_mypy()
    now = count_errors(lines)
    problem = summary_problem(lines, now)
    if problem:
        sys.stderr.write("".join(f"  {line}\n" for line in lines[-20:]))
        print(f"mypy check FAILED: {problem}", file=sys.stderr)
        return 2
    if a.update:
        BASELINE.write_text(json.dumps(now, indent=1) + "\n")
        print(f"mypy baseline: {sum(now.values())} errors in {len(now)} files -> {BASELINE}")
        return 0
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    worse, better = compare(baseline, now)
    for f, (b, n) in worse.items():
        print(f"{f}: {n} mypy errors, baseline {b}:")
        for line in lines:
            m = ERROR_LINE.match(line)
            if m and m.group("path") == f:
                print(f"  {line}")
    if better:
        print("fewer mypy errors than the baseline in " + ", ".join(
            f"{f} ({b} -> {n})" for f, (b, n) in better.items())
              + ": lower the baseline in this change to keep the gain: run"
              " python .ci/mypy_check.py --update and commit .ci/mypy-baseline.json")
    total = sum(now.values())
    if worse:
        print(f"mypy: more errors than the baseline in {len(worse)} file(s) ({total} in all): "
              "fix them (the baseline only goes down)")
    if worse or better:
        return 1
    print(f"mypy: {total} errors, none above the baseline ({sum(baseline.values())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
