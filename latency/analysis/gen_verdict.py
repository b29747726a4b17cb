"""What a generation run says about itself: findings with numbers, and a verdict with a lever.

The verdict reads the make-up of the *tail*: what the requests near TTFT's p99 spent their time
on, and what the gaps near ITL's p99 were made of (``GenSummary.*_p99_parts_ms``), because a
tail is what a user feels and what an objective is checked on. Each leading part names the
lever that moves it, in the flags of this run:

- TTFT's ``queue`` — requests wait for a free slot: more ``--max-running`` (if the KV budget
  holds them), a replica, or less load; where none waited for a slot, for the step running
  when they came: shorter steps; where the KV budget ran out, more KV (``queue_lever``);
- TTFT's ``prefill`` — the prompt's own compute: shorter prompts or a faster device;
- TTFT's ``prefill_stall`` — admitted, but steps went to others' work: fewer running, or
  (chunked) a smaller chunk;
- ITL's ``stall`` — long prompts' prefills (or preemptions) hold back the decodes:
  ``--chunked-prefill``, or a smaller chunk; a bigger ``--kv-tokens`` when preempted;
- ITL's ``decode`` — the step itself: a batch of N shares it, fewer ``--max-running`` lowers
  ITL and throughput together.
"""
from __future__ import annotations

from typing import Any

from latency.analysis.findings import Finding, Verdict
from latency.analysis.gen_summary import GenSummary
from latency.analysis.summary import OVERLOAD_SHARE
from latency.core import fmt
from latency.core.records import component_label

#: a make-up's part must hold this share of the tail to be named as its cause
LEADING_SHARE = 0.4
#: sequences a decode step holds on average from which fewer of them shortens it
SHARED_STEP = 1.5


def _top(parts: dict[str, float]) -> tuple[str | None, float]:
    total = sum(parts.values())
    if total <= 0:
        return None, 0.0
    name = max(parts, key=lambda k: parts[k])
    return name, parts[name] / total


def part_label(name: str, in_process: bool) -> str:
    """A part of TTFT, a gap or E2E as shown to a person (``prefill stall``; ``network`` is
    the hand-off in-process: ``records.component_label``)."""
    return component_label(name, in_process).replace("_", " ")


def ttft_cause(s: GenSummary, config: Any, in_process: bool) -> str | None:
    """'TTFT p99 is 81 % queue: …' with its lever, or None when nothing leads."""
    name, share = _top(s.ttft_p99_parts_ms)
    if name is None or share < LEADING_SHARE:
        return None
    head = (f"TTFT p99 {fmt.ms(s.ttft_ms.p99)} ms is {fmt.share(share)} "
            f"{part_label(name, in_process)}")
    chunk = getattr(config, "chunked_prefill", None)
    lever = {
        "queue": queue_lever(s, config),
        "prefill": "the prompt's own compute — shorter prompts, or a faster device (prefill "
                   "is compute-bound: it grows with the prompt)",
        "prefill_stall": ("admitted, but the steps went to others' work — "
                          + ("a smaller --chunked-prefill gives each step's prompt a "
                             "smaller share" if chunk else "fewer --max-running, or "
                             "--chunked-prefill so a prompt is not queued behind "
                             "whole prefills")),
        "tokenize": "the tokenizer — a faster tokenizer, or tokenize ahead of the server",
        "network": "the hand-off to the server" if in_process else "the network",
        "overhead": "the load generator fell behind its schedule — a less busy client",
        "detokenize": "detokenizing the first token",
        "delivery": "the client reading the stream — a less busy client",
    }.get(name, "")
    return f"{head}: {lever}" if lever else head


def queue_lever(s: GenSummary, config: Any) -> str:
    """What to change when TTFT's tail is queue, as far as the run's own facts support it:

    - nobody waited for a slot (at most 0 waiting at any step): the wait is for the step
      already running when the request came — shorter steps, not more slots;
    - the KV budget ran out (preemptions): more slots would only preempt more — more KV;
    - else requests waited for a free slot: more slots (as far as KV holds them), a replica,
      or less load.

    One lever, never its opposite beside it (``itl_cause`` says "lower --max-running" only
    for preemptions, where this says nothing of raising it)."""
    sch = s.scheduler or {}
    waited = sch.get("max_waiting")
    if waited == 0:
        chunk = getattr(config, "chunked_prefill", None)
        shorter = (f"a smaller --chunked-prefill than {chunk}" if chunk else
                   "--chunked-prefill N, so a long prompt's prefill spreads over short steps")
        return ("requests wait for the step already running when they come (none waited for "
                f"a free slot: at most 0 waiting) — shorter steps: {shorter}")
    if s.preemptions:
        return (f"requests wait for a free slot while the KV budget is full ({s.preemptions} "
                "preemptions): raise --kv-tokens (more --max-running would only preempt "
                "more), or lower the load")
    return ("requests wait for a free slot — raise --max-running (if the KV budget holds "
            "them) or add a replica, or lower the load")


