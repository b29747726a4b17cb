"""The five components of one request, the request record, and the columnar request log.

Every request carries integer nanosecond timestamps from ``time.perf_counter_ns``. Components are
differences of those timestamps, chosen so that they telescope: their sum is exactly the total
(``done - intended``). Nothing is estimated and nothing is dropped; the part no server-side stamp
covers — the client's own gap between the intended and the actual send — is ``overhead``.

    intended ─(overhead = schedule lag)─▶ sent ─(network in)─▶ received ─(queue: wait for a
    server worker)─▶ pre_start ─(preprocess)─▶ pre_end ─(queue: wait for a batch and a free
    replica)─▶ fwd_start ─(forward: whole batch)─▶ fwd_end ─(queue: wait while the replica
    post-processes earlier requests of the batch)─▶ post_start ─(postprocess)─▶ post_end
    ─(network out)─▶ done
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the components in pipeline order; the stacked bars and every table use this order.
COMPONENTS: tuple[str, ...] = ("network", "queue", "preprocess", "forward", "postprocess",
                               "overhead")
#: the five request components a person optimises (overhead is the measurement's own remainder).
REQUEST_COMPONENTS: tuple[str, ...] = COMPONENTS[:5]
#: what the first component is called where no network is involved: in an in-process run the
#: client and the server are threads of one process, and "network" is the hand-off between
#: them (a queue put, a thread waking up). The data keep the name "network" (files, history,
#: JSON: old runs load as they are); only what a person reads says "hand-off".
HANDOFF = "hand-off"


def in_process(config: Any) -> bool:
    """Whether a run's client hands its requests to the server thread in its own process
    (no socket, no network): ``--transport in-process`` without ``--target`` or Ray Serve."""
    return (getattr(config, "transport", "in-process") in (None, "in-process")
            and not getattr(config, "target", None)
            and getattr(config, "backend", "builtin") != "ray")


def component_label(name: str, no_network: bool) -> str:
    """A component's name as shown to a person: ``network`` is the ``hand-off`` where there
    is none (``no_network``: ``in_process(config)``); every other name is its key."""
    return HANDOFF if no_network and name == "network" else name


def component_labels(no_network: bool) -> dict[str, str]:
    """Every component's key → its name as shown (``component_label``)."""
    return {c: component_label(c, no_network) for c in COMPONENTS}


def network_labels(configs: Sequence[Any]) -> dict[str, str]:
    """The components' names for runs shown together: the hand-off when every run is
    in-process, network when none is, and both names when they are mixed (one bar colour,
    two meanings: the legend says so)."""
    kinds = {in_process(c) for c in configs}
    if kinds == {True}:
        return component_labels(True)
    if kinds == {True, False}:
        return {**component_labels(False), "network": f"network / {HANDOFF}"}
    return component_labels(False)

#: the timestamps each request records, in the order they happen.
STAMPS: tuple[str, ...] = ("intended", "sent", "received", "pre_start", "pre_end", "fwd_start",
                           "fwd_end", "post_start", "post_end", "done")

STAMP_FIELDS: tuple[str, ...] = tuple(f"t_{s}" for s in STAMPS)

STATUS_OK = 0
STATUS_ERROR = 1

#: one row of the request log: 10 × 8 bytes of stamps + 12 bytes of ids + 13 bytes of
#: transport facts = 105 bytes a request. The transport facts: HTTP request and response body
#: bytes (0 in-process), the emulated WAN delay actually applied (µs, 0 when none) and whether
#: the server's time was split into components (False: a remote target sent no
#: Server-Timing breakdown, so everything from send to reply counts as network).
RECORD_DTYPE = np.dtype([(f"t_{s}", "<i8") for s in STAMPS] + [
    ("batch_id", "<i4"),
    ("batch_size", "<i2"),
    ("replica", "<i2"),
    ("client", "<i2"),
    ("status", "<i1"),
    ("warmup", "?"),
    ("req_bytes", "<u4"),
    ("resp_bytes", "<u4"),
    ("emulated_us", "<u4"),
    ("decomposed", "?"),
])


class Request:
    """One request in flight; plain attributes (``__slots__``) because the hot path sets them."""

    __slots__ = ("raw", "item", "response", "error", "client", "warmup", "reply",
                 "batch_id", "batch_size", "replica", "cancelled", "req_bytes", "resp_bytes",
                 "emulated_ns", "decomposed") + tuple(f"t_{s}" for s in STAMPS)

    def __init__(self, raw: object, client: int, warmup: bool, reply: object,
                 t_intended: int) -> None:
        self.raw = raw
        self.item = None
        self.response = None
        self.error: str | None = None
        self.client = client
        self.warmup = warmup
        self.reply = reply
        self.batch_id = -1
        self.batch_size = 0
        self.replica = -1
        self.cancelled = False  # dropped unserved when the run was stopped: not a result
        self.req_bytes = self.resp_bytes = self.emulated_ns = 0  # set by the HTTP transport
        self.decomposed = True
        self.t_intended = t_intended
        # Stamps a failed request never reaches stay 0; ``fill_missing`` closes the gaps.
        self.t_sent = self.t_received = self.t_pre_start = self.t_pre_end = 0
        self.t_fwd_start = self.t_fwd_end = self.t_post_start = self.t_post_end = 0
        self.t_done = 0

    def fill_missing_server(self) -> None:
        """Close the gaps of a request that failed inside the server: every server stamp it
        never reached takes the previous stamp's value, so the failed stage keeps its measured
        duration and the stages it never entered count zero."""
        last = self.t_sent
        for s in STAMPS[2:-1]:
            name = f"t_{s}"
            value = getattr(self, name)
            if value == 0:
                setattr(self, name, last)
            else:
                last = value


