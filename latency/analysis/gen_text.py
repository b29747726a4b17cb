"""A generation run as terminal text: what the CLI prints and what ``repr`` shows.

Every number goes through ``latency.core.fmt``. The component table's rows are the parts of
E2E (mean per request); the TTFT and ITL lines below it give each one's make-up at the mean
and at p99, whose parts sum to the figure they explain.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from latency.analysis.gen_summary import GenSummary
from latency.analysis.gen_turns import turn_lines
from latency.analysis.gen_verdict import part_label
from latency.analysis.server_metrics import measured_window, server_metric_line
from latency.analysis.stats import LatencyStats
from latency.analysis.summary import COLUMN
from latency.analysis.summary_text import machine_line
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.describe import load_description, model_label
from latency.core.gen_records import GEN_COMPONENTS
from latency.core.lengths import shared_prefix_of
from latency.core.records import in_process


def describe_generation(c: RunConfig) -> str:
    """'synthetic-lm on cpu (float32), closed 4 clients; prompts 256 tokens, outputs 64;
    continuous batching, 8 slots, 2,048 tokens a step, whole-prompt prefill' (a --target:
    'my-model at http://host:8000/v1 (chat), closed 4 clients; …')."""
    prompts = f"prompts from {c.prompts}" if c.prompts else (
        f"prompts {c.prompt_tokens} tokens" if c.prompt_tokens else "sample prompts")
    if c.shared_prefix:
        heads, tokens = shared_prefix_of(c.shared_prefix)
        prompts += f" after {heads} shared prefix{'es' if heads > 1 else ''} of {tokens} tokens"
    outputs = ("outputs as long as the conversations' replies" if c.reply_lengths
               else f"outputs {c.output_tokens} tokens")
    if c.turns > 1:
        prompts = f"chat sessions of {c.turns} turns, each new message {prompts}"
    if c.target is not None:
        counted = "tokens counted by its tokenizer" if c.tokenizer else "a chunk a token"
        return (f"{c.model} at {c.target} ({c.api or 'chat'}), {load_description(c)}; "
                f"{prompts}, {outputs}; {counted}")
    prefill = (f"chunked prefill ≤ {c.chunked_prefill:,}" if c.chunked_prefill
               else "whole-prompt prefill")
    kv = f", KV {c.kv_tokens:,} tokens" if c.kv_tokens else ""
    reps = f", {c.replicas} replicas" if (c.replicas or 1) > 1 else ""
    return (f"{model_label(c)} on {c.device} ({c.dtype}), {load_description(c)}; {prompts}, "
            f"{outputs}; {c.batching} batching, {c.max_running} slots, "
            f"{c.max_step_tokens:,} tokens a step, {prefill}{kv}{reps}")


def _row(label: str, stats: LatencyStats) -> str:
    return f"{label:<14}" + "".join(f"{fmt.ms(stats.get(k)):>{COLUMN}}" for k in LatencyStats.KEYS)


def _parts(parts: dict[str, float], no_network: bool) -> str:
    total = sum(parts.values())
    if total <= 0:
        return "—"
    shown = [(k, v) for k, v in parts.items() if v / total >= 0.005]
    return ", ".join(f"{part_label(k, no_network)} {fmt.ms(v)} ({fmt.share(v / total)})"
                     for k, v in sorted(shown, key=lambda kv: -kv[1]))


def format_generation_block(s: GenSummary, config: RunConfig,
                            target_lines: list[str] | None = None) -> str:
    """The numbers: counts, the metrics table, the components, make-ups, throughput,
    goodput, the scheduler, errors. ``target_lines``: a --target run's server split and
    gaps, shown instead of the components (the client sees a target's requests whole)."""
    no_net = in_process(config)
    lines = [f"requests {s.requests} (+{s.warmup_requests} warm-up), errors {s.errors} "
             f"({s.error_rate:.1%}), {s.duration_s:.2f} s; prompt {s.prompt_tokens_mean:.0f} "
             f"tokens, output {s.output_tokens_mean:.0f} tokens (mean)", ""]
    head = f"{'ms':<14}" + "".join(f"{k:>{COLUMN}}" for k in LatencyStats.KEYS)
    lines += [head, "-" * len(head), _row("TTFT", s.ttft_ms), _row("TTFT from send",
                                                                  s.ttft_sent_ms),
              _row("TPOT", s.tpot_ms), _row("ITL", s.itl_ms), _row("E2E", s.e2e_ms), ""]
    if target_lines is not None:
        lines += target_lines
    else:
        lines.append("E2E by component (each a request's own; they sum to its E2E):")
        lines.append(head)
        for c in GEN_COMPONENTS:
            if c in s.components_ms:
                lines.append(_row(part_label(c, no_net), s.components_ms[c]))
        lines.append("")
        lines.append(f"TTFT mean {fmt.ms(s.ttft_ms.mean)} ms = "
                     f"{_parts(s.ttft_mean_parts_ms, no_net)}")
        lines.append(f"TTFT p99 {fmt.ms(s.ttft_ms.p99)} ms = "
                     f"{_parts(s.ttft_p99_parts_ms, no_net)}")
        lines.append(f"ITL mean {fmt.ms(s.itl_ms.mean)} ms = "
                     f"{_parts(s.itl_mean_parts_ms, no_net)}")
        lines.append(f"ITL p99 {fmt.ms(s.itl_ms.p99)} ms = "
                     f"{_parts(s.itl_p99_parts_ms, no_net)}")
    rate = s.request_tokens_per_s
    prefilled = "" if target_lines is not None else \
        f", {s.prefill_tokens_per_s:,.0f} prompt tokens/s prefilled"
    lines.append(f"throughput: {fmt.rate(s.throughput_rps)} requests/s, "
                 f"{s.output_tokens_per_s:,.1f} output tokens/s served (a request's own: "
                 f"p50 {rate.p50 or 0:,.1f} tokens/s){prefilled}")
    if s.slo:
        lines.append(f"goodput: {fmt.rate(s.goodput_rps)} requests/s met {s.slo['text']} "
                     f"({fmt.share(s.slo_met_share)} of requests)")
    sch = s.scheduler
    if sch:
        lines.append(f"scheduler: {sch['steps']:,} steps ({fmt.ms(sch['mean_step_ms'])} ms "
                     f"mean, {sch['prefill_steps']:,} with a prefill), "
                     f"{sch['mean_running']:.1f} running and {sch['mean_waiting']:.1f} waiting "
                     f"on average (at most {sch['max_waiting']:,}), KV peak "
                     f"{sch['peak_kv_tokens']:,} tokens, {s.preemptions:,} preemptions, busy "
                     f"{fmt.share(sch['busy_share'])} of the time; its own work "
                     f"{sch.get('own_us_per_step', 0.0):,.0f} µs a step")
    for msg, n in s.error_messages.items():
        lines.append(f"error ×{n}: {msg}")
    return "\n".join(lines)


def format_generation(result: Any) -> str:
    """A generation result for the terminal: what ran, how it ended, its numbers, findings,
    verdict, the machine and validity."""
    simulated = getattr(result, "is_simulated", False)
    lines = [(f"SIMULATED (no model ran; {result.status}): " if simulated
              else f"run {result.status}: ") + describe_generation(result.config)]
    if result.failure:
        lines.append(f"failure: {result.failure}")
    view = getattr(result, "target_view", None)
    lines.append(format_generation_block(result.summary, result.config,
                                         view.lines() if view is not None else None))
    lines += turn_lines(result.rows, getattr(result, "reports", None), result.config.turns)
    metrics = (result.environment or {}).get("server_metrics")
    if metrics:
        t = result.timings
        s = result.summary
        lines.append(server_metric_line(
            measured_window(metrics, t.measure_start_ns, t.measure_end_ns),
            in_flight(result.rows, t.measure_start_ns, t.measure_end_ns),
            {"TTFT": s.ttft_sent_ms.mean, "ITL": s.itl_ms.mean, "TPOT": s.tpot_ms.mean,
             "queue time": _split_queue_mean(result)}))
    for w in result.findings:
        lines.append(f"warning: {w}")
    lines.append(f"verdict: {result.verdict}")
    for text in list(result.samples.values())[:1]:
        lines.append(f"a generated text: {text[:160]!r}")
    machine = machine_line(result.environment)
    if machine:
        lines.append(machine)
    if not simulated:  # a simulation has no machine, and nothing it measured to judge
        lines.append(f"validity: {result.validity.line()}")
    return "\n".join(lines)


def in_flight(rows: Any, start_ns: int | None, end_ns: int | None) -> float | None:
    """The client's mean requests in flight over the measurement: each measured request's
    time inside it, summed, over the span (Little's law)."""
    if start_ns is None or end_ns is None or end_ns <= start_ns or not len(rows):
        return None
    m = rows[~rows["warmup"]]
    lo = np.maximum(m["t_sent"], start_ns)
    hi = np.minimum(m["t_done"], end_ns)
    return float(np.maximum(hi - lo, 0).sum() / (end_ns - start_ns))


def _split_queue_mean(result: Any) -> float | None:
    """The mean queue (ms) of the requests the server's account split (None: none split)."""
    view = result.target_view
    if view is None or not view.split.n:
        return None
    return view.parts_ms["queue"].mean
