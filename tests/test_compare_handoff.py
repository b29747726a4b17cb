"""Compare names the first component for the runs it shows: hand-off when every run is
in-process, network when none is, both when they are mixed."""
from __future__ import annotations

from latency.core.config import RunConfig
from latency.core.records import HANDOFF, network_labels
from latency.figures.compare_plots import runs_bars_figure


def test_the_network_bar_is_named_for_the_runs_compared():
    inproc = RunConfig(model="synthetic")
    http = RunConfig(model="synthetic", transport="http")
    assert network_labels([inproc, inproc])["network"] == HANDOFF
    assert network_labels([http, http])["network"] == "network"
    assert network_labels([inproc, http])["network"] == f"network / {HANDOFF}"
    makeup = {"mean": {"network": 1.0, "queue": 2.0, "preprocess": 1.0, "forward": 3.0,
                       "postprocess": 0.5, "overhead": 0.1}}
    fig = runs_bars_figure({"A": makeup, "B": makeup}, labels=network_labels([inproc, http]))
    names = [t.name for t in fig.data if t.type == "bar"]
    assert f"network / {HANDOFF}" in names and "queue" in names
