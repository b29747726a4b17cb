"""Run history: round trips of real runs, a writer killed mid-write, the manager's saving,
exports (Chrome trace included) and the comparison maths."""
import dataclasses
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from latency.analysis.compare import diff_rows, format_diff, p99_gate, setup_differences
from latency.analysis.summary import Summary
from latency.core.config import RunConfig
from latency.core.records import COMPONENTS, component_ns
from latency.execution.engine import execute
from latency.storage.export import export_bytes
from latency.storage.store import RunStore, StoreError
from latency.storage.trace import SEGMENTS, chrome_trace

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def runs():
    """Three real runs of the engine: a plain one, one with failing requests, a failed one."""
    plain = execute(RunConfig(model="synthetic", model_args={"forward_ms": 1.0},
                              concurrency=3, requests=150, warmup=5, seed=1))
    errors = execute(RunConfig(model="synthetic",
                               model_args={"forward_ms": 0.5, "error_rate": 0.2,
                                           "preprocess_ms": 0.2, "postprocess_ms": 0.2},
                               rate=300.0, requests=120, warmup=0, seed=2))
    failed = execute(RunConfig(model="synthetic", requests=5, warmup=0), inputs=[])
    assert plain.status == "completed" and errors.errors and failed.status == "failed"
    return {"plain": plain, "errors": errors, "failed": failed}


def test_a_run_round_trips_exactly(tmp_path, runs):
    store = RunStore(tmp_path / "h.sqlite")
    for r in runs.values():
        run_id = store.save(r, source="test")
        back = store.load(run_id).result
        assert back.log.dtype == r.log.dtype and back.log.tobytes() == r.log.tobytes()
        assert back.errors == r.errors and back.status == r.status
        assert back.config.to_dict() == json.loads(json.dumps(r.config.to_dict()))
        assert back.environment == json.loads(json.dumps(r.environment))
        assert back.timings == r.timings and back.failure == r.failure
        assert back.summary.to_dict() == json.loads(json.dumps(r.summary.to_dict()))
        assert back.requests_frame().equals(r.requests_frame())
    assert store.integrity_check() == "ok"


def test_listing_filters_and_the_aggregates_need_no_rows(tmp_path, runs):
    store = RunStore(tmp_path / "h.sqlite")
    ids = {k: store.save(r) for k, r in runs.items()}
    listed = store.list()
    assert [i.id for i in listed] == [ids["failed"], ids["errors"], ids["plain"]]  # newest first
    plain = next(i for i in listed if i.id == ids["plain"])
    s = runs["plain"].summary
    assert plain.n == 150 and plain.model == "synthetic" and plain.load == "closed 3 clients"
    assert plain.p99_ms == pytest.approx(s.latency_ms.p99)
    assert plain.throughput_rps == pytest.approx(s.throughput_rps)
    assert next(i for i in listed if i.id == ids["errors"]).load == "open 300 req/s poisson"
    assert [i.id for i in store.list(status="failed")] == [ids["failed"]]
    assert [i.id for i in store.list(text="300 REQ")] == [ids["errors"]]
    assert len(store.list(limit=2)) == 2 and store.list(model="image-cnn") == []
    agg = store.load(ids["plain"], rows=False)
    p, ms = agg.spectrum
    assert agg.result is None and p[0] == 0.0 and p[-1] == pytest.approx(1 - 1 / 150)
    assert np.all(np.diff(p) > 0) and np.all(np.diff(ms) >= 0)
    assert ms[np.isclose(p, 0.5)][0] == pytest.approx(s.latency_ms.p50, rel=1e-9)
    assert np.interp(0.99, p, ms) == pytest.approx(s.latency_ms.p99, rel=0.02)
    # the make-up's mean bar is the components' means
    for c in COMPONENTS:
        assert agg.makeup_ms["mean"][c] == pytest.approx(s.components_ms[c].mean)


