"""The summary of a run: a typed value (``Summary``), its JSON form, and how it is computed.

Percentiles are over successful measured requests only (warm-up excluded, errors counted apart);
the component statistics use the same requests, so every figure refers to one population.

``Summary.to_dict()`` is the ``summary`` block of a run's JSON and of the history, key for key
as it has always been; ``Summary.from_dict`` reads it back (also from files written before the
summary was typed). ``repr(summary)`` prints what the CLI prints.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latency.analysis.findings import Finding, Verdict, findings
from latency.analysis.stats import (
    LatencyStats,
    describe_ms,
    interval_note,
)
from latency.analysis.transport_summary import TransportSummary, transport_summary
from latency.analysis.verdict import verdict
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.describe import OUR_SERVER
from latency.core.records import COMPONENTS, component_labels, component_ns, measured_and_ok

#: open-loop schedule lag p99 above this (or above half the mean gap between arrivals, if
#: larger) means the generator could not keep up. A millisecond of lag on a 2-core machine
#: is scheduling noise, not a generator falling behind.
LAG_WARN_MS = 2.0
#: open loop: served below this share of the offered rate means the server is overloaded.
OVERLOAD_SHARE = 0.9
#: the statistics of the schedule lag the summary repeats on its own (it is ``overhead``).
LAG_KEYS = ("mean", "p50", "p99", "max")


@dataclass(frozen=True)
class Summary:
    """What a run (or a snapshot of one, or a simulation) measured, in ms."""

    requests: int = 0
    successful: int = 0
    errors: int = 0
    error_rate: float = 0.0
    warmup_requests: int = 0
    warmup_latency_ms: LatencyStats = field(default_factory=lambda: LatencyStats(has_ci=False))
    duration_s: float = 0.0
    throughput_rps: float = 0.0
    latency_ms: LatencyStats = field(default_factory=LatencyStats)
    components_ms: dict[str, LatencyStats] = field(
        default_factory=lambda: {c: LatencyStats() for c in COMPONENTS})
    batch_size_mean: float | None = None
    transport: TransportSummary = field(default_factory=TransportSummary)
    error_messages: dict[str, int] = field(default_factory=dict)
    offered_rps: float | None = None
    overloaded: bool = False
    #: open loop: requests dropped by overload (never sent, or abandoned after the grace)
    dropped: int = 0
    warnings: list[Finding] = field(default_factory=list)
    verdict: Verdict = field(default_factory=lambda: Verdict(""))

    @property
    def schedule_lag_ms(self) -> dict[str, float | None]:
        """The client's lag behind its schedule: by construction the ``overhead`` component."""
        lag = self.components_ms["overhead"]
        return {k: lag.get(k) for k in LAG_KEYS}

    def component(self, name: str) -> LatencyStats:
        """``total`` or one of ``COMPONENTS``."""
        return self.latency_ms if name == "total" else self.components_ms[name]

    def findings_of(self, kind: str) -> list[Finding]:
        return [w for w in self.warnings if w.kind == kind]

    # ---- JSON ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests, "successful": self.successful, "errors": self.errors,
            "error_rate": self.error_rate, "warmup_requests": self.warmup_requests,
            "warmup_latency_ms": self.warmup_latency_ms.to_dict(),
            "duration_s": self.duration_s, "throughput_rps": self.throughput_rps,
            "latency_ms": self.latency_ms.to_dict(),
            "components_ms": {c: s.to_dict() for c, s in self.components_ms.items()},
            "schedule_lag_ms": self.schedule_lag_ms,
            "batch_size_mean": self.batch_size_mean,
            "transport": self.transport.to_dict(),
            "error_messages": dict(self.error_messages),
            "offered_rps": self.offered_rps, "overloaded": self.overloaded,
            **({"dropped": self.dropped} if self.dropped else {}),  # (files before: absent)
            "warnings": [str(w) for w in self.warnings], "verdict": str(self.verdict),
            **self._kinds_dict(),
        }

    def _kinds_dict(self) -> dict[str, list[str]]:
        """``warning_kinds``: each warning's kind, aligned with ``warnings`` (which stay plain
        sentences, as every version reads them). Added after the keys of earlier files, and
        only when a kind is not ``recorded`` — what a reader without the key takes them all
        for — so a summary loaded from an older file is written back exactly as it was."""
        kinds = [getattr(w, "kind", "recorded") for w in self.warnings]
        return {"warning_kinds": kinds} if any(k != "recorded" for k in kinds) else {}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Summary:
        """A summary as stored (a run's JSON, the history); missing keys take their empty
        values, so files from any earlier version load."""
        d = d or {}
        comps = d.get("components_ms") or {}
        return cls(
            requests=int(d.get("requests") or 0), successful=int(d.get("successful") or 0),
            errors=int(d.get("errors") or 0), error_rate=float(d.get("error_rate") or 0.0),
            warmup_requests=int(d.get("warmup_requests") or 0),
            warmup_latency_ms=LatencyStats.from_dict(d.get("warmup_latency_ms")),
            duration_s=float(d.get("duration_s") or 0.0),
            throughput_rps=float(d.get("throughput_rps") or 0.0),
            latency_ms=LatencyStats.from_dict(d.get("latency_ms")),
            components_ms={c: LatencyStats.from_dict(comps.get(c)) for c in COMPONENTS},
            batch_size_mean=d.get("batch_size_mean"),
            transport=TransportSummary.from_dict(d.get("transport")),
            error_messages=dict(d.get("error_messages") or {}),
            offered_rps=d.get("offered_rps"), overloaded=bool(d.get("overloaded")),
            dropped=int(d.get("dropped") or 0),
            warnings=_findings_with_kinds(d.get("warnings"), d.get("warning_kinds")),
            verdict=Verdict(d.get("verdict") or ""))

    def __repr__(self) -> str:
        return format_summary_block(self)


