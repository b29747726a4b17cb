"""A run measured on a busy machine is marked DISTURBED wherever runs are listed or compared,
and compare and A/B warn when their runs or arms were disturbed unequally.

- the history (``history`` list and ``--json``, ``history show``), ``compare`` (text, JSON and
  run files) and ``ab`` through ``latency.cli.main``; the Compare Runs page through AppTest;
- the machine's figures of those runs are CRAFTED (labelled so below): each is a real engine
  run whose ``environment["disturbance"]`` is replaced with a quiet or a busy machine's
  numbers — a shared 2-core machine is never reliably quiet, so only crafted numbers give
  both answers deterministically. A run without samples (saved before they were taken)
  stands for an old run: it gets no mark at all, not "quiet";
- the Live Profiler and the Optimisation Lab are driven for real beside CPU hogs
  (``while True: pass``), as tests/test_disturbance.py does: their badges come from the
  samples the run process took itself.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.analysis.machine import (
    badge_label,
    disturbed_mark,
    is_disturbed,
    pooled,
    sampled,
    unequal_disturbance,
)
from latency.analysis.result import RunResult
from latency.analysis.validity import machine_finding
from latency.cli.main import main
from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.storage.store import RunStore
from tests.conftest import rerun_until

APP = str(Path(__file__).resolve().parents[1] / "app.py")
HOG = [sys.executable, "-c", "while True: pass"]
STAGES = {"preprocess_ms": 0.3, "forward_ms": 0.5, "postprocess_ms": 0.2}


def machine(other: float, **over) -> dict:
    """CRAFTED: ``environment["disturbance"]`` of a 10-s measurement on 2 cores, other
    processes using ``other`` cores of them (the quiet limit there is 0.4)."""
    d = {"period_s": 1.0, "samples": 11, "cores": 2, "measured_s": 10.0,
         "other_cores_mean": other, "other_cores_max": other + 0.2, "run_cores_mean": 1.0,
         "steal_cores_mean": 0.0, "involuntary_switches": 150, "throttled_periods": 0,
         "throttled_s": 0.0, "memory_pressure_pct": 0.0, "cpu_pressure_pct": 0.5,
         "sampler_cpu_s": 0.01, "sampler_cpu_pct": 0.1,
         "series": {"t_s": [5.0, 10.0], "other_cores": [other, other]}}
    d.update(over)
    return d


QUIET, BUSY = machine(0.03), machine(1.3)


def on_machine(result: RunResult, disturbance: dict | None) -> RunResult:
    """A real run with CRAFTED machine samples (None: none, as a run saved before they were
    taken), its ``machine`` finding made from them as the engine makes it."""
    env = {k: v for k, v in result.environment.items() if k != "disturbance"}
    if disturbance is not None:
        env["disturbance"] = disturbance
    finding = machine_finding(env)
    warnings = [w for w in result.warnings if getattr(w, "kind", None) != "machine"]
    return dataclasses.replace(result, environment=env,
                               warnings=warnings + ([finding] if finding else []))


@pytest.fixture(scope="module")
def real():
    """One short real run of the synthetic pipeline (in this process)."""
    return execute(RunConfig(model="synthetic", model_args=STAGES, requests=120, warmup=5))


@pytest.fixture
def history(tmp_path, real):
    """A history of three runs of the same real measurement: an old one (no samples), a quiet
    one and, newest, a disturbed one (CRAFTED samples)."""
    db = tmp_path / "runs.sqlite"
    store = RunStore(db)
    ids = {"old": store.save(on_machine(real, None), name="old run"),
           "quiet": store.save(on_machine(real, QUIET), name="quiet run"),
           "busy": store.save(on_machine(real, BUSY), name="busy run")}
    return db, ids


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


def row_of(listing: str, run_id: str) -> str:
    return next(line for line in listing.splitlines() if line.startswith(run_id))


# ---- the history ---------------------------------------------------------------------------
def test_history_marks_a_disturbed_run_and_nothing_on_an_unsampled_one(history):
    db, ids = history
    code, out = cli("history", "--db", str(db))
    assert code == 0
    header = out.splitlines()[0].split()
    assert header[header.index("status") + 1:header.index("status") + 3] == ["validity",
                                                                               "machine"]
    assert re.search(r"completed\s+VALID\s+DISTURBED\s+120\b", row_of(out, ids["busy"])), out
    assert re.search(r"completed\s+VALID\s+quiet\s+120\b", row_of(out, ids["quiet"])), out
    old = row_of(out, ids["old"])
    assert re.search(r"completed\s+VALID\s+120\b", old)
    assert "quiet" not in old and "DISTURBED" not in old
    assert "(DISTURBED: the machine was busy while the run measured" in out
    # quiet runs only: no mark, no note
    code, out = cli("history", "--db", str(db), "--search", "quiet")
    assert code == 0 and "DISTURBED" not in out and row_of(out, ids["quiet"])


def test_history_json_says_disturbed_true_false_or_null(history):
    db, ids = history
    code, out = cli("history", "--db", str(db), "--json")
    by_id = {r["id"]: r for r in json.loads(out)}
    assert code == 0
    assert by_id[ids["busy"]]["disturbed"] is True
    assert by_id[ids["busy"]]["machine"]["other_cores_mean"] == 1.3
    assert "series" not in by_id[ids["busy"]]["machine"]  # the listing's figures, not samples
    assert by_id[ids["quiet"]]["disturbed"] is False
    assert by_id[ids["old"]]["disturbed"] is None and by_id[ids["old"]]["machine"] is None


def test_history_show_marks_it_and_a_disturbed_run_exits_0(history):
    db, ids = history
    code, out = cli("history", "show", ids["busy"], "--db", str(db))
    first = out.splitlines()[0]
    assert code == 0 and first.endswith("· DISTURBED"), first
    assert "validity: VALID but DISTURBED: other processes used 1.3 of 2 cores" in out
    code, out = cli("history", "show", ids["quiet"], "--db", str(db))
    assert code == 0 and "DISTURBED" not in out and "validity: VALID (" in out


def test_a_damaged_environment_lists_without_a_mark(history):
    import sqlite3

    db, ids = history
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET environment = '{not json' WHERE id = ?", (ids["busy"],))
    code, out = cli("history", "--db", str(db))
    assert code == 0 and "DISTURBED" not in row_of(out, ids["busy"])


# ---- compare -------------------------------------------------------------------------------
def test_compare_warns_when_one_run_was_disturbed_and_the_other_not(history):
    db, ids = history
    code, out = cli("compare", ids["quiet"], ids["busy"], "--db", str(db))
    assert code == 0  # a warning, not a gate
    lines = out.splitlines()
    assert lines[0].startswith("A  ") and "DISTURBED" not in lines[0]
    assert lines[1].startswith("B  ") and lines[1].endswith("· DISTURBED")
    assert ("B DISTURBED: other processes used 1.3 of 2 cores on average during the "
            "measurement") in out
    assert ("warning: B was measured while other processes used 1.30 of 2 cores, A 0.03: "
            "the difference between B and A may be the machine's") in out
    code, out = cli("compare", ids["quiet"], ids["busy"], "--db", str(db), "--json")
    d = json.loads(out)
    assert d["machine_warning"].startswith("B was measured while other processes used 1.30")
    assert [r["disturbed"] for r in d["runs"]] == [False, True]


def test_compare_of_two_quiet_runs_or_an_unsampled_one_warns_of_nothing(history, real, tmp_path):
    db, ids = history
    other_quiet = RunStore(db).save(on_machine(real, machine(0.3)))  # within 0.4 of 0.03
    code, out = cli("compare", ids["quiet"], other_quiet, "--db", str(db))
    assert code == 0 and "DISTURBED" not in out and "warning: " not in out
    code, out = cli("compare", ids["quiet"], other_quiet, "--db", str(db), "--json")
    assert json.loads(out)["machine_warning"] is None
    # an old run has no samples: nothing can be said about the two machines (B still marked)
    code, out = cli("compare", ids["old"], ids["busy"], "--db", str(db))
    assert "warning: " not in out and "B DISTURBED" in out


def test_compare_of_run_files_warns_too(real, tmp_path):
    """``run --json`` files (a CI baseline), their machine CRAFTED."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(on_machine(real, machine(1.9)).json_text())
    b.write_text(on_machine(real, QUIET).json_text())
    code, out = cli("compare", str(a), str(b))
    assert code == 0 and out.splitlines()[0].endswith("· DISTURBED")
    assert "warning: A was measured while other processes used 1.90 of 2 cores, B 0.03" in out


