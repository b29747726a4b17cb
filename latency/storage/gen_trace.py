"""A generation run as a Chrome trace (trace-event JSON), to scroll through in Perfetto.

Open the file at https://ui.perfetto.dev. Two processes:

* **requests**: one span per request (intended send → last token) on *lanes* (a request takes
  the lowest lane free at its intended send, so spans on a lane never overlap), and nested in
  it the same telescoping parts the summary adds up: schedule lag, network (hand-off in
  process), queue for the tokenizer, tokenize, queue for a slot, prefill (+ its stall: the
  span from admission to the first token), detokenize and delivery of the first token, then
  each later token's gap split into stall, decode, detokenize and delivery — so the spans of a
  part sum exactly to that part of the request.
* **scheduler**: a track per replica with one span per step (its prefill call nested), and
  counters of the waiting and running sequences and the KV tokens in use, step by step.

Bounded: the first ``max_requests`` requests by intended send and, of those, the gaps of the
first ``max_tokens`` tokens are drawn (a viewer slows past a few hundred thousand spans); the
file says how many it left out. Times are microseconds from the first intended send.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from latency.core.gen_records import STATUS_OK, token_gaps
from latency.storage.trace import _lanes

REQUESTS_PID, SCHEDULER_PID = 1, 2
#: the parts up to the first token: (name, from stamp, to stamp)
FIRST: tuple[tuple[str, str, str], ...] = (
    ("schedule lag", "intended", "sent"),
    ("network", "sent", "received"),
    ("queue: tokenizer", "received", "tok_start"),
    ("tokenize", "tok_start", "tok_end"),
    ("queue: slot", "tok_end", "admitted"),
    ("prefill + stall", "admitted", "first"),
    ("detokenize", "first", "first_detok"),
    ("delivery", "first_detok", "first_deliv"),
)


def gen_trace(rows: np.ndarray, tokens: np.ndarray, steps: np.ndarray,
              errors: dict[int, str] | None = None, meta: dict[str, Any] | None = None,
              in_process: bool = True, max_requests: int = 20_000,
              max_tokens: int = 200_000, max_steps: int = 200_000) -> dict[str, Any]:
    """Trace-event JSON (a dict) of a generation run's logs."""
    errors = errors or {}
    events: list[dict[str, Any]] = []
    meta_events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": REQUESTS_PID, "tid": 0,
         "args": {"name": "requests (lanes: one request at a time each)"}},
        {"ph": "M", "name": "process_name", "pid": SCHEDULER_PID, "tid": 0,
         "args": {"name": "scheduler (steps; waiting, running, KV in use)"}},
    ]
    order = np.argsort(rows["t_intended"], kind="stable")[:max_requests]
    t0 = int(rows["t_intended"][order].min()) if len(order) else 0

    def us(v: Any) -> float:
        return (int(v) - t0) / 1000.0

    lanes = _lanes(rows["t_intended"][order], rows["t_done"][order], np.arange(len(order)))
    for k in range(int(lanes.max()) + 1 if len(lanes) else 0):
        meta_events.append({"ph": "M", "name": "thread_name", "pid": REQUESTS_PID, "tid": k,
                            "args": {"name": f"lane {k}"}})
    req = tokens["request"]  # in request order: each request's tokens are appended together
    drawn = 0
    for j, i in enumerate(order.tolist()):
        r = rows[i]
        tid = int(lanes[j])
        args = {"request": i, "client": int(r["client"]), "prompt_tokens": int(
            r["prompt_tokens"]), "output_tokens": int(r["output_tokens"]),
            "preemptions": int(r["preemptions"]),
            "status": "ok" if r["status"] == STATUS_OK else "error",
            "warmup": bool(r["warmup"])}
        if i in errors:
            args["error"] = errors[i]
        events.append(_span("request", REQUESTS_PID, tid, r["t_intended"], r["t_done"], us,
                            args))
        for name, a, b in FIRST:
            if name == "network" and in_process:
                name = "hand-off"
            if r[f"t_{b}"] > r[f"t_{a}"]:
                events.append(_span(name, REQUESTS_PID, tid, r[f"t_{a}"], r[f"t_{b}"], us,
                                    {"request": i}))
        lo, hi = np.searchsorted(req, i, "left"), np.searchsorted(req, i, "right")
        mine = tokens[lo:hi] if drawn < max_tokens else tokens[:0]
        if len(mine) > 1:
            mine = mine[: max(max_tokens - drawn, 0) + 1]
            drawn += len(mine)
            prev, cur = mine[:-1], mine[1:]
            _, parts = token_gaps(mine)
            for g in range(len(cur)):
                at = int(prev["t_delivered"][g])
                for name in ("stall", "decode", "detokenize", "delivery"):
                    d = int(parts[name][g])
                    if d > 0:
                        events.append(_span(name, REQUESTS_PID, tid, at, at + d, us,
                                            {"request": i, "token": int(cur["index"][g])}))
                        at += d
    events += _steps(steps[:max_steps], us, meta_events)
    other = dict(meta or {})
    other.update({"requests_in_run": int(len(rows)), "requests_in_trace": int(len(order)),
                  "tokens_drawn": drawn, "steps_in_run": int(len(steps)),
                  "steps_in_trace": int(min(len(steps), max_steps)),
                  "time_origin": "first intended send of the requests in this trace"})
    return {"traceEvents": meta_events + events, "displayTimeUnit": "ms", "otherData": other}


def _span(name: str, pid: int, tid: int, a: Any, b: Any, us: Any,
          args: dict[str, Any]) -> dict[str, Any]:
    start = us(a)
    return {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": start,
            "dur": round(us(b) - start, 3), "args": args}


def _steps(steps: np.ndarray, us: Any, meta_events: list[dict[str, Any]]
           ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rep in sorted(set(steps["replica"].tolist())) if len(steps) else []:
        meta_events.append({"ph": "M", "name": "thread_name", "pid": SCHEDULER_PID,
                            "tid": rep, "args": {"name": f"replica {rep}"}})
    for s in steps:
        rep = int(s["replica"])
        args = {"prefill_tokens": int(s["prefill_tokens"]), "prefill_seqs": int(
            s["prefill_seqs"]), "decode_seqs": int(s["decode_seqs"]),
            "waiting": int(s["waiting"]), "running": int(s["running"]),
            "kv_used": int(s["kv_used"]), "preempted": int(s["preempted"])}
        out.append(_span("step", SCHEDULER_PID, rep, s["t_start"], s["t_end"], us, args))
        if s["prefill_seqs"] and s["t_prefill_end"] > s["t_start"]:
            out.append(_span("prefill call", SCHEDULER_PID, rep, s["t_start"],
                             s["t_prefill_end"], us, {"tokens": int(s["prefill_tokens"])}))
        out.append({"ph": "C", "name": f"replica {rep} sequences", "pid": SCHEDULER_PID,
                    "ts": us(s["t_start"]), "args": {"waiting": int(s["waiting"]),
                                                     "running": int(s["running"])}})
        out.append({"ph": "C", "name": f"replica {rep} KV tokens", "pid": SCHEDULER_PID,
                    "ts": us(s["t_start"]), "args": {"in use": int(s["kv_used"])}})
    return out


def gen_trace_bytes(rows: np.ndarray, tokens: np.ndarray, steps: np.ndarray,
                    errors: dict[int, str] | None = None, meta: dict[str, Any] | None = None,
                    in_process: bool = True) -> bytes:
    """The trace as compact JSON bytes."""
    return json.dumps(gen_trace(rows, tokens, steps, errors, meta, in_process),
                      separators=(",", ":")).encode()
