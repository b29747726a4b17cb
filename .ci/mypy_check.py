"""The type check as a ratchet: mypy's errors per file may go down, never up.

The code base was not written against mypy, so CI cannot ask for zero errors at once. It asks
that no file gets worse than ``.ci/mypy-baseline.json`` (errors per file, as mypy counted them
when the baseline was written), and says when a file got better, so the baseline is lowered
and the gain kept:

    python .ci/mypy_check.py            # run mypy (pyproject.toml's [tool.mypy]) and compare
    python .ci/mypy_check.py --update   # write today's counts as the baseline

Exit 1 when a file has more errors than its baseline (its new errors are printed); 0
otherwise, with a note naming the files to lower in the baseline.
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


def count_errors(lines: Iterable[str]) -> dict[str, int]:
    """Errors per file in mypy's output."""
    counts: Counter[str] = Counter()
    for line in lines:
        m = ERROR_LINE.match(line)
        if m:
            counts[m.group("path").replace("\\", "/")] += 1
    return dict(sorted(counts.items()))


def compare(baseline: Mapping[str, int], now: Mapping[str, int]
            ) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    """(worse, better): the files whose count rose, and those whose count fell, each with
    (baseline, now). A file not in the baseline has a baseline of 0."""
    worse = {f: (baseline.get(f, 0), n) for f, n in now.items() if n > baseline.get(f, 0)}
    better = {f: (b, now.get(f, 0)) for f, b in baseline.items() if now.get(f, 0) < b}
    return worse, better


def run_mypy() -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode not in (0, 1):  # 2: mypy itself failed (bad config, crash)
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"mypy did not run (exit {proc.returncode})")
    return proc.stdout.splitlines()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write today's counts as baseline")
    a = ap.parse_args(argv)
    lines = run_mypy()
    now = count_errors(lines)
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
              + ": lower the baseline (python .ci/mypy_check.py --update) to keep the gain")
    total = sum(now.values())
    if worse:
        print(f"mypy: more errors than the baseline in {len(worse)} file(s) ({total} in all): "
              "fix them (the baseline only goes down)")
        return 1
    print(f"mypy: {total} errors, none above the baseline ({sum(baseline.values())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
