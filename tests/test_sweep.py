"""``python -m latency sweep``: a floor, a ceiling and points between, each a run saved in the
history; the highest load meeting the objectives read off the measured points with its
neighbours; the simulator's prediction beside every point; bounded in time; bad input one line.
The answer's rule is tested on points built by hand; the sweep itself on synthetic-lm (its
costs known) in process and on our own server as a server of yours (``--target``)."""
from __future__ import annotations

import dataclasses
import html
import json
import re

import pytest

from latency.analysis.sweep import SweepPoint, highest_meeting
from tests.cli_support import cli_here


def point(rate: float, met: float | None, label: str | None = None) -> SweepPoint:
    return SweepPoint(label=label or f"rate {rate}", load="rate", value=rate, run_id=None,
                      valid=True, requests=100, offered_rps=rate, served_rps=rate,
                      ttft_p50_ms=10.0, ttft_p99_ms=50.0, tpot_p50_ms=5.0, tpot_p99_ms=9.0,
                      itl_p99_ms=12.0, e2e_p50_ms=100.0, e2e_p99_ms=200.0,
                      ttft_p99_ci=(40.0, 60.0), tpot_p99_ci=None, goodput_rps=rate,
                      met_share=met)


def test_the_highest_load_meeting_the_objectives_is_read_off_the_measured_points():
    """The last of the points, from the lightest, that all meet the attainment — a point
    meeting it above one that misses is noise, not capacity — with the first miss beside."""
    pts = [point(8, 0.80), point(2, 0.99), point(4, 0.95), point(10, 0.93)]
    a = highest_meeting(pts, 0.9)
    assert a.best.rate == 4 and a.miss.rate == 8
    text = a.sentence("TTFT ≤ 500 ms")
    assert "4.00 requests/s" in text and "8.00 requests/s" in text and "lies between" in text
    assert "[40.0, 60.0]" in text  # the p99's interval, where the run had one
    assert highest_meeting(pts[1:3], 0.9).miss is None  # all met: at least that
    assert "at least" in highest_meeting(pts[1:3], 0.9).sentence("x")
    none = highest_meeting([point(2, 0.5), point(4, 0.4)], 0.9)
    assert none.best is None and "none" in none.sentence("x")
    shaky = dataclasses.replace(point(6, 0.97), valid=False)  # too few requests, say
    assert highest_meeting([point(2, 0.99), shaky, point(8, 0.5)], 0.9).best.rate == 2
    floor = dataclasses.replace(point(3, 1.0, "1 client"), load="clients", value=1,
                                offered_rps=None)  # a closed loop: a reference, not a load
    assert highest_meeting([floor, point(2, 0.5)], 0.9).best is None
    assert highest_meeting([floor], 0.9).best is floor  # a sweep of client counts only
    unjudged = highest_meeting([point(2, None)], 0.9)
    assert not unjudged.judged and "no objective" in unjudged.sentence("x")


def test_a_sweep_measures_floor_ceiling_and_rates_and_saves_each_point(tmp_path):
    """synthetic-lm (4 slots): the floor's one client, the ceiling's 8, two rates between;
    each point a run in the history named after the sweep; the answer a point that meets the
    objectives, the next heavier one missing them or none; the simulator beside each point;
    the JSON the same points."""
    from latency.storage.store import RunStore

    db, out, page = tmp_path / "h.sqlite", tmp_path / "sweep.json", tmp_path / "sweep.html"
    r = cli_here("sweep", "--model", "synthetic-lm", "--max-running", "4",
                 "--prompt-tokens", "uniform:16:200", "--output-tokens", "uniform:8:32",
                 "--model-arg", "step_ms=4", "--rates", "6,60", "--point-duration", "3",
                 "--slo-ttft-ms", "150", "--slo-tpot-ms", "15", "--max-duration", "120",
                 "--warmup", "2", "--db", str(db), "--json", str(out), "--html", str(page))
    assert r.returncode == 0, r.stderr + r.stdout
    d = json.loads(out.read_text())
    labels = [p["label"] for p in d["points"]]
    assert labels[:2] == ["1 client", "8 clients"], labels
    assert "rate 6.00/s" in labels
    runs = {info.id: info for info in RunStore(db).list()}
    for p in d["points"]:
        assert p["run_id"] in runs and (runs[p["run_id"]].name or "").startswith(
            f"sweep-{d['sweep_id']} "), (p, runs.get(p["run_id"]))
    # the light rate served what it was offered; the ceiling served more than the floor
    floor, ceiling = d["points"][0], d["points"][1]
    assert ceiling["served_rps"] > 1.5 * floor["served_rps"], (floor, ceiling)
    assert d["fit"] and d["fit"].startswith("fitted from the floor's and the ceiling's runs"), \
        d["fit"]
    assert sum(q is not None for q in d["predicted"]) >= 2, d["predicted"]
    # the answer agrees with the points it names
    met = [p for p in d["points"] if (p["met_share"] or 0) >= 0.9]
    if met:
        assert "requests/s" in d["answer"] and not d["answer"].startswith("none")
    for line in ("answer: ", "sim", f"history --search sweep-{d['sweep_id']}"):
        assert line in r.stdout, r.stdout
    # the report: both curves, the simulator's beside the measured, the answer first, the
    # table as printed
    report = page.read_text()
    assert len(re.findall(r'<div id="figure-\d+" class="plotly-graph-div"', report)) == 3
    rates_predicted = any(q is not None for p, q in zip(d["points"], d["predicted"])
                          if p["load"] == "rate")
    assert ("TTFT p99 simulated" in report) == rates_predicted, d["predicted"]
    assert f"Latency Lab sweep {d['sweep_id']}" in report
    assert html.escape(d["answer"], quote=True) in report
    assert html.escape(r.stdout.split("answer: ")[0].strip().splitlines()[-1]) in report


