"""The history from the command line: `run` saves, `history` lists and manages, `compare`
diffs and gates CI on p99 (exit 1), bad input is one line and exit 2."""
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.cli_support import cli_here
from tests.timing_support import machine_note

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, db: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """``python -m latency ...``: ``run`` in a subprocess (as a user runs it); the history
    commands, which only read and write the database, through ``latency.cli.main`` in this
    process (the same code, without paying the package's torch import per call)."""
    extra = ["--db", str(db)] if db is not None else []
    if args[0] == "run":
        return subprocess.run([sys.executable, "-m", "latency", *args, *extra], cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)
    return cli_here(*args, *extra)


def one_line_error(out: subprocess.CompletedProcess, needle: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """Two real runs saved by the CLI's ``run`` (each measured in its run process): 1 ms
    forward, then 10 ms forward — a gap wider than the scheduling stalls of a loaded 2-core
    machine, so the p99 gate's answer is the model's, not the machine's."""
    db = tmp_path_factory.mktemp("hist") / "runs.sqlite"
    ids = []
    for fwd, name in (("1", "fast"), ("10", None)):
        args = ["run", "--model-arg", f"forward_ms={fwd}", "--model-arg", "preprocess_ms=0.5",
                "--model-arg", "postprocess_ms=0.2", "--requests", "200", "--warmup", "5",
                "--quiet"] + (["--name", name] if name else [])
        out = cli_here(*args, "--db", str(db))
        assert out.returncode == 0, out.stderr
        last = out.stdout.strip().splitlines()[-1]
        assert last.startswith("saved as run ")
        ids.append(last.split()[3])
    return db, ids


def test_run_saves_and_history_lists_newest_first(history):
    db, (fast, slow) = history
    out = cli("history", db=db)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:5] == ["id", "kind", "name", "when", "model"]
    assert lines[1].startswith(slow) and lines[2].startswith(fast) and "fast" in lines[2]
    for col in ("p50", "p99", "rate", "status", "validity", "load"):
        assert col in lines[0]
    assert "completed" in lines[1] and "closed 1 client" in lines[1] and "req/s" in lines[1]
    assert lines[1].split()[1] == "one-shot" and "VALID" in lines[1]
    listed = json.loads(cli("history", "--json", db=db).stdout)
    assert [r["id"] for r in listed] == [slow, fast]
    assert listed[0]["n"] == 200 and listed[0]["p99_ms"] > listed[1]["p99_ms"]
    only = json.loads(cli("history", "--json", "--search", "FAST", db=db).stdout)
    assert [r["id"] for r in only] == [fast]
    assert json.loads(cli("history", "--json", "--limit", "1", db=db).stdout)[0]["id"] == slow


@pytest.mark.timing
def test_the_listed_p50_is_the_set_stage_times(history):
    db, (_, slow) = history
    listed = json.loads(cli("history", "--json", db=db).stdout)
    shown = json.loads(cli("history", "show", slow, "--json", db=db).stdout)
    assert listed[0]["id"] == slow
    # 0.5 + 10 + 0.2 ms + hand-offs
    assert listed[0]["p50_ms"] == pytest.approx(10.7, rel=0.15), \
        (listed[0]["p50_ms"], machine_note(shown))


