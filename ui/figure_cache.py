"""A run's figures, built once per (run, snapshot version, SLO) and shared by every viewer, so
thirty browsers cost one build per second, not thirty. ``st.cache_resource`` rather than
``st.cache_data``: the latter unpickles a copy for every reader (~50 ms a figure); the figures
are never mutated after they are built, so sharing the object is safe.

The page takes one snapshot per render and hands it in: the cache is keyed by that snapshot's
own version and built from it, so every number and chart of a render is of one version (the
key was the handle's version, read before the build took a possibly newer snapshot)."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st

from latency.analysis.snapshot import Snapshot
from latency.core import fmt
from latency.core.records import component_labels, in_process
from latency.figures import plots


def has_charts(snap: Snapshot) -> bool:
    """Whether a snapshot holds measured requests to chart (before that: placeholders)."""
    return snap.summary is not None and snap.hist_counts is not None


def figures(snap: Snapshot, slo_ms: float) -> dict[str, Any]:
    """Every chart and number of ``snap`` the page shows, built once per (run, version, SLO)
    and shared by all viewers."""
    return _built(snap.run_id, snap.version, float(slo_ms), snap)


@st.cache_resource(max_entries=64, show_spinner=False)
def _built(run_id: str, version: int, slo_ms: float, _snap: Snapshot) -> dict[str, Any]:
    """``figures``' cache: the key is the snapshot's (run, version), its content that snapshot
    (``_snap`` is not hashed: one version of a run is one snapshot)."""
    snap = _snap
    if not has_charts(snap):
        return {"snapshot": snap}
    s = snap.summary
    assert s is not None and snap.hist_counts is not None
    lat = s.latency_ms
    share = snap.share_within(slo_ms)
    names = component_labels(in_process(snap.config))  # in-process: the hand-off
    return {
        "snapshot": snap,
        "bars": SharedFigure.of(plots.stacked_components_figure(snap.makeup_ms,
                                                                labels=names)),
        "histogram": SharedFigure.of(plots.latency_histogram_figure(
            snap.hist_edges_ms, snap.hist_counts,
            {"p50": lat.p50, "p95": lat.p95, "p99": lat.p99}, slo_ms, share)),
        "timeseries": SharedFigure.of(plots.timeseries_figure(
            snap.series, offered_rps=snap.config.rate)),
        "table": plots.summary_markdown(s, names),
        "share": share,
        # the metric row, as text: the page only places it (right beside the charts it agrees
        # with, no work in between)
        "metrics": [("throughput (req/s)", f"{s.throughput_rps:,.0f}"),
                    ("p50", fmt.duration(lat.p50)), ("p99", fmt.duration(lat.p99)),
                    (f"within SLO {slo_ms:g} ms", f"{share:.1%}" if share is not None
                     else fmt.DASH),
                    ("errors", f"{s.errors}")],
    }


@st.cache_resource(max_entries=8, show_spinner=False)
def placeholder(message: str, height: int | None = None) -> SharedFigure:
    """An empty chart saying what it waits for, built once for every page that shows it."""
    kwargs = {} if height is None else {"height": height}
    return SharedFigure.of(plots.empty_figure(message=message, **kwargs))


class SharedFigure(go.Figure):
    """A figure shown to every viewer: its dict form is computed once, not once per viewer.

    ``st.plotly_chart`` calls ``to_dict()`` (a deep copy and array encoding) on every render;
    with thirty browsers refreshing every second that was the server's largest cost. The
    figure is never mutated after it is built, so the dict is computed once and reused.
    """

    @classmethod
    def of(cls, fig: go.Figure) -> SharedFigure:
        """The same figure object, now shared. Not ``SharedFigure(fig)``: that copies the
        figure through Plotly's validators, template included — ~24 ms a chart, three charts
        a snapshot version, once a second for every run being watched."""
        fig.__class__ = cls
        return fig  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        cached = self.__dict__.get("_shared_dict")
        if cached is None:
            cached = super().to_dict()
            self.__dict__["_shared_dict"] = cached
        return cached


__all__ = ["SharedFigure", "figures", "has_charts", "placeholder"]