def test_both_disturbed_but_unequally_is_a_warning_and_the_python_comparison_says_it(real):
    a, b = on_machine(real, machine(0.5)), on_machine(real, machine(1.9))
    text = repr(a.compare(b))
    assert "warning: B was measured while other processes used 1.90 of 2 cores, A 0.50" in text
    assert a.compare(on_machine(real, machine(0.7))).machine_warning is None  # both, alike


# ---- A/B -----------------------------------------------------------------------------------
def ab_blocks(monkeypatch, arms: dict[str, list[dict]]) -> None:
    """``ab``'s blocks run for real (each in its run process); their machine samples are then
    CRAFTED, block by block: ``arms["A"][i]`` for the i-th A block. B is told by its 2
    replicas."""
    from latency.execution import process

    real_run = process.run_watched
    seen = {"A": 0, "B": 0}

    def run_watched(handle, **kwargs):
        result = real_run(handle, **kwargs)
        arm = "B" if handle.config.replicas == 2 else "A"
        d = arms[arm][seen[arm]]
        seen[arm] += 1
        return on_machine(result, d)

    monkeypatch.setattr(process, "run_watched", run_watched)


AB = ["ab", "--model", "synthetic", *[x for k, v in STAGES.items()
                                       for x in ("--model-arg", f"{k}={v}")],
      "--duration", "0.3", "--warmup", "5", "--pairs", "2", "--b-replicas", "2"]


