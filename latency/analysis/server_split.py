"""The split of each streamed request's time between the network, the server's queue, its
prefill, its decode and the rest — from the client's own stamps and what the server reported
of the request (``latency.core.gen_reports``).

Per request, send-anchored (from the moment the request was written, so the client's
schedule lag is not the server's)::

    ttft = first token delivered − sent      = network + queue + prefill        (+ its rest)
    e2e  = last token delivered − sent       = network + queue + prefill + decode + other

Each part is taken from where ``SPLIT`` says for the report's source: reported by the server,
measured by the client (``network`` as the round-trip floor the probe measured), or derived as
what is left of a client time once the other parts are taken out.

A derived part below zero means the report is longer than the client saw. By less than the
client can resolve (``tolerance_ns``: its own stamping lag and the delivery jitter to the
server, both measured in the run), that is measurement noise, not disagreement: the part is
clamped at zero, the difference taken from the reported part beside it (the client's total
stays the truth, so the parts still sum exactly), and the request is counted as clamped.
Beyond it, the request is counted as inconsistent and left out of the split — never shown with
a negative part; where it would fit with no network time at all, it is the round-trip floor
that does not fit (a server slow to answer the probe), and it is counted as such. Requests
without a report have no split: the run says so instead of guessing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latency.core.gen_reports import (
    DERIVED,
    MEASURED,
    MISSING,
    SOURCE_NAMES,
    SOURCE_NONE,
    SPLIT,
    SPLIT_PARTS,
)

#: the parts of the time to first token, in order
TTFT_SPLIT: tuple[str, ...] = ("network", "queue", "prefill")


@dataclass
class ServerSplit:
    """Each part per request (ns, int64) for the requests split; ``provenance[part]`` says
    where it came from for each source seen."""

    parts: dict[str, np.ndarray]
    ttft_ns: np.ndarray
    e2e_ns: np.ndarray
    sources: dict[str, int]
    provenance: dict[str, dict[str, str]]
    unreported: int = 0
    inconsistent: int = 0
    #: requests whose report lacked a part its source should give (TGI without its time per
    #: token): left out, not guessed
    incomplete: int = 0
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: requests split with a part clamped at zero within the tolerance, and that tolerance
    clamped: int = 0
    tolerance_ns: int = 0
    #: of the inconsistent ones, those that fit once the network floor is taken as zero
    floor_misfit: int = 0

    @property
    def n(self) -> int:
        return int(len(self.ttft_ns))

    def tail_shares(self, quantile: float = 0.99) -> dict[str, float]:
        """The mean share of the time to first token each of its parts held among the
        requests whose TTFT is at or above its ``quantile`` (at least one request)."""
        if not self.n:
            return {}
        cut = np.quantile(self.ttft_ns, quantile)
        tail = self.ttft_ns >= cut
        ttft = self.ttft_ns[tail].astype(np.float64)
        ttft[ttft <= 0] = 1.0
        return {p: float(np.mean(self.parts[p][tail] / ttft)) for p in TTFT_SPLIT}


def split(rows: np.ndarray, reports: np.ndarray, rtt_floor_ns: int,
          tolerance_ns: int = 0) -> ServerSplit:
    """The split of ``rows`` (requests, ``GEN_DTYPE``) given their ``reports`` (aligned,
    ``REPORT_DTYPE``), the client's round-trip floor to the server and what the client can
    resolve (``tolerance_ns``, see the module docstring)."""
    if len(rows) != len(reports):
        raise ValueError("rows and reports must be aligned")
    tol = max(int(tolerance_ns), 0)
    src = reports["source"].astype(np.int64)
    ttft = (rows["t_first_deliv"] - rows["t_sent"]).astype(np.int64)
    e2e = (rows["t_done"] - rows["t_sent"]).astype(np.int64)
    n = len(rows)
    parts = {p: np.zeros(n, dtype=np.int64) for p in SPLIT_PARTS}
    good = np.zeros(n, dtype=bool)
    inconsistent = incomplete = clamped = floor_misfit = 0
    seen: dict[str, int] = {}
    provenance: dict[str, dict[str, str]] = {}
    for source in np.unique(src).tolist():
        if source == SOURCE_NONE or source not in SPLIT:
            continue
        rule = SPLIT[source]
        at = src == source
        rep = reports[at]
        got = {f: rep[f"{f}_ns"].astype(np.int64) for f in ("queue", "prefill", "decode")}
        own = rep["network_ns"].astype(np.int64)
        got["network"] = np.where(own != MISSING, own, int(rtt_floor_ns))
        t, e = ttft[at], e2e[at]
        known = np.ones(len(rep), dtype=bool)
        for name in ("queue", "prefill", "decode"):
            if rule[name] != DERIVED:
                known &= got[name] != MISSING
        fit = _fitted(got, rule, t, e, tol)
        ok = known & fit["ok"]
        bad = known & ~ok
        inconsistent += int(bad.sum())
        floor_misfit += int((bad & fit["floor"]).sum())
        incomplete += int((~known).sum())
        clamped += int((ok & fit["clamped"]).sum())
        idx = np.flatnonzero(at)[ok]
        for name in SPLIT_PARTS:
            parts[name][idx] = fit[name][ok]
        good[idx] = True
        seen[SOURCE_NAMES[source]] = int(ok.sum())
        provenance[SOURCE_NAMES[source]] = dict(rule)
    return ServerSplit(parts={p: v[good] for p, v in parts.items()}, ttft_ns=ttft[good],
                       e2e_ns=e2e[good], sources=seen, provenance=provenance,
                       unreported=int((src == SOURCE_NONE).sum()), inconsistent=inconsistent,
                       incomplete=incomplete, rows=np.flatnonzero(good), clamped=clamped,
                       tolerance_ns=tol, floor_misfit=floor_misfit)


def split_for(rows: np.ndarray, reports: np.ndarray, target: dict[str, Any]) -> ServerSplit:
    """``split`` with a run's own round-trip floor and resolution (its environment's
    ``target``: ``rtt_floor_ms``, ``resolution_ms``) — every view of a run splits alike."""
    return split(rows, reports, int(float(target.get("rtt_floor_ms") or 0.0) * 1e6),
                 int(float(target.get("resolution_ms") or 0.0) * 1e6))


def _fitted(got: dict[str, np.ndarray], rule: dict[str, str], ttft: np.ndarray,
            e2e: np.ndarray, tol: int) -> dict[str, np.ndarray]:
    """Each part of one source's requests, the derived ones computed and clamped within
    ``tol``; ``ok`` (every part ≥ 0 after clamping), ``clamped`` (a part was) and ``floor``
    (inconsistent, but it fits with the network floor taken as zero)."""
    p = {k: v.copy() for k, v in got.items()}
    clamped = np.zeros(len(ttft), dtype=bool)
    # the time to first token: network + queue + prefill, one of the first two derived
    derived = "queue" if rule["queue"] == DERIVED else \
        "network" if rule["network"] == DERIVED else None
    if derived is not None:
        others = [k for k in TTFT_SPLIT if k != derived]
        p[derived] = ttft - p[others[0]] - p[others[1]]
        clamped |= _clamp(p, derived, [*reversed(others)], tol)
    floor = np.zeros(len(ttft), dtype=bool)
    if rule["network"] == MEASURED and derived == "queue":
        floor = (p["queue"] < -tol) & (ttft - got["prefill"] >= -tol)
    p["other"] = e2e - p["network"] - p["queue"] - p["prefill"] - p["decode"]
    clamped |= _clamp(p, "other", ["decode"], tol)
    ok = np.ones(len(ttft), dtype=bool)
    for k in SPLIT_PARTS:
        ok &= p[k] >= 0
    return {**p, "ok": ok, "clamped": clamped, "floor": floor}


def _clamp(p: dict[str, np.ndarray], part: str, donors: list[str], tol: int) -> np.ndarray:
    """``p[part]`` below zero by at most ``tol`` set to zero, the deficit taken from the
    ``donors`` in order (none below zero), so the parts' sum is unchanged; which were."""
    short = (p[part] < 0) & (p[part] >= -tol)
    deficit = np.where(short, -p[part], 0)
    p[part] = np.where(short, 0, p[part])
    for d in donors:
        take = np.minimum(deficit, np.maximum(p[d], 0))
        p[d] = p[d] - take
        deficit = deficit - take
    p[part] = p[part] - deficit  # what no donor could give: still below zero, left out
    return short & (deficit == 0)
