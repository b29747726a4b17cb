"""``--inputs`` whose content cannot be read as inputs is one line (exit 2) before anything
runs — no run measured, none saved as failed."""
import sqlite3

import pytest

from latency.cli.main import main


def _case(tmp_path, kind):
    if kind == "not utf-8":
        p = tmp_path / "in.txt"
        p.write_bytes(b"\xff\xfe\x00bad")
    elif kind == "blank lines":
        p = tmp_path / "in.txt"
        p.write_text("\n   \n\n")
    elif kind == "bad json line":
        p = tmp_path / "in.jsonl"
        p.write_text('{"a": 1}\n{oops\n')
    elif kind == "deep json":
        p = tmp_path / "in.jsonl"
        p.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    else:  # a file of a directory that cannot be read
        p = tmp_path / "dir"
        p.mkdir()
        (p / "a.bin").write_bytes(b"x")
        (p / "b.bin").symlink_to("/proc/self/mem")
    return p


@pytest.mark.parametrize("kind", ["not utf-8", "blank lines", "bad json line", "deep json",
                                  "unreadable file"])
def test_bad_inputs_content_is_one_line_before_anything_runs(tmp_path, monkeypatch, capsys,
                                                             kind):
    db = tmp_path / "runs.sqlite"
    monkeypatch.setenv("LATENCY_LAB_DB", str(db))
    src = _case(tmp_path, kind)
    code = main(["run", "--model", "text-transformer", "--inputs", str(src), "--requests", "5",
                 "--warmup", "0", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "--inputs" in err
    saved = sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] \
        if db.exists() else 0
    assert saved == 0


@pytest.mark.parametrize("name, content, says", [
    ("/dev/zero", None, "not a regular file or a directory"),
    ("missing.jsonl", None, "no such file or directory"),
    ("empty.jsonl", "", "the file is empty"),
    ("bad.jsonl", '"ok"\n{nope\n', "line 2 is not JSON"),
])
def test_prompts_take_the_same_checks_and_bounds_as_inputs_before_anything_runs(
        tmp_path, name, content, says):
    """--prompts /dev/zero once read until the kernel killed the run (20 GB); a missing file
    was named --inputs. Now: one line naming --prompts, exit 2, nothing run."""
    from tests.cli_support import cli_here

    where = name if name.startswith("/") else str(tmp_path / name)
    if content is not None:
        (tmp_path / name).write_text(content)
    out = cli_here("run", "--model", "synthetic-lm", "--prompts", where, "--output-tokens", "4",
                   "--requests", "2", "--no-save")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"latency: error: --prompts {where}")
    assert says in lines[0] and "Traceback" not in out.stderr