def test_ab_warns_when_the_arms_were_disturbed_unequally(monkeypatch, tmp_path):
    ab_blocks(monkeypatch, {"A": [QUIET, QUIET], "B": [machine(1.3), machine(0.5)]})
    code, out = cli(*AB, "--json", str(tmp_path / "ab.json"))
    assert code == 0, out
    # each arm pooled over its blocks (time-weighted: (1.3 + 0.5) / 2 = 0.9 for B)
    assert ("warning: arm B was measured while other processes used 0.90 of 2 cores, arm A "
            "0.03 (B 2 of 2, A 0 of 2 blocks DISTURBED): the difference between B and A may "
            "be the machine's") in out
    assert ("machine: A other processes 0.03 of 2 cores, 0 of 2 blocks DISTURBED · B other "
            "processes 0.90 of 2 cores, 2 of 2 blocks DISTURBED") in out
    b_machine = [w for w in out.splitlines() if w.startswith("warning (B): machine:")]
    assert len(b_machine) == 1, out  # once for the arm, not once a block
    assert "DISTURBED: 2 of 2 blocks" in b_machine[0]
    assert not any(w.startswith("warning (A): machine:") for w in out.splitlines())
    d = json.loads((tmp_path / "ab.json").read_text())
    assert d["machine_warning"].startswith("arm B was measured while other processes used 0.90")
    assert d["B"]["machine"]["disturbed_runs"] == 2 and d["A"]["machine"]["disturbed_runs"] == 0


def test_an_ab_on_a_quiet_machine_warns_of_nothing(monkeypatch, tmp_path):
    ab_blocks(monkeypatch, {"A": [QUIET, machine(0.1)], "B": [machine(0.2), QUIET]})
    code, out = cli(*AB, "--json", str(tmp_path / "ab.json"))
    assert code == 0 and "DISTURBED" not in out.replace("0 of 2 blocks DISTURBED", "")
    assert "warning: arm" not in out and "machine: DISTURBED" not in out
    assert json.loads((tmp_path / "ab.json").read_text())["machine_warning"] is None


def test_the_pure_functions_say_unknown_quiet_and_disturbed_apart():
    assert is_disturbed({"disturbance": BUSY}) is True
    assert is_disturbed({"disturbance": QUIET}) is False
    assert is_disturbed({}) is None and is_disturbed({"disturbance": machine(2.0,
                                                                          measured_s=0.1)}) is None
    assert disturbed_mark({"disturbance": QUIET}) is None
    assert badge_label(sampled({"disturbance": BUSY})) == (
        "DISTURBED · other processes 1.30 of 2 cores (quiet ≤ 0.4)")
    assert badge_label(pooled([{"disturbance": BUSY}, {"disturbance": QUIET}])) == (
        "DISTURBED · 1 of 2 blocks · other processes 0.67 of 2 cores (quiet ≤ 0.4)")
    steal = unequal_disturbance({"A": [{"disturbance": machine(0.03, steal_cores_mean=0.5)}],
                                 "B": [{"disturbance": QUIET}]}, noun="arm")
    assert steal is not None and steal.startswith(
        "arm A was measured while the hypervisor took 0.50 of 2 cores (CPU steal)")
    assert unequal_disturbance({"A": [{"disturbance": QUIET}], "B": [{}]}) is None


