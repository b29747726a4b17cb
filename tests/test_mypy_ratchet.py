"""The CI type check (``.ci/mypy_check.py``) is a ratchet: a file with more mypy errors than
its baseline fails CI and is named with its errors; a file with fewer fails too and asks for the
baseline to be lowered (--update), so the gain is kept in the change that made it. Output
without mypy's own summary line (mypy missing or crashed) fails instead of counting as zero.
mypy itself is not run here (CI runs it); its output is."""
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "mypy_check.py"


@pytest.fixture()
def check(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("mypy_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "BASELINE", tmp_path / "baseline.json")
    return mod


def mypy_says(check, monkeypatch, lines):
    monkeypatch.setattr(check, "run_mypy", lambda: lines)


OUTPUT = ["latency/a.py:3: error: Incompatible types  [assignment]",
          "latency/a.py:3: note: see https://mypy.readthedocs.io",
          "latency/a.py:9:5: error: Item None has no attribute  [union-attr]",
          "ui/b.py:1: error: Name 'x' is not defined  [name-defined]",
          "Found 3 errors in 2 files (checked 9 source files)"]


def test_errors_are_counted_per_file_and_notes_are_not_errors(check):
    assert check.count_errors(OUTPUT) == {"latency/a.py": 2, "ui/b.py": 1}


def test_a_file_worse_than_its_baseline_fails_and_is_named(check, monkeypatch, capsys):
    check.BASELINE.write_text(json.dumps({"latency/a.py": 1, "ui/b.py": 1}))
    mypy_says(check, monkeypatch, OUTPUT)
    assert check.main([]) == 1
    out = capsys.readouterr().out
    assert "latency/a.py: 2 mypy errors, baseline 1" in out and "[union-attr]" in out
    assert "ui/b.py: 1 mypy errors" not in out  # at its baseline: not named


def test_a_new_file_with_errors_fails(check, monkeypatch, capsys):
    check.BASELINE.write_text(json.dumps({"latency/a.py": 2}))
    mypy_says(check, monkeypatch, OUTPUT)
    assert check.main([]) == 1 and "ui/b.py: 1 mypy errors, baseline 0" in capsys.readouterr().out


def test_fewer_errors_fail_and_ask_for_a_lower_baseline(check, monkeypatch, capsys):
    check.BASELINE.write_text(json.dumps({"latency/a.py": 5, "ui/b.py": 1, "gone.py": 2}))
    mypy_says(check, monkeypatch, OUTPUT)
    assert check.main([]) == 1  # the baseline is lowered in the change that fixed them
    out = capsys.readouterr().out
    assert "latency/a.py (5 -> 2)" in out and "gone.py (2 -> 0)" in out
    assert "lower the baseline" in out and "python .ci/mypy_check.py --update" in out


def test_exactly_the_baseline_passes(check, monkeypatch, capsys):
    check.BASELINE.write_text(json.dumps({"latency/a.py": 2, "ui/b.py": 1}))
    mypy_says(check, monkeypatch, OUTPUT)
    assert check.main([]) == 0
    assert "mypy: 3 errors, none above the baseline (3)" in capsys.readouterr().out


def test_a_clean_run_passes_on_mypys_success_line(check, monkeypatch):
    check.BASELINE.write_text(json.dumps({}))
    mypy_says(check, monkeypatch, ["Success: no issues found in 9 source files"])
    assert check.main([]) == 0


MYPY_MISSING = ["/usr/bin/python: No module named mypy"]  # exit 1, no error lines


@pytest.mark.parametrize("args", [[], ["--update"]])
def test_output_without_mypys_summary_fails_loudly(check, monkeypatch, capsys, args):
    check.BASELINE.write_text(json.dumps({}))
    mypy_says(check, monkeypatch, MYPY_MISSING)
    assert check.main(args) != 0
    err = capsys.readouterr().err
    assert "no summary line" in err and "No module named mypy" in err
    assert json.loads(check.BASELINE.read_text()) == {}  # --update wrote nothing


def test_a_summary_that_disagrees_with_the_error_lines_fails(check, monkeypatch, capsys):
    check.BASELINE.write_text(json.dumps({"latency/a.py": 2, "ui/b.py": 1}))
    found_7 = "Found 7 errors in 3 files (checked 9 source files)"
    mypy_says(check, monkeypatch, OUTPUT[:-1] + [found_7])
    assert check.main([]) != 0
    assert "mypy says 7 errors in 3 files" in capsys.readouterr().err


def test_update_writes_todays_counts(check, monkeypatch):
    mypy_says(check, monkeypatch, OUTPUT)
    assert check.main(["--update"]) == 0
    assert json.loads(check.BASELINE.read_text()) == {"latency/a.py": 2, "ui/b.py": 1}


def test_the_committed_baseline_is_a_count_per_file():
    baseline = json.loads((SCRIPT.parent / "mypy-baseline.json").read_text())
    assert baseline and all(isinstance(n, int) and n > 0 for n in baseline.values())
    assert all(Path(SCRIPT.parents[1] / f).exists() for f in baseline)
