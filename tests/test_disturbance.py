"""The machine during a run: the disturbance sampler (``latency.host.disturbance``) and its
verdict (the ``machine`` finding and the ``quiet machine`` check, ``latency.analysis.validity``).

- readings parsed by hand (cgroup ``cpu.stat`` v1/v2, PSI, the cgroup of a process) from
  crafted files;
- the sampler is bounded (at most ``max_samples`` points, covering the whole span), stops, and
  measures its own cost;
- the verdict from crafted samples, deterministic: quiet, disturbed (VALID but DISTURBED: it
  never makes a run INVALID by itself), required (``require_quiet``: INVALID), and the JSON and
  the history keep it;
- real runs: beside CPU hogs a run is DISTURBED and its finding names other processes' CPU;
  ``--require-quiet`` exits 1; on a quiet machine a run is not DISTURBED (``timing``: the
  machine must be quiet for that, and a shared one rarely is — skipped when it is not).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from latency.analysis.findings import Finding
from latency.analysis.result import RunResult
from latency.analysis.summary_text import format_summary, machine_line
from latency.analysis.validity import (
    QUIET_MACHINE,
    machine_finding,
    machine_reasons,
    max_other_cores,
    quiet_machine,
    validity,
)
from latency.core.config import RunConfig
from latency.host import disturbance as dist
from latency.host.cores import usable_cores
from latency.host.disturbance import (
    DisturbanceSampler,
    Interval,
    cgroup_cpu_stats,
    parse_cpu_stat,
    parse_psi,
)

HOG = [sys.executable, "-c", "while True: pass"]
#: the quiet limit on this machine (cores of other processes)
LIMIT = max_other_cores(usable_cores())
FAST = ["--model", "synthetic", "--model-arg", "preprocess_ms=1", "--model-arg",
        "forward_ms=1", "--model-arg", "postprocess_ms=0.5"]


def samples(**over):
    """A crafted ``environment["disturbance"]``: a quiet 2-core machine unless overridden."""
    d = {"period_s": 1.0, "samples": 11, "cores": 2, "measured_s": 10.0,
         "other_cores_mean": 0.03, "other_cores_max": 0.08, "run_cores_mean": 1.0,
         "steal_cores_mean": 0.0, "involuntary_switches": 120, "throttled_periods": 0,
         "throttled_s": 0.0, "memory_pressure_pct": 0.0, "cpu_pressure_pct": 1.0,
         "freq_mhz_min": 2300.0, "freq_mhz_max": 2300.0, "sampler_cpu_s": 0.002,
         "sampler_cpu_pct": 0.02, "series": {"t_s": [1.0], "other_cores": [0.03]}}
    d.update(over)
    return {"disturbance": d}


BUSY = samples(other_cores_mean=1.3, other_cores_max=1.9, involuntary_switches=4100)


# ---- readings parsed by hand ---------------------------------------------------------------
def test_cpu_stat_of_cgroup_v2_and_v1_and_psi_parse():
    v2 = parse_cpu_stat("usage_usec 100\nnr_periods 50\nnr_throttled 7\nthrottled_usec 2500\n")
    assert v2 == {"usage_usec": 100, "nr_periods": 50, "nr_throttled": 7, "throttled_usec": 2500}
    v1 = parse_cpu_stat("nr_periods 3\nnr_throttled 2\nthrottled_time 4000000\nbad line x\n")
    assert v1["throttled_time"] == 4_000_000 and "bad" not in v1
    psi = parse_psi("some avg10=1.00 avg60=0.50 avg300=0.10 total=1500000\n"
                    "full avg10=0.00 avg60=0.00 avg300=0.00 total=250000\n")
    assert psi == {"some": 1.5, "full": 0.25}


def _fake_proc(tmp_path: Path, cgroup: str, mountinfo: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "self" / "mountinfo").write_text(mountinfo)
    return proc


def test_the_cgroup_and_its_ancestors_are_found_v2_and_v1(tmp_path):
    fs = tmp_path / "cg"
    (fs / "unified" / "job" / "run").mkdir(parents=True)
    (fs / "cpu" / "job").mkdir(parents=True)
    for f, text in ((fs / "unified" / "job" / "run" / "cpu.stat",
                     "nr_periods 10\nnr_throttled 4\nthrottled_usec 30000\n"),
                    (fs / "unified" / "cpu.stat", "usage_usec 5\n"),
                    (fs / "cpu" / "job" / "cpu.stat",
                     "nr_periods 9\nnr_throttled 3\nthrottled_time 20000000\n")):
        f.write_text(text)
    proc = _fake_proc(tmp_path, "2:cpu,cpuacct:/job\n1:memory:/m\n0::/job/run\n",
                      f"31 23 0:28 / {fs / 'unified'} rw - cgroup2 cgroup2 rw\n"
                      f"32 31 0:29 / {fs / 'cpu'} rw - cgroup cgroup rw,cpu,cpuacct\n")
    found = cgroup_cpu_stats(proc)
    assert [c.version for c in found] == [2, 2, 1]  # own cgroup, the root; v1 after v2
    assert found[0].path == fs / "unified" / "job" / "run" / "cpu.stat"
    assert found[0].read() == (4, 0.03)
    assert found[1].read() is None  # no cpu controller there: no throttling counted
    assert found[2].read() == (3, 0.02)  # v1: throttled_time in ns


def test_a_cgroup_namespace_root_is_the_mount_root(tmp_path):
    fs = tmp_path / "cg2"
    fs.mkdir()
    (fs / "cpu.stat").write_text("nr_periods 1\nnr_throttled 1\nthrottled_usec 5\n")
    proc = _fake_proc(tmp_path, "0::/\n",
                      f"40 30 0:30 /kubepods/pod1 {fs} rw - cgroup2 cgroup2 rw\n")
    assert [c.path for c in cgroup_cpu_stats(proc)] == [fs / "cpu.stat"]
    assert cgroup_cpu_stats(tmp_path / "nowhere") == []


def test_involuntary_switches_count_every_thread_and_children_are_listed():
    import os

    here = dist.involuntary_switches_of(os.getpid())
    assert here is not None and here >= 0
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        kids = dist.children_of(os.getpid())
        if kids is None:
            pytest.skip("this kernel does not list children (CONFIG_PROC_CHILDREN)")
        assert child.pid in kids
    finally:
        child.kill()
        child.wait()


# ---- the sampler ---------------------------------------------------------------------------
def test_the_sampler_is_bounded_covers_its_span_and_measures_itself():
    s = DisturbanceSampler(period_s=0.01, max_samples=8).start()
    time.sleep(0.4)
    d = s.stop()
    series = d["series"]
    assert 2 <= len(series["t_s"]) <= 8, series["t_s"]  # ~40 intervals, halved to ≤ 8
    assert len({len(v) for v in series.values()}) == 1  # columns of equal length
    assert series["t_s"][-1] == pytest.approx(d["measured_s"], abs=0.02)  # the whole span
    assert d["samples"] >= 20 and d["sampler_cpu_s"] > 0
    assert d["sampler_cpu_pct"] < 50  # at 100 samples a second; at one a second ≪ 1 %
    for key in ("other_cores_mean", "run_cores_mean", "steal_cores_mean",
                "involuntary_switches", "cores"):
        assert d[key] is not None and d[key] >= 0
    assert not any(t.name == "disturbance" for t in threading.enumerate())


def test_merging_halves_the_series_and_keeps_the_totals():
    s = DisturbanceSampler(max_samples=4)
    for k in range(1, 11):  # ten 1-s intervals, 0.5 other core each, 100 switches each
        s._add(Interval(float(k), 1.0, 1.0, 0.0, 0.5, 0.0, 100, 0, 0.0, 0.0, None, 2000.0))
    iv = s._intervals + ([s._pending] if s._pending else [])
    assert len(iv) <= 4
    assert sum(i.dt for i in iv) == pytest.approx(10.0)
    assert sum(i.involuntary for i in iv) == 1000
    assert iv[-1].t_end == 10.0
    assert all(c == pytest.approx(0.5) for c in dist.series_of(iv)["other_cores"])


def test_a_sampler_that_cannot_read_never_breaks_the_run(monkeypatch):
    s = DisturbanceSampler()
    monkeypatch.setattr(s, "_reading", lambda: (_ for _ in ()).throw(OSError("no /proc")))
    s.start()
    d = s.stop()
    assert d["measured_s"] == 0.0 and "no /proc" in d["error"]
    assert quiet_machine({"disturbance": d}).passed  # not checked, not DISTURBED


# ---- the verdict, from crafted samples (deterministic) -------------------------------------
def test_a_quiet_machine_passes_and_says_so():
    check = quiet_machine(samples())
    assert check.passed and check.advisory and "0.03 of 2 cores (≤ 0.4)" in check.detail
    assert machine_reasons(samples()["disturbance"]) == [] and machine_finding(samples()) is None


def test_a_busy_machine_is_disturbed_with_numbers_but_stays_valid():
    finding = machine_finding(BUSY)
    assert isinstance(finding, Finding) and finding.kind == "machine"
    assert "other processes used 1.3 of 2 cores on average during the measurement" in finding
    assert "(quiet: ≤ 0.4)" in finding
    assert "up to 1.9 in one second" in finding and "preempted 4,100 times" in finding
    assert "expect times inflated" in finding
    check = quiet_machine(BUSY)
    assert not check.passed and check.advisory and check.detail.startswith("DISTURBED: ")
    assert "--require-quiet" in check.detail and "stop other work" in check.detail


def test_each_kind_of_disturbance_has_its_reason():
    assert "CPU steal" in machine_reasons(samples(steal_cores_mean=0.3)["disturbance"])[0]
    throttled = machine_reasons(samples(throttled_periods=120, throttled_s=0.5)["disturbance"])
    assert "throttled this run in 120 periods" in throttled[0] and "(5% of" in throttled[0]
    assert "memory" in machine_reasons(samples(memory_pressure_pct=25.0)["disturbance"])[0]
    at_limit = samples(other_cores_mean=max_other_cores(2))["disturbance"]
    assert machine_reasons(at_limit) == []  # the limit itself is still quiet
    assert machine_reasons(samples(measured_s=0.05, other_cores_mean=2.0)["disturbance"]) == []


def test_without_samples_the_machine_is_not_checked():
    for env in ({}, None, {"disturbance": "junk"}, {"disturbance": {"measured_s": None}}):
        check = quiet_machine(env)
        assert check.passed and check.detail.startswith("not checked")


def _result(env, **config) -> RunResult:
    from latency.core.records import RECORD_DTYPE

    rows = np.zeros(30, dtype=RECORD_DTYPE)
    t = np.arange(30, dtype=np.int64) * 1_000_000
    for i, name in enumerate(("intended", "sent", "received", "pre_start", "pre_end",
                              "fwd_start", "fwd_end", "post_start", "post_end", "done")):
        rows[f"t_{name}"] = t + i * 100_000
    rows["batch_size"] = 1
    from latency.analysis.timings import Timings

    return RunResult(config=RunConfig(model="synthetic", requests=30, warmup=0,
                                      **config).checked(),
                     environment=env, status="completed", log=rows,
                     timings=Timings(measure_start_ns=0, measure_end_ns=int(t[-1]) + 10**6),
                     warnings=[w for w in [machine_finding(env)] if w is not None])


def test_disturbed_is_a_mark_of_its_own_in_the_line_and_the_json():
    r = _result(BUSY)
    v = r.validity
    assert v.valid and v.disturbed and not v.failed
    assert [c.name for c in v.advisories] == [QUIET_MACHINE]
    assert v.line().startswith("VALID but DISTURBED: other processes used 1.3 of 2 cores")
    assert "every request accounted for)" in v.line()
    d = json.loads(r.json_text(requests=False))
    assert d["validity"]["valid"] is True and d["validity"]["disturbed"] is True
    check = next(c for c in d["validity"]["checks"] if c["name"] == QUIET_MACHINE)
    assert check == {"name": QUIET_MACHINE, "passed": False, "detail": check["detail"],
                     "advisory": True}
    assert d["environment"]["disturbance"]["other_cores_mean"] == 1.3
    assert "machine" in d["summary"]["warning_kinds"]
    text = format_summary(r)
    assert "warning: machine: other processes used 1.3 of 2 cores" in text
    assert "validity: VALID but DISTURBED" in text
    assert "machine while measuring: other processes 1.30 of 2 cores" in text
    assert "sampler 11 samples" in text
    quiet = _result(samples())
    assert quiet.validity.valid and not quiet.validity.disturbed
    assert quiet.validity.line().startswith("VALID (") and "quiet machine" in \
        quiet.validity.line()
    assert json.loads(quiet.json_text(requests=False))["validity"]["disturbed"] is False


def test_require_quiet_makes_a_disturbed_run_invalid():
    r = _result(BUSY, require_quiet=True)
    assert not r.validity.valid and r.validity.disturbed
    assert r.validity.line().startswith("INVALID: DISTURBED (--require-quiet): other processes")
    assert _result(samples(), require_quiet=True).validity.valid
    assert _result({}, require_quiet=True).validity.valid  # nothing measured: not checked
    with pytest.raises(Exception, match="require_quiet"):
        RunConfig(require_quiet="yes").checked()  # type: ignore[arg-type]


def test_an_invalid_and_disturbed_run_says_both():
    s = _result(BUSY).summary
    import dataclasses

    broken = dataclasses.replace(s, successful=0)
    v = validity(broken, RunConfig(requests=30, warmup=0).checked(), "completed", None, BUSY)
    assert not v.valid and v.disturbed
    assert v.line().startswith("INVALID: no successful requests") and "; DISTURBED: " in v.line()


def test_the_json_and_the_history_read_the_mark_back(tmp_path):
    from latency.storage.store import RunStore

    r = _result(BUSY)
    back = RunResult.from_dict(json.loads(r.json_text()))
    assert back.validity.disturbed and back.validity.valid
    assert [w.kind for w in back.summary.warnings] == [w.kind for w in r.summary.warnings]
    store = RunStore(tmp_path / "h.sqlite")
    run_id = store.save(r, name="busy")
    stored = store.load(run_id)
    assert stored.result is not None and stored.result.validity.disturbed
    assert "machine" in [w.kind for w in stored.summary.warnings]
    assert stored.environment["disturbance"]["involuntary_switches"] == 4100


def test_the_machine_line_is_absent_without_samples():
    assert machine_line({}) is None and machine_line({"disturbance": {"measured_s": 0}}) is None
    line = machine_line(samples(freq_mhz_min=1800.0, freq_mhz_max=2300.0))
    assert line is not None and "1800–2300 MHz" in line and "not throttled" in line


# ---- real runs -----------------------------------------------------------------------------
def _hogs(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen(HOG) for _ in range(n)]


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def test_a_run_beside_cpu_hogs_is_disturbed_and_require_quiet_exits_1(tmp_path, capsys):
    from latency.cli.main import main

    hogs = _hogs(2)  # two cores' worth: on a 2-core machine, all of it
    try:
        time.sleep(0.3)
        code = main(["run", *FAST, "--duration", "1.5", "--warmup", "10", "--no-save",
                     "--require-quiet", "--json", str(tmp_path / "r.json")])
    finally:
        _stop(hogs)
    out = capsys.readouterr().out
    d = json.loads((tmp_path / "r.json").read_text())
    machine = d["environment"]["disturbance"]
    assert machine["other_cores_mean"] > max_other_cores(machine["cores"]), machine
    assert machine["samples"] >= 2 and len(machine["series"]["t_s"]) >= 1
    assert d["validity"]["disturbed"] is True and d["validity"]["valid"] is False
    assert code == 1, out
    assert "validity: INVALID: DISTURBED (--require-quiet): other processes used" in out
    finding = next(w for w, k in zip(d["summary"]["warnings"], d["summary"]["warning_kinds"])
                   if k == "machine")
    assert finding.startswith("machine: other processes used")
    other = float(finding.split("used ")[1].split(" of")[0])
    assert other > LIMIT
    assert machine["sampler_cpu_pct"] < 1.0  # its own cost, measured: ≪ 1 % of a core


def test_a_disturbed_run_without_require_quiet_exits_0(capsys):
    from latency.cli.main import main

    hogs = _hogs(2)
    try:
        time.sleep(0.3)
        code = main(["run", *FAST, "--duration", "1", "--warmup", "10", "--no-save"])
    finally:
        _stop(hogs)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "validity: VALID but DISTURBED: other processes used" in out
    assert "warning: machine: other processes used" in out


def _machine_is_quiet_now(seconds: float = 1.0) -> float:
    s = DisturbanceSampler().start()
    time.sleep(seconds)
    return float(s.stop().get("other_cores_mean") or 0.0)


@pytest.mark.timing
def test_a_run_on_a_quiet_machine_is_not_disturbed():
    from latency.execution.engine import execute

    busy = _machine_is_quiet_now()
    if busy > LIMIT / 3:
        pytest.skip(f"the machine is not quiet now (other processes use {busy:.2f} cores): "
                    "a quiet run cannot be shown here")
    r = execute(RunConfig(model="synthetic", model_args={"preprocess_ms": 1, "forward_ms": 1,
                                                         "postprocess_ms": 0.5},
                          duration_s=1.5, warmup=10))
    d = r.environment["disturbance"]
    assert not r.validity.disturbed, d
    assert r.validity.valid and r.summary.findings_of("machine") == []
    assert d["other_cores_mean"] <= LIMIT and d["run_cores_mean"] > 0


def test_the_runs_own_child_processes_count_as_the_run_not_as_others():
    import psutil

    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    time.sleep(0.1)
    started = time.time()  # the run begins: a process started before it is not the run's
    s = DisturbanceSampler(period_s=0.2, run_started=started).start()
    child = subprocess.Popen(HOG)  # started by the run (as our HTTP server would be)
    try:
        time.sleep(1.5)
        t = psutil.Process(child.pid).cpu_times()
        child_cpu = t.user + t.system
    finally:
        d = s.stop()
        _stop([child, before])
    own = d["run_cores_mean"] * d["measured_s"]  # CPU seconds the sampler gave the run
    assert own >= 0.8 * child_cpu, (own, child_cpu, d)  # the child's spinning is the run's
    assert s._tree.known.get(before.pid, "unseen") is None  # listed, and not the run's
