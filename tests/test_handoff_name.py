"""In-process runs have no network (issue 27, item 5): their first component is the thread
hand-off, and what a person reads calls it so — the CLI's table and verdict, the dashboard's
bars and table, the lessons' charts — while the data keep the name ``network`` (the JSON, the
history, old run files), and an HTTP run's network stays "network"."""
from __future__ import annotations

import json

from latency.analysis.summary import Summary
from latency.analysis.verdict import verdict
from latency.core.config import RunConfig
from latency.core.records import COMPONENTS, HANDOFF, component_labels, in_process
from latency.figures import course_plots, plots
from latency.figures.lab_plots import ab_bars_figure

MEANS = {"network": 6.0, "queue": 1.0, "preprocess": 2.0, "forward": 1.0, "postprocess": 0.5,
         "overhead": 0.0}
MAKEUP = {p: dict(MEANS) for p in ("mean", "p50", "p90", "p99")}


def test_a_cli_runs_table_says_hand_off_and_its_json_keeps_network(tmp_path, monkeypatch,
                                                                    capsys):
    """The CLI in this process (``latency.cli.main``): the same commands and output as
    ``python -m latency``, without three fresh interpreters' imports."""
    from latency.cli.main import main

    out_json = tmp_path / "run.json"
    monkeypatch.setenv("LATENCY_LAB_DB", str(tmp_path / "runs.sqlite"))
    code = main(["run", "--requests", "60", "--warmup", "3", "--json", str(out_json)])
    out = capsys.readouterr()
    assert code == 0, out.err
    rows = [line.split()[0] for line in out.out.splitlines() if line[:1].isalpha()]
    assert HANDOFF in rows and "network" not in rows
    d = json.loads(out_json.read_text())
    assert set(d["summary"]["components_ms"]) == set(COMPONENTS)  # the data: "network"
    # the file reads back the same, as old ones do: its summary shows the hand-off
    code = main(["history", "show", "latest"])
    shown = capsys.readouterr()
    assert code == 0 and f"\n{HANDOFF} " in shown.out, shown.err
    # the Chrome trace names its spans as the table does
    trace_file = tmp_path / "run.trace.json"
    code = main(["history", "export", "latest", "--format", "trace", "--out", str(trace_file)])
    assert code == 0, capsys.readouterr().err
    spans = {e["name"] for e in json.loads(trace_file.read_text())["traceEvents"]
             if e.get("cat") == "component"}
    assert HANDOFF in spans and "network" not in spans and "forward" in spans


def test_the_verdict_names_the_hand_off_in_process_and_the_network_over_http():
    local = RunConfig(model="synthetic").checked()
    http = RunConfig(model="synthetic", transport="http").checked()
    assert in_process(local) and not in_process(http)
    v = verdict(100, 0, MEANS, False, None, 100.0, local)
    assert v.startswith(f"{HANDOFF} dominates") and "no network is involved" in v
    assert v.top == "network"  # the kind the history stores
    v = verdict(100, 0, MEANS, False, None, 100.0, http)
    assert v.startswith("network dominates") and "shrink payloads" in v


def test_figures_and_tables_name_the_hand_off_where_there_is_no_network():
    names = {tr.name for tr in plots.stacked_components_figure(
        MAKEUP, labels=component_labels(True)).data}
    assert HANDOFF in names and "network" not in names
    assert "network" in {tr.name for tr in plots.stacked_components_figure(MAKEUP).data}
    ab = {tr.name for tr in ab_bars_figure(MAKEUP, MAKEUP, names=component_labels(True)).data}
    assert HANDOFF in ab and "network" not in ab
    where = course_plots.answer_figure("where", [{"run": "one client"}], MEANS,
                                       labels=component_labels(True))
    assert HANDOFF in list(where.data[0].x)
    old = {"latency_ms": {"mean": 10.6}, "components_ms": {c: {"mean": m}
                                                            for c, m in MEANS.items()}}
    summary = Summary.from_dict(old)
    rows = plots.summary_rows(summary, component_labels(True))
    assert [r["component"] for r in rows][1] == HANDOFF
    assert f"| {HANDOFF} |" in plots.summary_markdown(summary, component_labels(True))
    assert [r["component"] for r in plots.summary_rows(summary)][1] == "network"


def test_the_live_profilers_figures_name_the_hand_off_of_an_in_process_run():
    from latency.execution.process import RunHandle
    from ui.figure_cache import figures as page_figures

    handle = RunHandle(RunConfig(model="synthetic", requests=40, warmup=2)).start()
    handle.wait(120)
    figures = page_figures(handle.snapshot(), 50.0)
    assert HANDOFF in {tr.name for tr in figures["bars"].data}
    assert f"| {HANDOFF} |" in figures["table"]