def test_ids_prefixes_latest_rename_delete(tmp_path, runs):
    store = RunStore(tmp_path / "h.sqlite")
    a = store.save(runs["plain"])
    b = store.save(runs["errors"])
    assert len(a) == 6 and store.resolve(a[:4]) == a and store.resolve(a.upper()) == a
    assert store.resolve("latest") == b and store.resolve("latest~1") == a
    with pytest.raises(StoreError, match="holds 2 runs"):
        store.resolve("latest~2")
    with pytest.raises(StoreError, match="no run 'zz'"):
        store.resolve("zz")
    with pytest.raises(StoreError, match="no run"):
        store.resolve("ffffffff" if not a.startswith("ffff") else "00000000")
    assert store.rename(a, "  baseline ").name == "baseline"
    assert store.info(a).label == "baseline"
    with pytest.raises(StoreError, match="empty"):
        store.rename(a, " ")
    store.delete(a)
    assert [i.id for i in store.list()] == [b]
    with sqlite3.connect(store.path) as conn:  # the rows went with it
        assert conn.execute("SELECT count(*) FROM request_chunks WHERE run_id=?",
                            (a,)).fetchone()[0] == 0


def test_an_ambiguous_prefix_is_refused(tmp_path, runs):
    store = RunStore(tmp_path / "h.sqlite")
    ids = [store.save(runs["failed"]) for _ in range(40)]  # 40 ids: some share a first digit
    first = {}
    for i in ids:
        first.setdefault(i[0], []).append(i)
    shared = next(v for v in first.values() if len(v) > 1)
    with pytest.raises(StoreError, match="ambiguous"):
        store.resolve(shared[0][0])


def test_a_bad_database_path_is_one_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot open"):
        RunStore(tmp_path / "file" / "h.sqlite").check_writable()
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="cannot use"):
        RunStore(tmp_path / "junk.sqlite").list()


def test_the_test_suite_never_touches_the_real_history():
    assert "latency-lab-test-history" in os.environ["LATENCY_LAB_DB"]
    assert RunStore().path == Path(os.environ["LATENCY_LAB_DB"])


KILL_CHILD = textwrap.dedent("""
    import numpy as np
    from latency.analysis.result import RunResult
    from latency.core.config import RunConfig
    from latency.storage.store import RunStore
    big = RunResult(config=RunConfig.from_dict({config!r}), environment={{}}, status="completed",
                    log=np.load({rows!r}))
    store = RunStore({db!r})
    while True:
        print("saved", store.save(big, name="big"), flush=True)
""")


def test_a_writer_killed_mid_write_leaves_a_consistent_database(tmp_path, runs):
    """SIGKILL a process while it is inside a save transaction (detected by the write lock it
    holds, not by timing): integrity_check is ok and every earlier run loads intact."""
    db = tmp_path / "h.sqlite"
    store = RunStore(db)
    earlier = {store.save(r): r for r in runs.values()}
    # a big log: the plain run's real rows, resampled to 400,000 (varied, so they compress
    # like real rows and the transaction writes tens of MB)
    rng = np.random.default_rng(0)
    log = runs["plain"].log
    big = log[rng.integers(0, len(log), 400_000)]
    np.save(tmp_path / "big.npy", big)
    code = KILL_CHILD.format(config=runs["plain"].config.to_dict(),
                             rows=str(tmp_path / "big.npy"), db=str(db))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    saved: list[str] = []
    try:
        saved.append(child.stdout.readline().split()[1])  # one big run committed first
        probe = sqlite3.connect(db, timeout=0, isolation_level=None)
        deadline = time.monotonic() + 120
        killed_mid_write = False
        while time.monotonic() < deadline:
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
            except sqlite3.OperationalError as exc:  # "database is locked": child is writing
                assert "locked" in str(exc)
                os.kill(child.pid, signal.SIGKILL)
                killed_mid_write = True
                break
            time.sleep(0.002)
        probe.close()
        assert killed_mid_write, "never caught the writer inside a transaction"
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait()
        saved += [line.split()[1] for line in child.stdout.read().splitlines()]
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    after = RunStore(db)
    assert after.integrity_check() == "ok"
    for run_id, r in earlier.items():  # every earlier run intact
        back = after.load(run_id).result
        assert back.log.tobytes() == r.log.tobytes() and back.errors == r.errors
    listed = {i.id for i in after.list()}
    assert set(earlier) | set(saved) <= listed
    assert len(listed - set(earlier) - set(saved)) <= 1  # at most a commit the child never printed
    for run_id in listed - set(earlier):  # and no half-written run
        assert after.load(run_id).result.log.tobytes() == big.tobytes()
    assert after.save(runs["plain"])  # and it takes new runs


