"""A damaged history row or a crafted run file is one line (exit 2), never a traceback, in
every command that reads it; listing the history still works."""
import json
import sqlite3

import pytest

from latency.cli.main import main

DAMAGES = {
    "config": ("UPDATE runs SET config = ? WHERE id = ?", '"oops"'),
    "summary": ("UPDATE runs SET summary = ? WHERE id = ?", "{not json"),
    "record_dtype": ("UPDATE runs SET record_dtype = ? WHERE id = ?", "[[1, 2, 3]]"),
    "rows": ("UPDATE request_chunks SET rows = ? WHERE run_id = ?", b"not zlib at all"),
    "spectrum": ("UPDATE runs SET spectrum = ? WHERE id = ?", b"\x00\x01\x02"),
}


@pytest.fixture()
def saved(tmp_path, monkeypatch):
    db = tmp_path / "runs.sqlite"
    monkeypatch.setenv("LATENCY_LAB_DB", str(db))
    assert main(["run", "--model", "synthetic", "--requests", "40", "--warmup", "0",
                 "--quiet", "--json", str(tmp_path / "good.json")]) == 0
    (run_id,) = sqlite3.connect(db).execute("SELECT id FROM runs").fetchone()
    return db, run_id, tmp_path


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_run_is_one_line_in_every_command(saved, damage, capsys):
    db, run_id, tmp_path = saved
    sql, value = DAMAGES[damage]
    with sqlite3.connect(db) as conn:
        conn.execute(sql, (value, run_id))
    for args in (["history", "show", run_id], ["history", "show", run_id, "--json"],
                 ["history", "export", run_id, "--out", str(tmp_path / f"x-{damage}.json"),
                  "--force"],
                 ["compare", run_id, str(tmp_path / "good.json")],
                 ["simulate", "--from-run", run_id]):
        code = main(args)
        err = capsys.readouterr().err.strip()
        assert code in (0, 2), (args, code, err)  # a damage it does not read is fine
        if code == 2:
            assert len(err.splitlines()) == 1 and "Traceback" not in err, (args, err)
    assert main(["history"]) == 0  # the listing still works


@pytest.mark.parametrize("content", [{"config": "oops", "summary": {}},
                                     {"config": {}, "summary": "oops"}, "deep"])
def test_a_crafted_run_file_is_one_line(saved, content, capsys):
    _, run_id, tmp_path = saved
    path = tmp_path / "crafted.json"
    path.write_text("[" * 3000 + "]" * 3000 if content == "deep" else json.dumps(content))
    for args in (["compare", str(path), run_id], ["simulate", "--from-run", str(path)]):
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, (args, err)