def test_compare_prints_the_diff_and_gates_on_p99(history):
    db, (fast, slow) = history
    out = cli("compare", fast, slow, db=db)
    assert out.returncode == 0, out.stderr
    assert "model_args.forward_ms: 1 → 10" in out.stdout, out.stdout
    fwd = next(line for line in out.stdout.splitlines() if line.startswith("forward"))
    a, b, delta, pct = fwd.split()[2:6]
    # a timed sleep overshoots on a loaded machine (by a fraction of a ms), never undershoots
    assert 0.95 <= float(a) <= 1.6 and 9.5 <= float(b) <= 11.0, (a, b)
    # three printed numbers, each rounded to ~3 significant figures (latency.core.fmt): ten
    # ms and more to 0.1 (±0.05), below to 0.01 (±0.005)
    half = lambda v: 0.05 if abs(float(v)) >= 10 else 0.005  # noqa: E731
    assert float(delta) == pytest.approx(float(b) - float(a),
                                         abs=half(a) + half(b) + half(delta) + 1e-9)
    assert pct.endswith("%") and float(pct[:-1]) > 400
    worse = cli("compare", fast[:4], slow[:4], "--fail-if-p99-worse", "10", db=db)
    assert worse.returncode == 1 and "REGRESSION: B p99" in worse.stdout
    better = cli("compare", slow, fast, "--fail-if-p99-worse", "10", db=db)
    assert better.returncode == 0 and "OK: B p99" in better.stdout and "better" in better.stdout
    lenient = cli("compare", "latest~1", "latest", "--fail-if-p99-worse", "10000", db=db)
    assert lenient.returncode == 0
    j = json.loads(cli("compare", fast, slow, "--json", "--fail-if-p99-worse", "10",
                       db=db).stdout)
    assert j["gate"]["passed"] is False and [r["id"] for r in j["runs"]] == [fast, slow]
    p99 = next(r for r in j["rows"] if r["component"] == "total" and r["stat"] == "p99")
    assert p99["delta_pct"][0] == pytest.approx(j["gate"]["results"][0]["change_pct"])


@pytest.mark.parametrize("args,needle", [
    (["compare", "abc123", "latest"], "no run 'abc123'"),
    (["compare", "latest"], "at least two"),
    (["compare", "latest", "not-an-id"], "not-an-id"),
    (["compare", "latest~1", "latest", "--fail-if-p99-worse", "-5"], "fail-if-p99-worse"),
    (["compare", "latest~9", "latest"], "holds 2 runs"),
    (["history", "rename", "abc123", "x"], "no run"),
    (["history", "delete", "abc123"], "no run"),
    (["history", "export", "latest", "--format", "xml", "--out", "/tmp/x"], "format"),
    (["history", "export", "latest", "--format", "csv", "--out", "/nonexistent/dir/x.csv"],
     "cannot write"),
    (["history", "--limit", "-1"], "limit"),
])
def test_bad_input_is_one_line_exit_2(history, args, needle):
    db, _ = history
    one_line_error(cli(*args, db=db, timeout=60), needle)


def test_run_with_a_bad_db_fails_before_running_and_no_save_skips(tmp_path):
    (tmp_path / "file").write_text("x")
    out = cli_here("run", "--requests", "10", "--quiet", "--db",
                   str(tmp_path / "file" / "h.sqlite"))  # refused before any run starts
    one_line_error(out, "cannot open the run history")
    assert out.stdout == ""  # nothing ran
    db = tmp_path / "h.sqlite"
    out = cli("run", "--requests", "40", "--warmup", "0", "--quiet", "--no-save", db=db)
    assert out.returncode == 0 and "saved as" not in out.stdout
    assert not db.exists()


