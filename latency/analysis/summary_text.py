"""A summary and a run result as terminal text: what the CLI prints and what ``repr`` shows.

Every number goes through ``latency.core.fmt``, the same rules the dashboard uses.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from latency.analysis.stats import LatencyStats
from latency.analysis.transport_summary import TransportSummary
from latency.analysis.validity import MIN_SAMPLED_S
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.describe import OUR_SERVER, load_description, model_label
from latency.core.optimization import OptimizationReport
from latency.core.records import COMPONENTS, component_labels

if TYPE_CHECKING:
    from latency.analysis.summary import Summary

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


def describe_config(c: RunConfig, s: Summary | None = None) -> str:
    """'image-cnn on cpu (float32), batch ≤ 8 / 5 ms, 2 replica(s) × 1 thread(s), closed 4
    clients'; for a remote target, what was measured there: its URL and model, and the batch
    sizes its replies reported (its batching is its own, not this run's). The load is worded
    by ``load_description``, as in the history and on the dashboard."""
    load = load_description(c)
    if c.target:
        plain = c.target_protocol == "http"
        what = "a plain HTTP server" if plain else f"model {c.model} (Open Inference Protocol)"
        seen = ("; batch sizes seen in its replies: mean " + fmt.ms(s.batch_size_mean)
                if s is not None and s.batch_size_mean else "")
        return f"target {c.target}, {what}{seen}, {load}"
    return (f"{model_label(c)} on {c.device} ({c.dtype}), batch ≤ "
            f"{c.batch_size} / {c.max_batch_delay_ms or 0:g} ms, "
            f"{c.replicas} replica(s) × {c.threads} thread(s), {load}")


def format_summary(result: Any) -> str:
    """A run result for the terminal: what ran, how it ended, then its summary."""
    lines = [f"run {result.status}: {describe_config(result.config, result.summary)}"]
    if result.failure:
        lines.append(f"failure: {result.failure}")
    block = format_summary_block(result.summary, result.config.rate is not None)
    machine = machine_line(result.environment)
    return ("\n".join(lines) + "\n" + block + "\n" + (machine + "\n" if machine else "")
            + f"validity: {result.validity.line()}")


def machine_line(environment: dict[str, Any] | None) -> str | None:
    """The machine while the run measured, in one line (``environment["disturbance"]``):
    'machine while measuring: other processes 0.04 of 2 cores, this run 1.01, steal 0.00;
    preempted 312 times; not throttled; memory pressure 0.0%; sampler 0.2 ms CPU a sample
    (0.02% of a core)'. None for a result without samples."""
    d = (environment or {}).get("disturbance")
    if not isinstance(d, dict) or not d.get("measured_s"):
        return None
    target = f", the target server (pid {', '.join(map(str, d['target_pids']))}) " \
        f"{_num(d.get('target_cores_mean'))}" if d.get("target_pids") else ""
    parts = [f"other processes {_num(d.get('other_cores_mean'))} of {d.get('cores')} cores, "
             f"this run {_num(d.get('run_cores_mean'))}{target}, steal "
             f"{_num(d.get('steal_cores_mean'))}",
             _times("preempted", int(d.get("involuntary_switches") or 0))]
    if d.get("throttled_s") is not None:
        parts.append(f"throttled {int(d.get('throttled_periods') or 0):,} periods, "
                     f"{fmt.duration(float(d['throttled_s']) * 1e3)}"
                     if d.get("throttled_periods") else "not throttled")
    if d.get("memory_pressure_pct") is not None:
        parts.append(f"memory pressure {float(d['memory_pressure_pct']):.1f}%")
    if d.get("freq_mhz_min") is not None and d.get("freq_mhz_max") is not None:
        lo, hi = float(d["freq_mhz_min"]), float(d["freq_mhz_max"])
        parts.append(f"{lo:.0f} MHz" if lo == hi else f"{lo:.0f}–{hi:.0f} MHz")
    samples = int(d.get("samples") or 0)
    cpu = float(d.get("sampler_cpu_s") or 0.0)
    # its share of a core only over a span long enough to mean one (a 2 ms measurement
    # with its two samples' 1 ms of CPU read "54% of a core")
    share = (f" ({float(d.get('sampler_cpu_pct') or 0.0):.2f}% of a core)"
             if float(d.get("measured_s") or 0.0) >= MIN_SAMPLED_S else "")
    parts.append(f"sampler {samples} sample{'' if samples == 1 else 's'}, "
                 f"{fmt.duration(cpu * 1e3)} CPU{share}")
    return "machine while measuring: " + "; ".join(parts)


def _times(what: str, n: int) -> str:
    return f"{what} {n:,} time{'' if n == 1 else 's'}"


def _num(x: Any) -> str:
    return "?" if not isinstance(x, (int, float)) else f"{float(x):.2f}"


def optimization_lines(environment: dict[str, Any] | None) -> list[str]:
    """The optimisation report a result's environment carries, as terminal lines."""
    d = (environment or {}).get("optimization")
    return OptimizationReport.from_dict(d).lines() if d else []