def _findings_with_kinds(texts: list[str] | None, kinds: Any) -> list[Finding]:
    """A stored summary's warnings with their kinds (``warning_kinds``); ``recorded`` for all
    of them when the file has no kinds (written before they were kept) or kinds that are not
    a list aligned with its warnings (not this summary's: its texts still say what they say)."""
    got = findings(texts)
    if not isinstance(kinds, list) or len(kinds) != len(got) or \
            not all(isinstance(k, str) and k for k in kinds):
        return got
    return [Finding(str(w), k) for w, k in zip(got, kinds)]


def summarize_rows(rows: np.ndarray, errors: dict[int, str], *, measure_start_ns: int | None,
                   measure_end_ns: int | None, config: RunConfig,
                   warnings: list[str] | None = None,
                   comps: dict[str, np.ndarray] | None = None,
                   server_counts: tuple[dict[str, int] | None, int | None] | None = None,
                   dropped: int = 0, offered: tuple[int, float] | None = None,
                   timing_unusable: dict[str, int] | None = None,
                   cpu_wait: dict[str, dict[str, float]] | None = None) -> Summary:
    """The Summary of a request log; used for results and for live snapshots alike.
    ``comps`` may pass the successful measured requests' components when already computed;
    ``server_counts`` what our HTTP server answered (responses by status, errors);
    ``dropped`` the requests dropped by overload; ``offered`` (requests due, span of their
    intended times in s) what the open-loop generator offered; ``timing_unusable`` the
    successful replies whose Server-Timing was sent but unusable, by why; ``cpu_wait`` each
    stage's wall and CPU time a call (``environment["cpu_wait"]``, for the verdict)."""
    measured, ok = measured_and_ok(rows)
    if comps is None:
        comps = component_ns(ok)
    if measure_start_ns is None:
        measure_start_ns = int(measured["t_intended"].min()) if len(measured) else 0
    if measure_end_ns is None:
        measure_end_ns = int(measured["t_done"].max()) if len(measured) else measure_start_ns
    if len(measured):
        end = max(measure_end_ns, int(measured["t_done"].max()))
    else:
        end = measure_end_ns
    duration_s = max(end - measure_start_ns, 1) / 1e9 if len(measured) else 0.0
    n_err = len(measured) - len(ok)
    warmup_rows = rows[rows["warmup"]]
    components_ms = {c: describe_ms(comps[c]) for c in COMPONENTS}
    throughput = len(ok) / duration_s if duration_s else 0.0
    error_rate = n_err / len(measured) if len(measured) else 0.0
    transport = transport_summary(ok, config, timing_unusable)
    if server_counts is not None:
        transport = transport.with_server_counts(*server_counts)
    error_counts: dict[str, int] = {}
    for i, msg in errors.items():
        if i < len(rows) and not rows["warmup"][i]:
            error_counts[msg] = error_counts.get(msg, 0) + 1
    rate = config.rate
    # overloaded: requests were dropped, or the server answered them (successfully or not)
    # markedly slower than they were offered — a server failing fast at full speed is
    # failing, not overloaded. The offered rate is the one actually sent (its count over the
    # span of intended times), so Poisson luck in a short run does not read as overload.
    overloaded = bool(rate and dropped)
    if rate and not overloaded and len(measured) >= 20 and duration_s:
        n_offered, span_s = offered if offered else (len(measured), 0.0)
        offered_rps = n_offered / span_s if offered and span_s > 0 else rate
        overloaded = len(measured) / duration_s < OVERLOAD_SHARE * offered_rps
    w = findings(warnings, "run")
    w += transport.findings()
    latency_ms = describe_ms(comps["total"])
    note = interval_note(comps["total"], latency_ms)
    if note:
        w.append(Finding(note, "too_few"))
    if overloaded:
        drop = (f", {dropped:,} dropped (never sent, or still waiting when the drain grace "
                "ended)" if dropped else "")
        w.append(Finding(f"overloaded: offered {rate:g} req/s, served {fmt.rate(throughput)}"
                         f"{drop}; the queue grows for as long as the run lasts, so latencies "
                         "depend on the run length — add replicas or batching, or lower the "
                         "rate", "overloaded"))
    lag99 = components_ms["overhead"].p99
    lag_limit = max(LAG_WARN_MS, 500.0 / rate) if rate else LAG_WARN_MS
    if rate and lag99 is not None and lag99 > lag_limit:
        w.append(Finding(f"the load generator fell behind its schedule (schedule lag p99 "
                         f"{fmt.ms(lag99)} ms > {lag_limit:.2g} ms): the client machine is "
                         "short of CPU; latencies still start at the intended send times",
                         "schedule_lag"))
    if n_err:
        w.append(Finding(f"{n_err} of {len(measured)} requests failed ({error_rate:.1%}); "
                         "percentiles are over successful requests only", "errors"))
    means = {c: s.mean for c, s in components_ms.items()}
    return Summary(
        requests=int(len(measured)), successful=int(len(ok)), errors=n_err,
        error_rate=error_rate, warmup_requests=int(len(warmup_rows)),
        warmup_latency_ms=describe_ms(component_ns(warmup_rows)["total"], with_ci=False),
        duration_s=duration_s, throughput_rps=throughput,
        latency_ms=latency_ms, components_ms=components_ms,
        batch_size_mean=(float(ok["batch_size"].mean())
                         if len(ok) and ok["batch_size"].any() else None),
        transport=transport,
        error_messages=dict(sorted(error_counts.items(), key=lambda kv: -kv[1])[:10]),
        offered_rps=rate, overloaded=overloaded, dropped=dropped, warnings=w,
        verdict=verdict(int(len(ok)), n_err, means, overloaded, rate, throughput, config,
                        split_unavailable=transport.decomposition == "client-only",
                        split_unusable=transport.unusable_count > 0,
                        dropped=dropped, cpu_wait=cpu_wait))


