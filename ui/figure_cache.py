"""A run's figures, built once per (run, snapshot version, SLO) and shared by every viewer, so
thirty browsers cost one build per second, not thirty. ``st.cache_resource`` rather than
``st.cache_data``: the latter unpickles a copy for every reader (~50 ms a figure); the figures
are never mutated after they are built, so sharing the object is safe."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st

from latency.figures import plots
from ui.server import run_manager


@st.cache_resource(max_entries=64, show_spinner=False)
def figures(run_id: str, version: int, slo_ms: float) -> dict[str, Any]:
    """Every chart of one snapshot version, built once and shared by all viewers."""
    handle = run_manager().get(run_id)
    if handle is None:
        return {}
    snap = handle.snapshot()
    if snap.summary is None or snap.hist_counts is None:
        return {"snapshot": snap}
    lat = snap.summary.latency_ms
    share = snap.share_within(slo_ms)
    return {
        "snapshot": snap,
        "bars": SharedFigure.of(plots.stacked_components_figure(snap.makeup_ms)),
        "histogram": SharedFigure.of(plots.latency_histogram_figure(
            snap.hist_edges_ms, snap.hist_counts,
            {"p50": lat.p50, "p95": lat.p95, "p99": lat.p99}, slo_ms, share)),
        "timeseries": SharedFigure.of(plots.timeseries_figure(
            snap.series, offered_rps=snap.config.rate)),
        "table": plots.summary_markdown(snap.summary),
        "share": share,
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


__all__ = ["SharedFigure", "figures", "placeholder"]
