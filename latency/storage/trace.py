"""A run's requests as a Chrome trace (trace-event JSON), to scroll through in Perfetto: a
one-shot run's (``chrome_trace``) and a generation's (``gen_trace``).

Open the file at https://ui.perfetto.dev (or chrome://tracing). A one-shot run has two
processes:

* **requests**: one span per request (``request``, from intended send to done) with, nested
  inside it, one span per component segment — the same telescoping differences of timestamps
  as ``components.component_ns``, so the spans of a component sum exactly to that component.
  ``queue`` appears up to three times (waiting for a preprocess worker, for a batch and a
  replica, for the batch's earlier postprocessing) and ``network`` twice (in and out; named
  ``hand-off`` in an in-process run, where there is no network). Requests are laid out on
  *lanes*: each request takes the lowest lane free at its intended send time, so spans on a
  lane never overlap (trace viewers need that to nest them) and the number of lanes is the
  most requests ever in flight at once.
* **replicas**: one track per replica, one span per batch's forward pass, so idle replicas and
  batch sizes are visible at a glance.

A generation has two processes too:

* **requests**: one span per request (intended send → last token) on the same lanes, and nested
  in it the same telescoping parts the summary adds up: schedule lag, network (hand-off in
  process), queue for the tokenizer, tokenize, queue for a slot, prefill (+ its stall: the
  span from admission to the first token), detokenize and delivery of the first token, then
  each later token's gap split into stall, decode, detokenize and delivery — so the spans of a
  part sum exactly to that part of the request.
* **scheduler**: a track per replica with one span per step (its prefill call nested), and
  counters of the waiting and running sequences and the KV tokens in use, step by step.

Bounded: the first ``max_requests`` requests by intended send (a viewer slows down past a few
hundred thousand spans) and, of a generation's, the gaps of the first ``max_tokens`` tokens
are drawn; the file says how many it left out.

Times are microseconds (the format's unit) from the first intended send; ``ts`` and ``dur`` keep
nanosecond precision as fractions.
"""
from __future__ import annotations

import heapq
import json
from typing import Any

import numpy as np

from latency.core.gen_records import token_gaps
from latency.core.records import STAMPS, STATUS_OK

#: the segments of one request: (component, part, from stamp, to stamp), in time order.
SEGMENTS: tuple[tuple[str, str, str, str], ...] = (
    ("overhead", "schedule lag", "intended", "sent"),
    ("network", "in", "sent", "received"),
    ("queue", "wait for a preprocess worker", "received", "pre_start"),
    ("preprocess", "", "pre_start", "pre_end"),
    ("queue", "wait for a batch and a replica", "pre_end", "fwd_start"),
    ("forward", "", "fwd_start", "fwd_end"),
    ("queue", "wait for the batch's earlier postprocessing", "fwd_end", "post_start"),
    ("postprocess", "", "post_start", "post_end"),
    ("network", "out", "post_end", "done"),
)
#: a generation's parts up to the first token: (name, from stamp, to stamp)
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
#: the processes: the requests (either kind), then a one-shot run's replicas or a
#: generation's scheduler
REQUESTS_PID, REPLICAS_PID, SCHEDULER_PID = 1, 2, 2


def _lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lowest free lane for each request, taken in send order (interval colouring, greedy)."""
    lane = np.zeros(len(start), dtype=np.int64)
    busy: list[tuple[int, int]] = []  # (free from, lane)
    free: list[int] = []
    n_lanes = 0
    for i in range(len(start)):
        s = int(start[i])
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            k = heapq.heappop(free)
        else:
            k, n_lanes = n_lanes, n_lanes + 1
        lane[i] = k
        heapq.heappush(busy, (int(end[i]), k))
    return lane


def _first_requests(rows: np.ndarray, max_requests: int | None,
                    meta_events: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """The first ``max_requests`` requests (None: all) by intended send, as indices into
    ``rows``, and the lane of each (``_lanes``), whose tracks are named in ``meta_events``."""
    order = np.argsort(rows["t_intended"], kind="stable")[:max_requests]
    lanes = _lanes(rows["t_intended"][order], rows["t_done"][order])
    meta_events += _tracks(REQUESTS_PID, range(int(lanes.max()) + 1 if len(lanes) else 0),
                           "lane")
    return order, lanes


def _processes(*names: str, sort: bool = False) -> list[dict[str, Any]]:
    """The events naming the processes (pid 1, 2, …); ``sort``: the viewer keeps that order."""
    out: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        out.append({"ph": "M", "name": "process_name", "pid": i + 1, "tid": 0,
                    "args": {"name": name}})
        if sort:
            out.append({"ph": "M", "name": "process_sort_index", "pid": i + 1, "tid": 0,
                        "args": {"sort_index": i}})
    return out


def _tracks(pid: int, tids: Any, label: str) -> list[dict[str, Any]]:
    """The metadata events naming the tracks ``tids`` of process ``pid``: ``label`` and the
    track's number."""
    return [{"ph": "M", "name": "thread_name", "pid": pid, "tid": t,
             "args": {"name": f"{label} {t}"}} for t in tids]


def _trace(meta_events: list[dict[str, Any]], events: list[dict[str, Any]],
           meta: dict[str, Any] | None, counts: dict[str, int]) -> dict[str, Any]:
    """The trace: its metadata events first, then the spans; ``otherData`` holds ``meta``
    (what names the run) and ``counts`` (what the trace holds of the run, what it left out)."""
    other = dict(meta or {})
    other.update({**counts, "time_origin": "first intended send of the requests in this trace"})
    return {"traceEvents": meta_events + events, "displayTimeUnit": "ms", "otherData": other}