def itl_cause(s: GenSummary, config: Any, preempted: bool) -> str | None:
    """'ITL p99 is 70 % stall: …' with its lever, or None."""
    name, share = _top(s.itl_p99_parts_ms)
    if name is None or share < LEADING_SHARE:
        return None
    head = f"ITL p99 {fmt.ms(s.itl_ms.p99)} ms is {fmt.share(share)} {part_label(name, False)}"
    chunk = getattr(config, "chunked_prefill", None)
    if name == "stall":
        if preempted:
            lever = ("sequences were preempted when the KV budget ran out and recomputed — "
                     "raise --kv-tokens or lower --max-running")
        elif getattr(config, "batching", "continuous") == "static":
            lever = ("static batching: nothing joins until the whole batch ends — "
                     "--batching continuous")
        elif chunk:
            lever = (f"prompt chunks ({chunk} tokens) share the decode steps — a smaller "
                     "--chunked-prefill")
        else:
            lever = ("long prompts' prefills block decodes (a step that prefills decodes "
                     "nothing) — try --chunked-prefill")
    elif name == "decode":
        running = s.scheduler.get("mean_running")
        batch = f" (a step of {running:.1f} sequences on average)" if running else ""
        if running is not None and running >= SHARED_STEP:
            lever = (f"the decode step itself{batch} — fewer --max-running lowers ITL and "
                     "throughput together; a faster device lowers both")
        else:  # a step of about one sequence: nothing shares it
            lever = f"the decode step itself{batch} — a faster device, or a smaller model"
    elif name == "delivery":
        lever = "the client reading the stream — a less busy client"
    else:
        lever = "detokenizing — a faster detokenizer"
    return f"{head}: {lever}"


def gen_findings(s: GenSummary, config: Any) -> list[Finding]:
    """The warnings a reader must see beside the numbers."""
    out: list[Finding] = []
    if s.requests and s.errors:
        top = max(s.error_messages, key=lambda m: s.error_messages[m]) if s.error_messages \
            else "unknown"
        out.append(Finding(f"errors: {s.errors} of {s.requests} measured requests failed "
                           f"({fmt.share(s.error_rate)}); most often: {top}", "errors"))
    if s.offered_rps and s.throughput_rps < OVERLOAD_SHARE * s.offered_rps:
        out.append(Finding(f"overloaded: {fmt.rate(s.offered_rps)} requests/s offered, "
                           f"{fmt.rate(s.throughput_rps)} served — queues grew all run; the "
                           "TTFT tail measures the backlog, not the server", "overloaded"))
    if s.dropped:
        out.append(Finding(f"overloaded: {s.dropped} requests dropped (the backlog was full)",
                           "overloaded"))
    if s.preemptions:
        out.append(Finding(f"preempted: {s.preemptions} preemptions of {s.requests_preempted} "
                           "requests (the KV budget ran out; each recomputed its prompt and "
                           "output — shown as stall)", "run"))
    if s.successful and s.successful < 20:
        out.append(Finding(f"too few: {s.successful} successful requests; the p99 is not "
                           "meaningful below a few hundred", "too_few"))
    slo = s.slo
    if slo:
        for key, stats, name in (("ttft_ms", s.ttft_ms, "TTFT"), ("tpot_ms", s.tpot_ms, "TPOT"),
                                 ("e2e_ms", s.e2e_ms, "E2E")):
            limit = slo.get(key)
            if limit is not None and stats.p99 is not None and stats.p99 > limit:
                out.append(Finding(f"objective missed: {name} p99 {fmt.ms(stats.p99)} ms > "
                                   f"{limit:g} ms", "run"))
    return out


def gen_verdict(s: GenSummary, config: Any, in_process: bool) -> Verdict:
    """The one line: the tail's leading cause and its lever, TTFT first."""
    if not s.successful:
        return Verdict("no successful requests: nothing to judge")
    causes = [c for c in (ttft_cause(s, config, in_process),
                          itl_cause(s, config, s.preemptions > 0)) if c]
    if not causes:
        return Verdict(f"no single cause leads: TTFT p99 {fmt.ms(s.ttft_ms.p99)} ms, ITL p99 "
                       f"{fmt.ms(s.itl_ms.p99)} ms spread over their parts")
    name, share = _top(s.ttft_p99_parts_ms)
    return Verdict("; ".join(causes), name, share)