def component_ns(log: np.ndarray) -> dict[str, np.ndarray]:
    """Component durations (int64 ns) of every row of a request log, plus ``total`` and
    ``schedule_lag``. The six components sum exactly to ``total``."""
    t = {s: log[f"t_{s}"] for s in STAMPS}
    out = {
        "network": (t["received"] - t["sent"]) + (t["done"] - t["post_end"]),
        "queue": (t["pre_start"] - t["received"]) + (t["fwd_start"] - t["pre_end"])
        + (t["post_start"] - t["fwd_end"]),
        "preprocess": t["pre_end"] - t["pre_start"],
        "forward": t["fwd_end"] - t["fwd_start"],
        "postprocess": t["post_end"] - t["post_start"],
        "overhead": t["sent"] - t["intended"],
    }
    out["total"] = t["done"] - t["intended"]
    out["schedule_lag"] = t["sent"] - t["intended"]
    return out


@dataclass
class RequestLog:
    """Append-only columnar log of finished requests (numpy structured array, grown by doubling).

    Rows are in completion order. ``errors`` maps a row index to its error message so the
    fixed-size rows stay fixed-size.
    """

    rows: np.ndarray
    size: int = 0

    @classmethod
    def with_capacity(cls, capacity: int) -> RequestLog:
        return cls(np.zeros(max(capacity, 16), dtype=RECORD_DTYPE))

    def __post_init__(self) -> None:
        self.errors: dict[int, str] = {}

    def append(self, r: Request) -> int:
        """Write one finished request; returns its row index. Caller holds the log's lock."""
        if self.size == len(self.rows):
            self.rows = grown(self.rows, self.size + 1)
        i = self.size
        self.rows[i] = (r.t_intended, r.t_sent, r.t_received, r.t_pre_start, r.t_pre_end,
                        r.t_fwd_start, r.t_fwd_end, r.t_post_start, r.t_post_end, r.t_done,
                        r.batch_id, r.batch_size, r.replica, r.client,
                        STATUS_ERROR if r.error is not None else STATUS_OK, r.warmup,
                        r.req_bytes, r.resp_bytes, r.emulated_ns // 1000, r.decomposed)
        if r.error is not None:
            self.errors[i] = r.error
        self.size = i + 1
        return i

    def view(self) -> np.ndarray:
        """The filled rows (a view; copy before handing to another thread)."""
        return self.rows[: self.size]


def grown(array: np.ndarray, need: int) -> np.ndarray:
    """``array`` in a zeroed copy doubled until it holds ``need`` rows (an append-only log's
    growth: amortised, each row copied a few times at most); an empty one starts at 1."""
    size = max(len(array), 1)
    while size < need:
        size *= 2
    out = np.zeros(size, dtype=array.dtype)
    out[: len(array)] = array
    return out


def measured_and_ok(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The measured rows (warm-up excluded) and the successful ones among them, of either
    kind's log (a one-shot run's or a generation's request rows).

    Views instead of copies in the common case — warm-up rows form a prefix (the warm-up phase
    finishes before measuring starts) and most runs have no errors — because copying 105-byte
    rows twice per snapshot costs more than all the statistics on a 200,000-request run.
    """
    warm = rows["warmup"]
    n_warm = int(warm.sum())
    if n_warm == 0 or (warm[:n_warm].all()):
        measured = rows[n_warm:]
    else:
        measured = rows[~warm]
    bad = measured["status"] != STATUS_OK
    ok = measured[~bad] if bad.any() else measured
    return measured, ok


# ---- the columnar table of rows in a run's JSON ------------------------------------------
def rows_to_table(rows: np.ndarray) -> dict[str, Any]:
    """A JSON-ready columnar table of ``rows``: every field, stamps relative to ``t0_ns``."""
    t0 = int(rows["t_intended"].min()) if len(rows) else 0
    cols: dict[str, list[Any]] = {}
    for name in RECORD_DTYPE.names:
        col = rows[name]
        cols[name] = (col - t0).tolist() if name in STAMP_FIELDS else col.tolist()
    return {"t0_ns": t0, "count": len(rows), "columns": cols}


def rows_from_table(table: dict[str, Any]) -> np.ndarray:
    """Rows back from ``rows_to_table``; fields a older file lacks stay zero."""
    n = int(table["count"])
    rows = np.zeros(n, dtype=RECORD_DTYPE)
    t0 = int(table.get("t0_ns", 0))
    for name, values in table["columns"].items():
        if name in RECORD_DTYPE.names:
            rows[name] = np.asarray(values)
            if name in STAMP_FIELDS:
                rows[name] += t0
    return rows