# ---- the dashboard -------------------------------------------------------------------------
def page(path: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page(path).run()
    assert not at.exception
    return at


def badges(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if "-badge[" in m.value]


def test_compare_runs_shows_the_badge_and_the_unequal_warning(history, monkeypatch):
    db, ids = history
    monkeypatch.setenv("LATENCY_LAB_DB", str(db))
    at = page("views/compare_runs.py")
    assert at.multiselect(key="cmp_runs").value == [ids["quiet"], ids["busy"]]  # A quiet, B busy
    table = at.dataframe[0].value.set_index("id")
    assert table.loc[ids["busy"], "machine"] == "DISTURBED"
    assert table.loc[ids["quiet"], "machine"] == "quiet"
    assert table.loc[ids["old"], "machine"] == ""  # no samples: no mark
    assert badges(at) == [":orange-badge[:material/warning: B DISTURBED · other processes "
                          "1.30 of 2 cores (quiet ≤ 0.4)]"]
    warning = next(w.value for w in at.warning if "**Machine:**" in w.value)
    assert "B was measured while other processes used 1.30 of 2 cores, A 0.03" in warning
    # two quiet runs: no badge, no warning
    at.multiselect(key="cmp_runs").set_value([ids["old"], ids["quiet"]]).run()
    assert not at.exception and badges(at) == []
    assert not any("**Machine:**" in w.value for w in at.warning)


@contextlib.contextmanager
def hogs(n: int = 2):
    """CPU hogs beside the run: on a 2-core machine, all of it."""
    procs = [subprocess.Popen(HOG) for _ in range(n)]
    try:
        time.sleep(0.3)
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def live_run(busy: bool) -> tuple[AppTest, dict]:
    """A 2-s run from the Live Profiler's widgets (beside CPU hogs when ``busy``), finished:
    the page and the run's environment as the run process recorded it."""
    from ui.server import run_manager

    at = page("views/live_profiler.py")
    at.sidebar.number_input(key="pre_ms").set_value(1.0)
    at.sidebar.number_input(key="fwd_ms").set_value(1.0)
    at.sidebar.number_input(key="post_ms").set_value(0.5)
    at.sidebar.slider(key="duration").set_value(2)
    with hogs() if busy else contextlib.nullcontext():
        next(b for b in at.button if b.label == "Start").click().run()
        rid = at.session_state["watch"]
        rerun_until(at, lambda at: any("Validity" in w.value for w in
                                       [*at.success, *at.warning, *at.error]), timeout=120)
    return at, run_manager().get(rid).result().environment


def test_the_live_profiler_badges_a_run_only_when_its_machine_was_busy():
    """Without hogs, on whatever this machine is doing: the badge is there exactly when the
    run's own samples say DISTURBED (a quiet run shows none)."""
    at, env = live_run(busy=False)
    assert bool(badges(at)) == bool(is_disturbed(env)), (badges(at), env.get("disturbance"))
    if not is_disturbed(env):
        assert any("**Validity:** VALID (" in s.value for s in at.success)


def test_the_live_profiler_badges_a_run_measured_beside_cpu_hogs():
    at, env = live_run(busy=True)
    assert is_disturbed(env), env.get("disturbance")
    validity = next(w.value for w in at.warning if "**Validity:**" in w.value)
    assert "VALID but DISTURBED: other processes used" in validity
    shown = badges(at)
    assert len(shown) == 1 and "DISTURBED · other processes" in shown[0], shown
    other = env["disturbance"]["other_cores_mean"]
    assert f"{other:.2f} of {env['disturbance']['cores']} cores" in shown[0]


def test_the_lab_badges_arms_measured_beside_cpu_hogs():
    at = page("views/optimisation_lab.py")
    at.sidebar.selectbox(key="lab_model").set_value("tabular-mlp")
    at.sidebar.slider(key="lab_concurrency").set_value(2)
    at.sidebar.number_input(key="lab_block_s").set_value(0.5)
    at.sidebar.number_input(key="lab_pairs").set_value(1)
    at.sidebar.selectbox(key="lab_b_replicas").set_value(2).run()
    with hogs():
        next(b for b in at.button if b.label == "Run A/B").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        rerun_until(at, lambda at: any(s.value.startswith("Headline:") for s in at.subheader)
                    or bool(at.error), timeout=180)
    assert not at.error, [e.value for e in at.error]
    shown = badges(at)
    assert [b.split("[", 1)[1].split(" ")[1] for b in shown] == ["A", "B"], shown
    assert all("DISTURBED · 1 of 1 blocks · other processes" in b for b in shown), shown
    assert any(w.value.startswith("B: machine: DISTURBED: 1 of 1 blocks") for w in at.warning)