def summarize(result: Any) -> Summary:
    """Summary of a RunResult."""
    t = result.timings
    counts = (t.server_responses, t.server_errors) if t.server_counted else None
    return summarize_rows(result.log, result.errors,
                          measure_start_ns=t.measure_start_ns, measure_end_ns=t.measure_end_ns,
                          config=result.config, warnings=result.warnings,
                          server_counts=counts, dropped=int(t.dropped_overload or 0),
                          offered=(int(t.offered_requests), float(t.offered_span_s or 0.0))
                          if t.offered_requests else None,
                          timing_unusable=t.server_timing_unusable,
                          cpu_wait=(result.environment or {}).get("cpu_wait"))


# ---- the summary as text (what ``repr`` and the CLI print) -------------------------------
#: width of one number column of the latency table.
COLUMN = 9


def format_table(s: Summary) -> str:
    """The latency table (total and each component, mean to max) of a summary, in ms."""
    keys = LatencyStats.KEYS
    head = f"{'ms':<12}" + "".join(f"{k:>{COLUMN}}" for k in keys)
    lines = [head, "-" * len(head)]
    names = component_labels(not s.transport.is_http)  # in-process: "hand-off", not network
    for name in ("total", *COMPONENTS):
        stats = s.component(name)
        lines.append(f"{names.get(name, name):<12}" + "".join(f"{fmt.ms(stats.get(k)):>{COLUMN}}"
                                             for k in keys))
    return "\n".join(lines)