def test_a_sweep_is_bounded_by_its_max_duration(tmp_path):
    """A point that would not fit what is left of --max-duration is not started, and the
    output says which."""
    r = cli_here("sweep", "--model", "synthetic-lm", "--rates", "2", "--point-duration", "6",
                 "--max-duration", "10", "--no-simulate", "--warmup", "1",
                 "--db", str(tmp_path / "h.sqlite"))
    assert r.returncode == 0, r.stderr + r.stdout
    assert "not run: 16 clients" in r.stdout and "would not fit" in r.stdout, r.stdout
    assert "not run: rate 2.00/s" in r.stdout, r.stdout


@pytest.mark.parametrize("args, says", [
    (["--model", "synthetic-lm", "--rate", "4"], "a sweep sets each point's load"),
    (["--model", "synthetic"], "sweep measures streamed generation"),
    (["--model", "synthetic-lm", "--rates", "4", "--concurrencies", "2"], "choose one kind"),
    (["--model", "synthetic-lm", "--max-duration", "1"], "--max-duration must be"),
    (["--model", "synthetic-lm", "--points", "0"], "--points must be"),
    (["--model", "synthetic-lm", "--turns", "3"], "--turns needs closed loops"),
])
def test_bad_sweep_settings_are_one_line_and_exit_2(tmp_path, args, says):
    r = cli_here("sweep", *args, "--db", str(tmp_path / "h.sqlite"))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and says in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_a_sweep_of_a_server_of_yours_fits_the_simulator_from_outside(tmp_path):
    """Our own server standing in for yours (``--target``): the points are measured from
    outside, and the simulator beside them is fitted from outside too."""
    from latency.core.config import RunConfig
    from latency.serve.http_server import ServerProcess

    server = RunConfig(model="synthetic-lm", max_running=4,
                       model_args={"step_ms": 3.0, "prefill_ms": 1.0})
    proc = ServerProcess(server.checked()).start()
    try:
        out = tmp_path / "sweep.json"
        r = cli_here("sweep", "--target", f"{proc.url}/v1", "--api", "completions",
                     "--tokenizer", "server", "--scrape-metrics",
                     "--prompt-tokens", "uniform:16:120", "--output-tokens", "16",
                     "--rates", "8", "--point-duration", "4", "--ceiling-clients", "6",
                     "--slo-ttft-ms", "300", "--slo-tpot-ms", "30", "--max-duration", "90",
                     "--warmup", "2", "--db", str(tmp_path / "h.sqlite"), "--json", str(out))
    finally:
        proc.stop()
    assert r.returncode == 0, r.stderr + r.stdout
    d = json.loads(out.read_text())
    assert [p["label"] for p in d["points"]] == ["1 client", "6 clients", "rate 8.00/s"]
    assert all(p["requests"] >= 10 for p in d["points"]), d["points"]
    assert d["fit"], d


def test_the_same_sweep_from_python(tmp_path):
    """``latency.sweep``: the command's sweep, its result a value — points, the simulator
    beside them, the answer."""
    import latency

    result = latency.sweep("synthetic-lm", rates=[5], point_s=3, max_duration_s=90,
                           max_running=4, warmup=2, slo_ttft_ms=150, slo_tpot_ms=15,
                           prompt_tokens="uniform:16:120", output_tokens="12",
                           db=tmp_path / "h.sqlite")
    assert [p.label for p in result.points] == ["1 client", "8 clients", "rate 5.00/s"]
    assert len(result.predicted) == 3 and result.fit
    assert result.answer.judged and "requests/s" in result.answer.sentence("x")
    assert result.to_dict()["kind"] == "sweep"
    # it prints what the command prints, and writes the same report
    assert repr(result).startswith("point ") and "\nanswer: " in repr(result)
    page = latency.report(result, tmp_path / "sweep.html")
    assert len(re.findall(r'<div id="figure-\d+" class="plotly-graph-div"',
                          page.read_text())) == 3
    with pytest.raises(latency.ConfigError, match="unknown setting"):
        latency.sweep("synthetic-lm", no_such_setting=1, db=tmp_path / "h.sqlite")