def test_readers_see_whole_runs_while_a_writer_saves(tmp_path, runs):
    store = RunStore(tmp_path / "h.sqlite")
    store.save(runs["plain"])
    rows = np.tile(runs["plain"].log, 300)  # ~50,000 rows per save
    from latency.analysis.result import RunResult

    big = RunResult(config=runs["plain"].config, environment={}, status="completed", log=rows)
    problems: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        r = RunStore(store.path)
        while not stop.is_set():
            for info in r.list():
                n = len(r.load(info.id).result.log)
                if n not in (len(rows), len(runs["plain"].log)):
                    problems.append(f"{info.id}: {n} rows")

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(4):
            store.save(big)
    finally:
        stop.set()
        t.join()
    assert not problems and store.count() == 5


def test_the_manager_saves_each_finished_run_and_survives_a_failing_store(tmp_path):
    from latency.execution.manager import RunManager

    store = RunStore(tmp_path / "h.sqlite")
    mgr = RunManager(store=store)
    t = mgr.submit(RunConfig(model="synthetic", model_args={"forward_ms": 0.5},
                             requests=40, warmup=0), owner="me")
    assert mgr.wait_idle(120)
    saved = mgr.saved_id(t.run_id)
    assert saved and store.info(saved).origin_id == t.run_id
    assert store.info(saved).source == "dashboard"
    assert store.load(saved).result.log.tobytes() == mgr.get(t.run_id).result().log.tobytes()

    class Broken:
        def save(self, *a, **k):
            raise OSError("disk full")

    mgr2 = RunManager(store=Broken())
    t2 = mgr2.submit(RunConfig(model="synthetic", requests=20, warmup=0), owner="me")
    assert mgr2.wait_idle(120)
    assert mgr2.saved_id(t2.run_id) is None and "disk full" in mgr2.save_error(t2.run_id)
    assert mgr2.get(t2.run_id).result().summary.requests == 20  # the result is kept


# ---------------------------------------------------------------------------- exports


def test_the_chrome_trace_has_a_span_per_component_summing_to_it(runs):
    r = runs["errors"]
    trace = chrome_trace(r.log, r.errors, {"run_id": "x"})
    json.dumps(trace)  # serialisable
    ev = trace["traceEvents"]
    assert all(e["ph"] in ("X", "M") for e in ev)
    spans = [e for e in ev if e["ph"] == "X"]
    reqs = [e for e in spans if e["name"] == "request"]
    assert len(reqs) == len(r.log)
    comps = component_ns(r.log)
    parts: dict[int, dict[str, float]] = {}
    for e in spans:
        if e["cat"] == "component":
            d = parts.setdefault(e["args"]["request"], {})
            d[e["name"]] = d.get(e["name"], 0.0) + e["dur"]
    for req in reqs:
        i = req["args"]["request"]
        assert req["dur"] == pytest.approx(comps["total"][i] / 1e3, abs=1e-3)
        assert req["args"]["batch_id"] == r.log["batch_id"][i]
        assert req["args"]["replica"] == r.log["replica"][i]
        assert (req["args"]["status"] == "error") == (i in r.errors)
        for c in COMPONENTS:  # µs, to the nanosecond
            assert parts.get(i, {}).get(c, 0.0) == pytest.approx(comps[c][i] / 1e3, abs=2e-3)
    # children nest inside their request, on its lane; requests on one lane never overlap
    parent = {q["args"]["request"]: q for q in reqs}
    for e in spans:
        if e["cat"] == "component":
            q = parent[e["args"]["request"]]
            assert e["tid"] == q["tid"] and e["pid"] == q["pid"]
            assert q["ts"] - 1e-6 <= e["ts"] and e["ts"] + e["dur"] <= q["ts"] + q["dur"] + 1e-6
    by_lane: dict[int, list] = {}
    for q in reqs:
        by_lane.setdefault(q["tid"], []).append((q["ts"], q["ts"] + q["dur"]))
    for spans_on_lane in by_lane.values():
        spans_on_lane.sort()
        assert all(b[0] >= a[1] - 1e-6 for a, b in zip(spans_on_lane, spans_on_lane[1:]))
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "lane 0" in names and "replica 0" in names
    batches = [e for e in spans if e["cat"] == "batch"]
    assert len(batches) == len(set(r.log["batch_id"][r.log["batch_id"] >= 0].tolist()))
    assert {s[0] for s in SEGMENTS} == set(COMPONENTS)


