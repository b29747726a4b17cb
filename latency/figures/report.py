"""A report you can send: one self-contained HTML file of a run or a sweep.

The file carries everything it shows — the run's text as the command line printed it (the
summary, the split, the verdict, the machine line, the validity), its charts, and its
settings — and plotly.js itself, inline, so it opens offline, from a mail attachment or an
archive years later, with no server and no network (a link to a CDN would not). The charts
are the dashboard's own figures (``latency.figures``), interactive as there.
"""
from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from latency.core.records import component_labels, in_process


@dataclass(frozen=True)
class Section:
    """One heading with what it shows: a text as printed, a figure, or a table of settings."""

    heading: str
    text: str | None = None
    figure: go.Figure | None = None
    rows: Sequence[tuple[str, str]] = ()
    caption: str | None = None


@dataclass(frozen=True)
class Report:
    title: str
    #: the one line under the title (what was measured, and its validity)
    subtitle: str
    #: the sentence a reader wants first (the verdict, or a sweep's answer)
    headline: str | None
    sections: list[Section] = field(default_factory=list)


def report_html(report: Report) -> str:
    """The whole file: plotly.js inline once, then each section."""
    from plotly.offline import get_plotlyjs

    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = [f"<h1>{_e(report.title)}</h1>", f"<p class='sub'>{_e(report.subtitle)}</p>"]
    if report.headline:
        body.append(f"<p class='headline'>{_e(report.headline)}</p>")
    for i, s in enumerate(report.sections):
        body.append(f"<section><h2>{_e(s.heading)}</h2>")
        if s.caption:
            body.append(f"<p class='caption'>{_e(s.caption)}</p>")
        if s.figure is not None:
            body.append(pio.to_html(s.figure, full_html=False, include_plotlyjs=False,
                                    div_id=f"figure-{i}",
                                    config={"displaylogo": False, "responsive": True}))
        if s.text is not None:
            body.append(f"<pre>{_e(s.text)}</pre>")
        if s.rows:
            body.append("<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>"
                                             for k, v in s.rows) + "</table>")
        body.append("</section>")
    body.append(f"<footer>Latency Lab report, written {made}; self-contained (plotly.js "
                "inline): it opens without a network.</footer>")
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{_e(report.title)}</title><style>{_STYLE}</style>"
            f"<script>{get_plotlyjs()}</script></head>\n<body>\n" + "\n".join(body)
            + "\n</body></html>\n")


def run_report(result: Any, text: str, run_id: str | None = None,
               name: str | None = None) -> Report:
    """A finished run of either kind (``MeasuredRun``) with ``text``: what the command line
    printed of it (``repr(result)`` and the lines after it); ``run_id`` and ``name``: what
    the history calls it."""
    v = result.validity
    subtitle = (("VALID but DISTURBED" if v.disturbed else "VALID") if v.valid else "INVALID")
    verdict = next((ln[len("verdict: "):] for ln in text.splitlines()
                    if ln.startswith("verdict: ")), None)
    title = ("Latency Lab run" + (f" {run_id}" if run_id else "")
             + (f" “{name}”" if name else ""))
    charts = (_generation_sections(result) if result.kind == "generation"
              else _one_shot_sections(result))
    return Report(title, f"{text.splitlines()[0] if text else result.status} — {subtitle}",
                  verdict, [*charts, Section("The run, as the command line printed it",
                                             text=text), _settings(result.config)])


def stored_report_html(run: Any) -> bytes:
    """The report of a run of the history (a ``StoredRun`` loaded with its rows), as ``run
    --html`` wrote it when it ran (its text: what ``history show`` prints)."""
    return report_html(run_report(run.result, repr(run.result), run.info.id,
                                  run.info.name)).encode()


def sweep_report(result: Any) -> Report:
    """A finished sweep (``SweepResult``): its curves, and its table, notes and answer as the
    command line prints them (its ``repr``)."""
    from latency.figures.sweep_plots import (
        sweep_goodput_figure,
        sweep_itl_e2e_figure,
        sweep_rate_figure,
    )

    base = result.plan.base
    slo = base.objectives
    what = base.target or base.model
    return Report(
        f"Latency Lab sweep {result.sweep_id}", f"{what}: {len(result.points)} point(s) in "
        f"{result.elapsed_s:.0f} s; objectives {slo or 'none'}",
        f"the highest load meeting them: {result.answer.sentence(str(slo) or 'no objective')}",
        [Section("TTFT and TPOT against the load", figure=sweep_rate_figure(result),
                 caption="Measured points solid; the simulator's prediction beside each, "
                         "dashed grey; the objectives dashed red."),
         Section("Served and goodput against the load", figure=sweep_goodput_figure(result)),
         Section("ITL and E2E against the load", figure=sweep_itl_e2e_figure(result)),
         Section("The sweep, as the command line printed it", text=repr(result)),
         _settings(base, "The settings every point shares")])