def test_the_default_database_comes_from_the_environment(tmp_path):
    db = tmp_path / "env.sqlite"
    out = subprocess.run([sys.executable, "-m", "latency", "run", "--requests", "40",
                          "--warmup", "0", "--quiet"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={**__import__("os").environ,
                                                      "LATENCY_LAB_DB": str(db)})
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


def test_show_rename_export_delete(history, tmp_path):
    db, (fast, slow) = history
    show = cli("history", "show", slow, db=db)
    assert show.returncode == 0 and f"run {slow}" in show.stdout and "verdict:" in show.stdout
    assert cli("history", "rename", slow, "slow one", db=db).returncode == 0
    assert json.loads(cli("history", "show", slow, "--json", db=db).stdout)["name"] == "slow one"
    for fmt, name in (("csv", "r.csv"), ("parquet", "r.parquet"), ("json", "r.json"),
                      ("trace", "r.trace.json"), ("html", "r.html")):
        out = cli("history", "export", slow, "--format", fmt, "--out", str(tmp_path / name),
                  db=db)
        assert out.returncode == 0, out.stderr
    assert len(pd.read_csv(tmp_path / "r.csv")) == 205  # measured + warm-up
    assert len(pd.read_parquet(tmp_path / "r.parquet")) == 205
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["requests"] == 200
    trace = json.loads((tmp_path / "r.trace.json").read_text())
    assert sum(e.get("name") == "request" for e in trace["traceEvents"]) == 205
    report = (tmp_path / "r.html").read_text()
    assert f"<h1>Latency Lab run {slow} “slow one”</h1>" in report
    assert report.count('class="plotly-graph-div"') == 4 and "verdict:" in report
    # delete on a copy, so the module's history stays whole for the other tests
    copy = tmp_path / "copy.sqlite"
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    assert cli("history", "delete", slow, db=copy).returncode == 0
    assert [r["id"] for r in json.loads(cli("history", "--json", db=copy).stdout)] == [fast]


def test_compare_takes_a_committed_baseline_file(history, tmp_path):
    db, (fast, slow) = history
    baseline = tmp_path / "baseline.json"
    assert cli("history", "show", fast, "--json", db=db).returncode == 0
    baseline.write_text(cli("history", "show", fast, "--json", db=db).stdout)
    out = cli("compare", str(baseline), slow, "--fail-if-p99-worse", "10", db=db)
    assert out.returncode == 1 and "REGRESSION: B p99" in out.stdout
    assert "baseline.json" in out.stdout
    same = cli("compare", str(baseline), fast, "--fail-if-p99-worse", "10", db=db)
    assert same.returncode == 0, same.stdout
    bad = tmp_path / "not-a-run.json"
    bad.write_text('{"hello": 1}')
    one_line_error(cli("compare", str(bad), fast, db=db), "not a Latency Lab run JSON")


def test_a_json_export_is_a_run_file_simulate_and_compare_take(history, tmp_path):
    """`history export --format json` writes the run as `run --json` does — every request
    record — plus its id, name and date: `simulate --from-run FILE` replays it as it replays
    the history id, and `compare FILE …` labels it with the run's name and date, not the
    file's name and modification time."""
    import os

    db, (fast, slow) = history
    out_file = tmp_path / "exported.json"
    assert cli("history", "export", fast, "--format", "json", "--out", str(out_file),
               db=db).returncode == 0
    data = json.loads(out_file.read_text())
    assert (data["id"], data["name"]) == (fast, "fast")
    assert len(data["requests"]["columns"]["t_intended"]) == 205  # measured + warm-up
    listed = {r["id"]: r for r in json.loads(cli("history", "--json", db=db).stdout)}
    assert data["created_at"] == listed[fast]["created_at"]
    # the same keys as `run --json` writes, in its order, after the run's own four
    from latency.storage.run_files import load_result
    from latency.storage.store import RunStore

    result = RunStore(db).load(fast).result
    assert list(data)[4:] == list(json.loads(result.json_text()))
    assert len(load_result(out_file).log) == 205

    def header(ref: str) -> str:
        sim = cli("simulate", "--from-run", ref, "--requests", "3000", "--seed", "1", db=db)
        assert sim.returncode == 0, sim.stderr
        return sim.stdout.splitlines()[0]

    from_file, from_id = header(str(out_file)), header(fast)
    assert "(205 recorded requests" in from_file
    assert from_file.replace(str(out_file), fast) == from_id  # the same replay

    os.utime(out_file, (946_684_800, 946_684_800))  # a file time far from the run's
    cmp = cli("compare", str(out_file), slow, db=db)
    assert cmp.returncode == 0, cmp.stderr
    a_line = cmp.stdout.splitlines()[0]
    assert a_line.startswith("A  exported.json  “fast” · ") and listed[fast]["when"] in a_line
    assert "2000-01-0" not in a_line and str(out_file) not in a_line