def test_trace_keeps_the_first_requests_when_capped(runs):
    r = runs["plain"]
    trace = chrome_trace(r.log, max_requests=10)
    reqs = [e for e in trace["traceEvents"] if e.get("name") == "request"]
    first = set(np.argsort(r.log["t_intended"], kind="stable")[:10].tolist())
    assert {e["args"]["request"] for e in reqs} == first
    assert trace["otherData"]["requests_in_run"] == len(r.log)


def test_exports_csv_parquet_json(tmp_path, runs):
    store = RunStore(tmp_path / "h.sqlite")
    run = store.load(store.save(runs["errors"], name="with errors"))
    n = len(runs["errors"].log)
    csv = pd.read_csv(io.BytesIO(export_bytes(run, "csv")))
    pq = pd.read_parquet(io.BytesIO(export_bytes(run, "parquet")))
    assert len(csv) == len(pq) == n and list(csv.columns) == list(pq.columns)
    assert (pq["status"] == "error").sum() == len(runs["errors"].errors)
    assert pq["total_ms"].to_numpy() == pytest.approx(component_ns(runs["errors"].log)["total"]
                                                      / 1e6)
    d = json.loads(export_bytes(run, "json"))
    assert d["id"] == run.info.id and d["name"] == "with errors"
    assert d["summary"]["requests"] == runs["errors"].summary.requests


# ---------------------------------------------------------------------------- comparing


def _summary(total: dict, **comps: dict) -> Summary:
    return Summary.from_dict({"latency_ms": total,
                              "components_ms": {c: comps.get(c, {}) for c in COMPONENTS}})


def test_diff_rows_known_answers():
    a = _summary({"mean": 10.0, "p50": 8.0, "p99": 20.0}, forward={"mean": 5.0, "p50": 0.0})
    b = _summary({"mean": 12.0, "p50": 8.0, "p99": 30.0}, forward={"mean": 2.5, "p50": 1.0})
    rows = {(r["component"], r["stat"]): r for r in diff_rows([a, b])}
    assert rows[("total", "p99")]["delta_ms"] == [10.0]
    assert rows[("total", "p99")]["delta_pct"] == [50.0]
    assert rows[("total", "mean")]["delta_pct"] == [pytest.approx(20.0)]
    assert rows[("forward", "mean")]["delta_pct"] == [-50.0]
    assert rows[("forward", "p50")]["delta_pct"] == [None]  # relative to zero: undefined
    assert rows[("queue", "p99")]["values"] == [None, None]
    text = format_diff(["A", "B"], [a, b])
    assert "+50%" in text and "−50%" in text and "Δ% B" in text
    three = format_diff(["A", "B", "C"], [a, b, a]).splitlines()
    assert three[0].split() == ["ms", "A", "B", "C", "Δ", "B", "Δ%", "B", "Δ", "C", "Δ%", "C"]
    p99 = next(line for line in three if line.split()[:2] == ["total", "mean"])
    assert p99.split()[-4:] == ["+2.00", "+20%", "+0", "+0.0%"]


def test_p99_gate_thresholds():
    a = _summary({"p99": 20.0, "p99_ci95": [19.0, 21.0]})
    assert p99_gate(a, _summary({"p99": 21.9}), 10).passed  # +9.5%
    g = p99_gate(a, _summary({"p99": 22.2, "p99_ci95": [22.0, 23.0]}), 10)
    assert not g.passed and g.change_pct == pytest.approx(11.0)
    assert "do not overlap" in g.message and g.message.startswith("REGRESSION")
    assert p99_gate(a, _summary({"p99": 5.0}), 0).passed  # better always passes
    assert not p99_gate(a, _summary({"p99": None}), 50).passed  # nothing succeeded
    with pytest.raises(ValueError, match="no successful"):
        p99_gate(_summary({"p99": None}), a, 10)


