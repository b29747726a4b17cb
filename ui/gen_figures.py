"""A generation's figures as the dashboard lays them out, the same on the Live Profiler and
the Load Simulator: what TTFT and a gap are made of, their histograms, the waterfall of the
last requests and the scheduler over time (``latency.figures.gen_plots``, from a ``GenView``)."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st

from latency.analysis.gen_summary import GenSummary
from latency.analysis.gen_view import GenView
from latency.core import fmt
from latency.figures import gen_plots
from latency.simulation.gen_capacity import GenPoint
from ui.figure_cache import SharedFigure

WATERFALL_CAPTION = (
    "A row a request: waiting for a slot, prefill, then decoding; a tick per token "
    "delivered, and in red each stall — the stream standing still while another request's "
    "prefill holds the step, as long as it lasted. A whole prompt's prefill draws one long "
    "red bar through every running stream; turn on chunked prefill with a small step budget "
    "(*Max tokens per step*, vLLM's max_num_batched_tokens) and it becomes many short ones.")


OUTSIDE_WATERFALL_CAPTION = (
    "A row a request, as your server's account places it on the client's clock: waiting, "
    "prefill, then decoding, a tick per token delivered. Where the server gives no account "
    "of each token (llama.cpp and vLLM report a request's totals), a row starts at its first "
    "token, and its wait is in the TTFT bars above and the split below.")


def headline_metrics(s: GenSummary, label: str = "") -> None:
    """TTFT p50 and p99, TPOT p99, the share meeting the targets, output tokens/s (``label``
    after the first: "(simulated)")."""
    _metric_row(label, s.ttft_ms.p50, s.ttft_ms.p99, s.tpot_ms.p99, s.slo_met_share,
                s.output_tokens_per_s)


def point_metrics(p: GenPoint, label: str) -> None:
    """The same row for a simulated point (the calibrated prediction)."""
    _metric_row(label, p.ttft_p50_ms, p.ttft_p99_ms, p.tpot_p99_ms, p.met_share,
                p.tokens_per_s)


def _metric_row(label: str, ttft_p50: float | None, ttft_p99: float | None,
                tpot_p99: float | None, met_share: float | None, tokens_per_s: float) -> None:
    m = st.columns(5)
    m[0].metric(f"TTFT p50{label}", fmt.duration(ttft_p50))
    m[1].metric("TTFT p99", fmt.duration(ttft_p99))
    m[2].metric("TPOT p99", fmt.duration(tpot_p99))
    m[3].metric("meeting the targets",
                f"{met_share:.1%}" if met_share is not None else fmt.DASH)
    m[4].metric("output tokens/s", f"{tokens_per_s:,.0f}")


def built_figures(view: GenView, ttft_target_ms: float | None,
                  tpot_target_ms: float | None) -> dict[str, go.Figure]:
    """The six figures of ``view``, by name."""
    return {"ttft_bars": gen_plots.ttft_bars_figure(view),
            "ttft_hist": gen_plots.ttft_histogram_figure(view, ttft_target_ms),
            "gap_bars": gen_plots.gap_bars_figure(view),
            "itl_hist": gen_plots.itl_histogram_figure(view, tpot_target_ms),
            "waterfall": gen_plots.waterfall_figure(view.waterfall),
            "scheduler": gen_plots.scheduler_figure(view)}


@st.cache_resource(max_entries=32, show_spinner=False)
def _shared(run_id: str, version: int, ttft_target_ms: float | None,
            tpot_target_ms: float | None, _view: GenView) -> dict[str, go.Figure]:
    """A live run's figures, built once per (run, snapshot version, targets) and shared by
    every viewer (``ui.figure_cache``'s rule: thirty followers cost one build, not thirty;
    ``_view`` is not hashed — one version of a run is one view)."""
    return {k: SharedFigure.of(f) for k, f in
            built_figures(_view, ttft_target_ms, tpot_target_ms).items()}


def generation_figures(view: GenView, ttft_target_ms: float | None,
                       tpot_target_ms: float | None, key: str,
                       shared: tuple[str, int] | None = None, outside: bool = False) -> None:
    """Every figure of ``view``; ``key``: the charts' key prefix (one set per page);
    ``shared``: a live run's (id, snapshot version) — its figures are then built once for
    every viewer of that version; ``outside``: a server of yours, measured from outside (no
    scheduler steps of ours: no scheduler chart)."""
    figs = (_shared(*shared, ttft_target_ms, tpot_target_ms, view) if shared is not None
            else built_figures(view, ttft_target_ms, tpot_target_ms))
    left, right = st.columns(2)
    with left:
        st.caption("Time to first token, by part (each bar: the requests around it).")
        st.plotly_chart(figs["ttft_bars"], key=f"{key}ttft_bars")
        st.plotly_chart(figs["ttft_hist"], key=f"{key}ttft_hist")
    with right:
        st.caption("A gap between tokens, by part (stall: another request's prefill held "
                   "the step).")
        st.plotly_chart(figs["gap_bars"], key=f"{key}gap_bars")
        st.plotly_chart(figs["itl_hist"], key=f"{key}itl_hist")
    st.subheader("The last requests, step by step")
    st.caption(OUTSIDE_WATERFALL_CAPTION if outside else WATERFALL_CAPTION)
    st.plotly_chart(figs["waterfall"], key=f"{key}waterfall")
    if not outside:  # a server of yours schedules itself: no steps of ours to draw
        st.subheader("The scheduler over time")
        st.plotly_chart(figs["scheduler"], key=f"{key}scheduler")


def target_figures(view: Any, series: dict[str, Any] | None, rows: Any,
                   start_ns: int | None) -> None:
    """A run against a server of yours, live or finished: its split by the server's own
    account (``view``: a ``TargetView``), each part labelled by where it came from, and its
    /metrics (``series``) beside the client's own requests in flight (from ``rows``)."""
    from latency.figures.target_plots import server_metrics_figure, split_bars_figure

    if view is None:
        return
    st.subheader("Your server's account of each request")
    st.caption("Each part says where it came from: **reported** by the server (its own "
               "timings), **derived** from what it reported and the client's times, "
               "**measured** by the client (the network: the round-trip floor).")
    left, right = st.columns(2)
    with left:
        st.plotly_chart(split_bars_figure(view.split, "ttft"), key="glivefig_split_ttft")
    with right:
        st.plotly_chart(split_bars_figure(view.split, "e2e"), key="glivefig_split_e2e")
    st.text("\n".join(view.lines()))
    st.caption("Its /metrics over the run (each scrape), and the client's requests in flight "
               "at the same moments.")
    st.plotly_chart(server_metrics_figure(series, rows, start_ns),
                    key="glivefig_server_metrics")