def transport_lines(t: TransportSummary) -> list[str]:
    """Terminal lines describing an HTTP run's transport (none in-process)."""
    if not t.is_http:
        return []
    where = (f"target {t.target}" if t.target else "our server (own process, 127.0.0.1)"
             if t.server in (None, OUR_SERVER) else t.server)
    req, resp = t.request_bytes or {}, t.response_bytes or {}
    size = (f"request {req['mean']:.0f} B, response {resp['mean']:.0f} B (mean)"
            if req.get("mean") is not None else "no successful requests")
    lines = [f"transport: HTTP, Open Inference Protocol ({t.payload} payload) to {where}; "
             f"{size}; server time from "
             + ("Server-Timing" if t.decomposition == "server-timing" else
                "nowhere (its Server-Timing was unusable: client time only)"
                if t.timing_unusable_everywhere else "nowhere (client time only)")]
    wan = t.emulated_wan
    if wan:
        bw = (f"{wan.bandwidth_mbps:g} Mbit/s" if wan.bandwidth_mbps is not None
              else "unlimited bandwidth")
        lines.append(f"EMULATED WAN (added by the client, not a real network): RTT "
                     f"{wan.rtt_ms:g} ms, jitter ≤ {wan.jitter_ms:g} ms, {bw}; emulated "
                     f"delay p50 {fmt.ms(wan.emulated_delay_ms.p50)} ms, real network p50 "
                     f"{fmt.ms(wan.network_without_emulation_ms.p50)} ms")
    return lines


def format_summary_block(s: Summary, open_loop: bool | None = None) -> str:
    """The numbers of a summary: counts, the latency table, the p99 interval, the schedule lag
    (open loop), errors, warnings and the verdict."""
    lines = transport_lines(s.transport)
    lines.append(f"requests {s.requests} (+{s.warmup_requests} warm-up), errors "
                 f"{s.errors} ({s.error_rate:.1%}), {s.duration_s:.2f} s, throughput "
                 f"{fmt.rate(s.throughput_rps)} req/s, mean batch {fmt.ms(s.batch_size_mean)}")
    lines += ["", format_table(s)]
    ci = s.latency_ms.p99_ci95
    lines.append("")
    lines.append("p99 95% CI: " + (f"[{fmt.ms(ci[0])}, {fmt.ms(ci[1])}] ms" if ci else
                                   "not available (too few requests)"))
    if open_loop if open_loop is not None else s.offered_rps is not None:
        lag = s.schedule_lag_ms
        lines.append(f"schedule lag: p50 {fmt.ms(lag['p50'])} ms, p99 {fmt.ms(lag['p99'])} ms")
    for msg, n in s.error_messages.items():
        lines.append(f"error ×{n}: {msg}")
    for w in s.warnings:
        lines.append(f"warning: {w}")
    lines.append(f"verdict: {s.verdict}")
    return "\n".join(lines)
