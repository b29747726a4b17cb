"""Nothing lost, nothing unbounded, no one in: each case a hostile user found, reproduced."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from latency.cli.main import main
from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.execution.process import RunHandle
from tests.timing_support import machine_note

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--model-arg", "preprocess_ms=0", "--model-arg", "forward_ms=0.5",
        "--model-arg", "postprocess_ms=0"]


def one_line(capsys, needle):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err
    return err


@pytest.fixture()
def db(tmp_path, capsys):
    """A history with one saved run."""
    path = tmp_path / "runs.sqlite"
    assert main(["run", *FAST, "--requests", "50", "--quiet", "--db", str(path)]) == 0
    capsys.readouterr()
    return path


def _runs(path):
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM runs").fetchone()[0]


# ---- 1, 2: outputs never destroy anything --------------------------------------------------
def test_no_output_can_overwrite_the_history(db, tmp_path, capsys):
    for args in (["run", *FAST, "--requests", "5", "--json", str(db)],
                 ["run", *FAST, "--requests", "5", "--csv", f"{db}-wal"],
                 ["simulate", "--rate", "10", "--requests", "100", "--json", str(db)],
                 ["history", "export", "latest", "--format", "json", "--out", str(db)]):
        assert main([*args, "--db", str(db)]) == 2, args
        one_line(capsys, "run history database")
    assert _runs(db) == 1 and sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() \
        == ("ok",)


def test_existing_files_need_force_and_bad_paths_fail_before_anything_runs(db, tmp_path,
                                                                           capsys):
    out = tmp_path / "out.json"
    out.write_text("keep me")
    assert main(["history", "export", "latest", "--format", "json", "--out", str(out),
                 "--db", str(db)]) == 2
    one_line(capsys, "exists; add --force")
    assert out.read_text() == "keep me"
    assert main(["history", "export", "latest", "--format", "json", "--out", str(out),
                 "--force", "--db", str(db)]) == 0
    assert json.loads(out.read_text())["status"] == "completed"
    capsys.readouterr()
    t = time.monotonic()
    for args, needle in ((["--json", str(tmp_path / "nodir" / "x.json")], "no directory"),
                         (["--json", str(tmp_path)], "is a directory"),
                         (["--json", str(out)], "exists; add --force")):
        assert main(["run", *FAST, "--requests", "100000", *args, "--db", str(db)]) == 2
        one_line(capsys, needle)
    assert main(["simulate", "--rate", "10", "--requests", "10000000", "--json",
                 str(tmp_path / "nodir" / "s.json")]) == 2
    one_line(capsys, "no directory")
    assert time.monotonic() - t < 10  # refused before running or simulating anything
    assert not (tmp_path / "nodir").exists() and _runs(db) == 1


def test_a_failed_file_write_keeps_the_run_and_names_its_id(db, tmp_path, capsys,
                                                            monkeypatch):
    from latency.storage import outputs

    def disk_full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs, "write_atomic", disk_full)
    code = main(["run", *FAST, "--requests", "30", "--quiet", "--json",
                 str(tmp_path / "r.json"), "--db", str(db)])
    captured = capsys.readouterr()
    assert code == 1 and _runs(db) == 2
    saved = captured.out.strip().splitlines()[-1].split()[3]
    assert "No space left on device" in captured.err and f"saved as {saved}" in captured.err
    assert "Traceback" not in captured.err and not (tmp_path / "r.json").exists()


def test_write_atomic_leaves_the_old_file_or_the_whole_new_one(tmp_path, monkeypatch):
    from latency.storage.outputs import write_atomic

    path = tmp_path / "f.json"
    path.write_text("old")
    real_replace = os.replace

    def fails(src, dst):
        raise OSError("interrupted")

    monkeypatch.setattr(os, "replace", fails)
    with pytest.raises(OSError):
        write_atomic(path, "new" * 1000)
    monkeypatch.setattr(os, "replace", real_replace)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["f.json"]
    write_atomic(path, "new")
    assert path.read_text() == "new"


# ---- 3: SIGTERM stops a run like Ctrl-C ----------------------------------------------------
def test_sigterm_keeps_what_was_measured_saves_it_and_exits_non_zero(tmp_path):
    db, out = tmp_path / "runs.sqlite", tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "latency", "run", *FAST, "--duration", "60",
                             "--warmup", "5", "--json", str(out), "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 60
    line = ""
    while "[measuring]" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "SIGTERM: stopping" in stderr and "Traceback" not in stderr
    d = json.loads(out.read_text())
    assert d["status"] == "stopped" and d["summary"]["requests"] > 100
    assert not d["validity"]["valid"]
    assert "saved as run" in stdout and _runs(db) == 1


# ---- 5: an overloaded open loop is bounded ---------------------------------------------------
def test_an_overloaded_open_loop_ends_on_time_and_counts_what_it_dropped(tmp_path, capsys):
    t = time.monotonic()
    code = main(["run", "--model-arg", "preprocess_ms=0", "--model-arg", "forward_ms=10",
                 "--model-arg", "postprocess_ms=0", "--rate", "2000", "--duration", "2",
                 "--warmup", "0", "--quiet", "--no-save", "--json", str(tmp_path / "o.json")])
    wall = time.monotonic() - t
    out = capsys.readouterr().out
    assert code == 1 and wall < 15  # 2 s of load + at most a 2 s grace, not a 40 s drain
    s = json.loads((tmp_path / "o.json").read_text())["summary"]
    assert s["overloaded"] and s["dropped"] > 2000  # 4,000 offered, ~100/s served
    assert s["requests"] < 1000
    assert "dropped" in s["verdict"] and "validity: INVALID" in out


# ---- 6, 7, 9: every number has a range; no traceback -----------------------------------------
@pytest.mark.parametrize("args, needle", [
    (["--warmup", "100000000"], "--warmup"),
    (["--warmup", str(10**12)], "--warmup"),
    (["--seed", "-1"], "--seed"),
    (["--model-arg", "forward_ms=1e9"], "forward_ms"),
    (["--model-arg", "stall_ms=1e12"], "stall_ms"),
    (["--model-arg", "forward_ms=nan"], "finite"),
    (["--model-arg", "preprocess_ms=inf"], "finite"),
    (["--max-error-rate", "2"], "--max-error-rate"),
    (["--rate", "10", "--max-backlog", "0"], "--max-backlog"),
    (["--rate", "10", "--drain-grace", "-1"], "--drain-grace"),
])
def test_out_of_range_numbers_are_one_line_before_anything_runs(args, needle, capsys):
    t = time.monotonic()
    assert main(["run", *args, "--requests", "5", "--no-save"]) == 2
    one_line(capsys, needle)
    assert time.monotonic() - t < 15


def test_history_limits_and_a_read_only_history_are_one_line(db, capsys):
    assert main(["history", "--limit", str(10**20), "--db", str(db)]) == 2
    one_line(capsys, "--limit")
    os.chmod(db, 0o444)
    try:
        if os.access(db, os.W_OK):
            pytest.skip("running as a user whom file modes do not stop")
        assert main(["history", "rename", "latest", "x", "--db", str(db)]) == 2
        one_line(capsys, "cannot")
    finally:
        os.chmod(db, 0o644)


# ---- 8: an exit status a CI job can trust ------------------------------------------------------
def test_a_run_where_every_request_failed_is_invalid_and_exits_1(tmp_path, capsys):
    code = main(["run", *FAST, "--model-arg", "error_rate=1", "--requests", "50",
                 "--no-save", "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 1 and "validity: INVALID" in out and "no successful requests" in out
    v = json.loads((tmp_path / "r.json").read_text())["validity"]
    assert not v["valid"] and {c["name"] for c in v["checks"] if not c["passed"]} >= {
        "requests succeeded", "error rate ≤ 1.0%"}
    ok = main(["run", *FAST, "--requests", "50", "--no-save"])
    assert ok == 0 and "validity: VALID" in capsys.readouterr().out


def test_a_target_answering_400_to_everything_is_failing_not_overloaded():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Refuses(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Refuses)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        r = execute(RunConfig(target=f"http://127.0.0.1:{httpd.server_address[1]}/p",
                              target_protocol="http", bodies=__file__, rate=100.0,
                              requests=300, warmup=0))
    finally:
        httpd.shutdown()
    # 3 s, not 1: the served rate is over the run's whole span, and one late reply on a busy
    # machine stretched a 1 s span past the 10 % that reads as overload
    assert r.summary.errors == 300, machine_note(r)
    assert not r.summary.overloaded, (r.summary.warnings, machine_note(r))
    assert not r.validity.valid and "overloaded" not in str(r.summary.verdict)


def test_warm_up_errors_are_not_counted_as_the_measured_phase_s_over_http():
    r = execute(RunConfig(model="synthetic", transport="http", requests=60, warmup=20,
                          model_args={"preprocess_ms": 0, "forward_ms": 0.2,
                                      "postprocess_ms": 0, "error_rate": 0.5}))
    counted = sum(r.timings.server_responses.values())
    assert counted == r.summary.requests  # the measured phase's 60, not the warm-up's 20 too


# ---- 13: deeply nested JSON is a counted 400 -------------------------------------------------
def test_deeply_nested_json_is_a_400_with_a_reason():
    from latency.serve.oip import ProtocolError, decode_request

    with pytest.raises(ProtocolError) as e:
        decode_request(b"[" * 100_000 + b"]" * 100_000, "application/json")
    assert e.value.status == 400 and "nested too deeply" in str(e.value)


# ---- 15: a Stop before the start never spawns a run --------------------------------------------
def test_a_run_stopped_in_line_never_starts():
    h = RunHandle(RunConfig(model="synthetic", requests=10))
    h.cancel()
    h.start()  # the scheduler reaching it a moment after the Stop
    assert h.status == "stopped" and h.done() and h._proc is None and h.started_at is None
    assert h.wait(timeout=1).status == "stopped"
    # a run far longer than the wait: only the Stop can end it in time
    h2 = RunHandle(RunConfig(model="synthetic", duration_s=600, warmup=0,
                             model_args={"forward_ms": 0.1}))
    h2.start()
    h2.cancel()  # once running, a Stop stops it (never leaves it "running")
    assert h2.wait(timeout=120).status == "stopped"
    h2.start()  # a second start of a finished run does nothing
    assert h2.status == "stopped" and h2.done()


def test_the_manager_never_runs_a_run_stopped_while_it_waited():
    from latency.execution.manager import RunManager

    m = RunManager(store=None)
    cfg = RunConfig(model="synthetic", model_args={"forward_ms": 1, "preprocess_ms": 0,
                                                   "postprocess_ms": 0},
                    duration_s=3, warmup=0)
    a = m.submit(cfg, owner="a")
    b = m.submit(cfg, owner="b")
    m.stop(b.run_id, requester="b")
    assert m.wait_idle(timeout=120)
    assert m.get(a.run_id).status == "completed"
    assert m.get(b.run_id).status == "stopped" and m.get(b.run_id).started_at is None