def test_setup_differences_name_the_keys_that_changed():
    d = setup_differences({"model": "m", "batch_size": 1, "model_args": {"x": 1, "y": 2}},
                          {"model": "m", "batch_size": 8, "model_args": {"x": 1, "y": 3}},
                          {"git_commit": "abc"}, {"git_commit": "def"})
    assert d == ["model_args.y: 2 → 3", "batch_size: 1 → 8", "git_commit: abc → def"]


@pytest.mark.parametrize("change, named", [
    ({"backend": "ray"}, "backend: builtin → ray"),
    ({"ray_preprocess": "deployment"}, "ray_preprocess: replica → deployment"),
    ({"inputs": "texts.jsonl"}, "inputs: not set → texts.jsonl"),
    ({"pipeline": "my.mod:Pipe"}, "pipeline: not set → my.mod:Pipe"),
    ({"target_protocol": "http"}, "target_protocol: oip → http"),
])
def test_a_compare_of_runs_differing_in_one_setting_names_it(runs, change, named):
    """A builtin run against a Ray run (or any one setting changed): the comparison says what
    differs in their setup, whichever RunConfig field it is."""
    a = runs["plain"]
    b = dataclasses.replace(a, config=dataclasses.replace(a.config, **change))
    text = repr(a.compare(b))
    assert f"setup A → B: {named}" in text, text
    assert "setup A → B" not in repr(a.compare(a))


def test_every_compared_setting_is_a_runconfig_field():
    """The settings a compare walks are RunConfig's own, read by attribute: a renamed field
    cannot silently read None, and every field is compared or says why it is not."""
    from latency.analysis import compare

    names = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(compare.CONFIG_KEYS) <= names and set(compare.NOT_SETUP) <= names
    assert set(compare.CONFIG_KEYS) | set(compare.NOT_SETUP) == names
    assert not set(compare.CONFIG_KEYS) & set(compare.NOT_SETUP)
    assert all(compare.NOT_SETUP.values())  # each exclusion says why
    assert all(isinstance(getattr(RunConfig, p), property) for p in compare.SETUP_PROPERTIES)


def test_a_version_1_history_is_migrated_and_keeps_its_runs(tmp_path, runs):
    import latency.storage.store as store_mod

    db = tmp_path / "v1.sqlite"
    v1_schema = (store_mod._SCHEMA.replace("    setup TEXT NOT NULL,\n", "")  # added in v2
                 .replace(",\n    owner TEXT\n", "\n"))  # added in v3
    with sqlite3.connect(db) as conn:
        conn.executescript(v1_schema)
        conn.execute("PRAGMA user_version=1")
        conn.execute("INSERT INTO runs (id, created_at, status, source, model, mode, load, n, "
                     "errors, config, environment, summary, timings, warnings, error_messages, "
                     "makeup, n_rows, record_dtype) VALUES ('abc123', 1.0, 'completed', 'cli', "
                     "'synthetic', 'closed', 'closed 1 client', 0, 0, '{}', '{}', '{}', '{}', "
                     "'[]', '{}', '{}', 0, ?)", (json.dumps(runs["plain"].log.dtype.descr),))
    store = RunStore(db)
    new = store.save(runs["plain"])
    assert [i.id for i in store.list()] == [new, "abc123"]
    assert store.info("abc123").setup == "" and store.load("abc123").result.log.size == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION


def test_labels_name_what_differs_from_a_plain_run(tmp_path, runs):
    from latency.storage.store import setup_description

    assert setup_description(runs["plain"].config) == ""
    cfg = dataclasses.replace(runs["plain"].config, batch_size=8, max_batch_delay_ms=5.0,
                              replicas=2, optimize=["int8"], pre="naive")
    assert setup_description(cfg) == "batch ≤ 8 / 5 ms · 2 replicas · int8 · naive pre"
    store = RunStore(tmp_path / "h.sqlite")
    from latency.analysis.result import RunResult

    r = RunResult(config=cfg, environment={}, status="completed", log=runs["plain"].log)
    info = store.info(store.save(r))
    assert info.label == ("synthetic · closed 3 clients · batch ≤ 8 / 5 ms · 2 replicas · "
                          "int8 · naive pre")
    assert [i.id for i in store.list(text="int8")] == [info.id]