def _one_shot_sections(result: Any) -> list[Section]:
    from latency.analysis.snapshot import build_snapshot
    from latency.figures import plots

    snap = build_snapshot("", 0, result.status, "done", result.config, result.log,
                          result.errors, {}, measure_start_ns=result.timings.measure_start_ns,
                          measure_end_ns=result.timings.measure_end_ns)
    s = snap.summary
    if s is None or snap.hist_counts is None:
        return []
    lat = s.latency_ms
    return [
        Section("What a request is made of", figure=plots.stacked_components_figure(
            snap.makeup_ms, labels=component_labels(in_process(result.config))),
            caption="The mean request, and the requests around p50, p90 and p99, by part."),
        Section("Total latency", figure=plots.latency_histogram_figure(
            snap.hist_edges_ms, snap.hist_counts, {"p50": lat.p50, "p95": lat.p95,
                                                   "p99": lat.p99})),
        Section("Over the run", figure=plots.timeseries_figure(
            snap.series, offered_rps=result.config.rate)),
        Section("Every percentile", figure=plots.percentile_spectrum_figure(
            {"this run": snap.quantiles_ms}))]


def _generation_sections(result: Any) -> list[Section]:
    from latency.analysis.gen_view import view_of
    from latency.figures import gen_plots

    c = result.config
    slo = c.objectives
    view = view_of(result)
    return [
        Section("Time to first token, by part", figure=gen_plots.ttft_bars_figure(view),
                caption="Each bar: the requests around it. A part the server reported, one "
                        "derived from it and one the client measured are named as such in "
                        "the text below."),
        Section("Time to first token", figure=gen_plots.ttft_histogram_figure(
            view, slo.ttft_ms)),
        Section("A gap between tokens, by part", figure=gen_plots.gap_bars_figure(view)),
        Section("Gaps between tokens", figure=gen_plots.itl_histogram_figure(
            view, slo.tpot_ms)),
        Section("The last requests", figure=gen_plots.waterfall_figure(view.waterfall),
                caption="A row a request: waiting, prefill, decoding; a tick per token, in "
                        "red each stall."),
        *(_target_sections(result) if result.is_target else [
            Section("The scheduler over the run",
                    figure=gen_plots.scheduler_figure(view))])]


def _target_sections(result: Any) -> list[Section]:
    """A server of yours: its account of each request, and its /metrics over the run."""
    from latency.figures.target_plots import server_metrics_figure, split_bars_figure

    view = result.target_view
    if view is None:
        return []
    how = ("Each part says where it came from: reported by the server, derived from what it "
           "reported and the client's times, measured by the client.")
    return [Section("Time to first token, by the server's account", caption=how,
                    figure=split_bars_figure(view.split, "ttft")),
            Section("The whole request, by the server's account",
                    figure=split_bars_figure(view.split, "e2e")),
            Section("Its /metrics over the run, beside the client's requests in flight",
                    figure=server_metrics_figure(
                        (result.environment or {}).get("server_metrics"), result.rows,
                        result.timings.measure_start_ns))]


def _settings(config: Any, heading: str = "The settings") -> Section:
    rows = [(k, v if isinstance(v, str) else json.dumps(v, default=str))
            for k, v in config.to_dict().items() if v not in (None, {}, [], "")]
    return Section(heading, rows=rows)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#1d1d1f}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.6em}
.sub{color:#555;margin-top:0}.caption{color:#555;font-size:.9em}
.headline{background:#f3f6fb;border-left:4px solid #1f77b4;padding:.6em .9em}
pre{background:#f7f7f7;padding:1em;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px;line-height:1.35}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#fafafa;font-weight:600}
footer{margin-top:3em;color:#777;font-size:.85em}
"""


__all__ = ["Report", "Section", "report_html", "run_report", "stored_report_html",
           "sweep_report"]