def chrome_trace(log: np.ndarray, errors: dict[int, str] | None = None,
                 meta: dict[str, Any] | None = None, max_requests: int | None = None,
                 labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Trace-event JSON (a dict) of a request log. ``max_requests`` keeps the first ones by
    intended send time (a viewer slows down past a few hundred thousand spans). ``labels``: a
    component's span name where it is not its key (an in-process run's network is its
    hand-off: ``records.component_labels``)."""
    errors = errors or {}
    named = labels or {}
    events: list[dict[str, Any]] = []
    meta_events = _processes("requests (lanes: one request at a time each)",
                             "replicas (forward pass per batch)", sort=True)
    idx, lanes = _first_requests(log, max_requests, meta_events)
    rows = log[idx]
    if len(rows):
        t0 = int(rows["t_intended"].min())
        us = {s: (rows[f"t_{s}"].astype(np.int64) - t0) / 1000.0 for s in STAMPS}
        ids = {f: rows[f].tolist() for f in ("batch_id", "batch_size", "replica", "client",
                                             "status", "warmup")}
        original = idx.tolist()
        lane_l = lanes.tolist()
        cols = {s: v.tolist() for s, v in us.items()}
        for j in range(len(rows)):
            i = original[j]
            common = {"request": i, "batch_id": ids["batch_id"][j],
                      "batch_size": ids["batch_size"][j], "replica": ids["replica"][j],
                      "client": ids["client"][j]}
            start, done = cols["intended"][j], cols["done"][j]
            args = dict(common, total_ms=round((done - start) / 1000.0, 6),
                        status="ok" if ids["status"][j] == STATUS_OK else "error",
                        warmup=bool(ids["warmup"][j]))
            if i in errors:
                args["error"] = errors[i]
            tid = lane_l[j]
            events.append({"ph": "X", "name": "request", "cat": "request", "pid": REQUESTS_PID,
                           "tid": tid, "ts": start, "dur": round(done - start, 3),
                           "args": args})
            for comp, part, a, b in SEGMENTS:
                ta, tb = cols[a][j], cols[b][j]
                dur = round(tb - ta, 3)
                if dur <= 0:
                    continue  # a zero-length segment draws nothing
                seg_args = dict(common, part=part) if part else common
                events.append({"ph": "X", "name": named.get(comp, comp), "cat": "component",
                               "pid": REQUESTS_PID, "tid": tid, "ts": ta, "dur": dur,
                               "args": seg_args})
        events.extend(_batch_events(rows, us, meta_events))
    return _trace(meta_events, events, meta,
                  {"requests_in_run": len(log), "requests_in_trace": len(rows)})


def _batch_events(rows: np.ndarray, us: dict[str, np.ndarray],
                  meta_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One forward span per batch, on its replica's track."""
    served = rows["batch_id"] >= 0
    if not served.any():
        return []
    bid = rows["batch_id"][served]
    _, first = np.unique(bid, return_index=True)
    sel = np.flatnonzero(served)[first]
    out = []
    meta_events += _tracks(REPLICAS_PID, sorted(set(rows["replica"][sel].tolist())),
                           "replica")
    for j in sel.tolist():
        a, b = float(us["fwd_start"][j]), float(us["fwd_end"][j])
        out.append({"ph": "X", "name": "forward batch", "cat": "batch", "pid": REPLICAS_PID,
                    "tid": int(rows["replica"][j]), "ts": a, "dur": round(b - a, 3),
                    "args": {"batch_id": int(rows["batch_id"][j]),
                             "batch_size": int(rows["batch_size"][j])}})
    return out


def chrome_trace_bytes(log: np.ndarray, errors: dict[int, str] | None = None,
                       meta: dict[str, Any] | None = None,
                       max_requests: int | None = None,
                       labels: dict[str, str] | None = None) -> bytes:
    """The trace as compact JSON bytes (≈ 1 kB a request)."""
    trace = chrome_trace(log, errors, meta, max_requests, labels)
    return json.dumps(trace, separators=(",", ":")).encode()


def gen_trace(rows: np.ndarray, tokens: np.ndarray, steps: np.ndarray,
              errors: dict[int, str] | None = None, meta: dict[str, Any] | None = None,
              in_process: bool = True, max_requests: int = 20_000,
              max_tokens: int = 200_000, max_steps: int = 200_000) -> dict[str, Any]:
    """Trace-event JSON (a dict) of a generation run's logs (its rows, tokens and steps)."""
    errors = errors or {}
    events: list[dict[str, Any]] = []
    meta_events = _processes("requests (lanes: one request at a time each)",
                             "scheduler (steps; waiting, running, KV in use)")
    order, lanes = _first_requests(rows, max_requests, meta_events)
    t0 = int(rows["t_intended"][order].min()) if len(order) else 0

    def us(v: Any) -> float:
        return (int(v) - t0) / 1000.0

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
    return _trace(meta_events, events, meta, {
        "requests_in_run": int(len(rows)), "requests_in_trace": int(len(order)),
        "tokens_drawn": drawn, "steps_in_run": int(len(steps)),
        "steps_in_trace": int(min(len(steps), max_steps))})


def _span(name: str, pid: int, tid: int, a: Any, b: Any, us: Any,
          args: dict[str, Any]) -> dict[str, Any]:
    start = us(a)
    return {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": start,
            "dur": round(us(b) - start, 3), "args": args}


def _steps(steps: np.ndarray, us: Any, meta_events: list[dict[str, Any]]
           ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    meta_events += _tracks(SCHEDULER_PID, sorted(set(steps["replica"].tolist())), "replica")
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
