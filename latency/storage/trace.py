"""A run's requests as a Chrome trace (trace-event JSON), to scroll through in Perfetto.

Open the file at https://ui.perfetto.dev (or chrome://tracing). Two processes:

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

Times are microseconds (the format's unit) from the first intended send; ``ts`` and ``dur`` keep
nanosecond precision as fractions.
"""
from __future__ import annotations

import heapq
import json
from typing import Any

import numpy as np

from latency.core.records import STATUS_OK

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
REQUESTS_PID, REPLICAS_PID = 1, 2


def _lanes(start: np.ndarray, end: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Lowest free lane for each request taken in ``order`` (interval colouring, greedy)."""
    lane = np.zeros(len(start), dtype=np.int64)
    busy: list[tuple[int, int]] = []  # (free from, lane)
    free: list[int] = []
    n_lanes = 0
    for i in order.tolist():
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


def chrome_trace(log: np.ndarray, errors: dict[int, str] | None = None,
                 meta: dict[str, Any] | None = None, max_requests: int | None = None,
                 labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Trace-event JSON (a dict) of a request log. ``max_requests`` keeps the first ones by
    intended send time (a viewer slows down past a few hundred thousand spans). ``labels``: a
    component's span name where it is not its key (an in-process run's network is its
    hand-off: ``records.component_labels``)."""
    errors = errors or {}
    named = labels or {}
    n_all = len(log)
    idx = np.argsort(log["t_intended"], kind="stable")
    if max_requests is not None and n_all > max_requests:
        idx = idx[:max_requests]
    rows = log[idx]
    events: list[dict[str, Any]] = []
    meta_events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": REQUESTS_PID, "tid": 0,
         "args": {"name": "requests (lanes: one request at a time each)"}},
        {"ph": "M", "name": "process_sort_index", "pid": REQUESTS_PID, "tid": 0,
         "args": {"sort_index": 0}},
        {"ph": "M", "name": "process_name", "pid": REPLICAS_PID, "tid": 0,
         "args": {"name": "replicas (forward pass per batch)"}},
        {"ph": "M", "name": "process_sort_index", "pid": REPLICAS_PID, "tid": 0,
         "args": {"sort_index": 1}},
    ]
    if len(rows):
        t0 = int(rows["t_intended"].min())
        us = {s: (rows[f"t_{s}"].astype(np.int64) - t0) / 1000.0 for s in
              ("intended", "sent", "received", "pre_start", "pre_end", "fwd_start", "fwd_end",
               "post_start", "post_end", "done")}
        lanes = _lanes(rows["t_intended"], rows["t_done"], np.arange(len(rows)))
        for k in range(int(lanes.max()) + 1):
            meta_events.append({"ph": "M", "name": "thread_name", "pid": REQUESTS_PID,
                                "tid": k, "args": {"name": f"lane {k}"}})
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
    other = dict(meta or {})
    other.update({"requests_in_run": n_all, "requests_in_trace": len(rows),
                  "time_origin": "first intended send of the requests in this trace"})
    return {"traceEvents": meta_events + events, "displayTimeUnit": "ms",
            "otherData": other}


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
    for r in sorted(set(rows["replica"][sel].tolist())):
        meta_events.append({"ph": "M", "name": "thread_name", "pid": REPLICAS_PID, "tid": r,
                            "args": {"name": f"replica {r}"}})
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
