"""A run result as terminal text: what the CLI prints and ``repr(result)`` shows — what ran,
how it ended, the summary's own text (``analysis.summary``: ``repr(summary)``), the machine
while it measured and the validity.

Every number goes through ``latency.core.fmt``, the same rules the dashboard uses.
"""
from __future__ import annotations

from typing import Any

from latency.analysis.summary import Summary, format_summary_block
from latency.analysis.validity import MIN_SAMPLED_S
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.describe import load_description, model_label
from latency.core.optimization import OptimizationReport


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
