"""The summary of a run: the JSON ``summary`` block, and its human-readable text form.

Percentiles are over successful measured requests only (warm-up excluded, errors counted apart);
the component statistics use the same requests, so every figure refers to one population.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from latency.components import COMPONENTS, component_ns, measured_and_ok
from latency.stats import PERCENTILES, describe_ms
from latency.transport.report import transport_lines, transport_summary, transport_warnings
from latency.verdict import verdict

#: open-loop schedule lag p99 above this (or above half the mean gap between arrivals, if
#: larger) means the generator could not keep up. A millisecond of lag on a 2-core machine
#: is scheduling noise, not a generator falling behind.
LAG_WARN_MS = 2.0
#: open loop: served below this share of the offered rate means the server is overloaded.
OVERLOAD_SHARE = 0.9
#: below this many successful requests a p99 has no confidence interval worth the name.
MIN_FOR_P99 = 370


def summarize_rows(rows: np.ndarray, errors: dict[int, str], *, measure_start_ns: int | None,
                   measure_end_ns: int | None, config: dict[str, Any],
                   warnings: list[str] | None = None,
                   comps: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Summary dict (ms) of a request log; used for results and for live snapshots alike.
    ``comps`` may pass the successful measured requests' components when already computed."""
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
    # overhead is, by construction, the schedule lag (intended → actual send): one statistic
    components_ms = {c: describe_ms(comps[c]) for c in COMPONENTS}
    out: dict[str, Any] = {
        "requests": int(len(measured)),
        "successful": int(len(ok)),
        "errors": n_err,
        "error_rate": n_err / len(measured) if len(measured) else 0.0,
        "warmup_requests": int(len(warmup_rows)),
        "warmup_latency_ms": describe_ms(component_ns(warmup_rows)["total"], with_ci=False),
        "duration_s": duration_s,
        "throughput_rps": len(ok) / duration_s if duration_s else 0.0,
        "latency_ms": describe_ms(comps["total"]),
        "components_ms": components_ms,
        "schedule_lag_ms": {k: v for k, v in components_ms["overhead"].items()
                            if k in ("mean", "p50", "p99", "max")},
        "batch_size_mean": (float(ok["batch_size"].mean())
                            if len(ok) and ok["batch_size"].any() else None),
    }
    out["transport"] = transport_summary(ok, config)
    error_counts: dict[str, int] = {}
    for i, msg in errors.items():
        if i < len(rows) and not rows["warmup"][i]:
            error_counts[msg] = error_counts.get(msg, 0) + 1
    out["error_messages"] = dict(sorted(error_counts.items(), key=lambda kv: -kv[1])[:10])
    w = list(warnings or [])
    w += transport_warnings(out["transport"])
    if len(ok) < MIN_FOR_P99:
        w.append(f"only {len(ok)} successful requests: too few for a p99 confidence interval "
                 f"(need ≥ {MIN_FOR_P99}); run longer for a trustworthy tail")
    rate = config.get("rate")
    out["offered_rps"] = rate
    out["overloaded"] = bool(rate and len(measured) >= 20
                             and out["throughput_rps"] < OVERLOAD_SHARE * rate)
    if out["overloaded"]:
        w.append(f"overloaded: {rate:g} req/s offered but only {out['throughput_rps']:.1f} "
                 "served; the queue grows for as long as the run lasts, so latencies depend "
                 "on the run length — add replicas or batching, or lower the rate")
    lag99 = out["schedule_lag_ms"].get("p99")
    lag_limit = max(LAG_WARN_MS, 500.0 / rate) if rate else LAG_WARN_MS
    if rate and lag99 is not None and lag99 > lag_limit:
        w.append(f"the load generator fell behind its schedule (schedule lag p99 "
                 f"{lag99:.2f} ms > {lag_limit:.2g} ms): the client machine is short of CPU; "
                 "latencies still start at the intended send times")
    if n_err:
        w.append(f"{n_err} of {len(measured)} requests failed ({out['error_rate']:.1%}); "
                 "percentiles are over successful requests only")
    out["warnings"] = w
    out["verdict"] = verdict(out, config)
    return out


def summarize(result: Any) -> dict[str, Any]:
    """Summary of a RunResult."""
    out = summarize_rows(result.log, result.errors,
                         measure_start_ns=result.timings.get("measure_start_ns"),
                         measure_end_ns=result.timings.get("measure_end_ns"),
                         config=result.config, warnings=result.warnings)
    if "server_responses" in result.timings:  # HTTP: what the server answered, by status
        out["transport"]["server_responses"] = result.timings["server_responses"]
        out["transport"]["server_errors"] = result.timings.get("server_errors")
    return out


def _fmt(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 100 else f"{v:.1f}"


def format_table(s: dict[str, Any]) -> str:
    """The latency table (total and each component, mean to max) of a summary, in ms."""
    keys = ["mean"] + list(PERCENTILES) + ["max"]
    head = f"{'ms':<12}" + "".join(f"{k:>9}" for k in keys)
    lines = [head, "-" * len(head)]
    rowsrc = [("total", s["latency_ms"])] + [(k, s["components_ms"][k]) for k in COMPONENTS]
    for name, d in rowsrc:
        lines.append(f"{name:<12}" + "".join(f"{_fmt(d[k]):>9}" for k in keys))
    return "\n".join(lines)


def format_summary(result: Any) -> str:
    """A short human summary for the terminal."""
    s = result.summary
    c = result.config
    load = (f"open loop {c['arrival']} {c['rate']:g} req/s" if c.get("rate") is not None
            else f"closed loop, {c['concurrency']} client(s)")
    lines = [
        f"run {result.status}: {c['model']} on {c['device']} ({c['dtype']}), batch ≤ "
        f"{c['batch_size']} / {c['max_batch_delay_ms']:g} ms, {c['replicas']} replica(s) × "
        f"{c['threads']} thread(s), {load}",
    ]
    lines += transport_lines(s)
    if result.failure:
        lines.append(f"failure: {result.failure}")
    lines.append(f"requests {s['requests']} (+{s['warmup_requests']} warm-up), errors "
                 f"{s['errors']} ({s['error_rate']:.1%}), {s['duration_s']:.2f} s, throughput "
                 f"{s['throughput_rps']:.1f} req/s, mean batch {_fmt(s['batch_size_mean'])}")
    lines += ["", format_table(s)]
    ci = s["latency_ms"].get("p99_ci95")
    lines.append("")
    lines.append("p99 95% CI: " + (f"[{_fmt(ci[0])}, {_fmt(ci[1])}] ms" if ci else
                                   "not available (too few requests)"))
    if c.get("rate") is not None:
        lag = s["schedule_lag_ms"]
        lines.append(f"schedule lag: p50 {_fmt(lag['p50'])} ms, p99 {_fmt(lag['p99'])} ms")
    for msg, n in s["error_messages"].items():
        lines.append(f"error ×{n}: {msg}")
    for w in s["warnings"]:
        lines.append(f"warning: {w}")
    lines.append(f"verdict: {s['verdict']}")
    return "\n".join(lines)
