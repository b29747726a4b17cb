"""The split of each streamed request's time between the network, the server's queue, its
prefill, its decode and the rest — from the client's own stamps and what the server reported
of the request (``latency.core.gen_reports``).

Per request, send-anchored (from the moment the request was written, so the client's
schedule lag is not the server's)::

    ttft = first token delivered − sent      = network + queue + prefill        (+ its rest)
    e2e  = last token delivered − sent       = network + queue + prefill + decode + other

Each part is taken from where ``SPLIT`` says for the report's source: reported by the server,
measured by the client (``network`` as the round-trip floor the probe measured), or derived as
what is left of a client time once the other parts are taken out. A derived part below zero
means the report and the client's clocks disagree (a report longer than the client saw): that
request is counted as inconsistent and left out of the split — never shown with a negative
part. Requests without a report have no split: the run says so instead of guessing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from latency.core.gen_reports import DERIVED, MISSING, SOURCE_NAMES, SOURCE_NONE, SPLIT, SPLIT_PARTS

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


def split(rows: np.ndarray, reports: np.ndarray, rtt_floor_ns: int) -> ServerSplit:
    """The split of ``rows`` (requests, ``GEN_DTYPE``) given their ``reports`` (aligned,
    ``REPORT_DTYPE``) and the client's round-trip floor to the server."""
    if len(rows) != len(reports):
        raise ValueError("rows and reports must be aligned")
    src = reports["source"].astype(np.int64)
    ttft = (rows["t_first_deliv"] - rows["t_sent"]).astype(np.int64)
    e2e = (rows["t_done"] - rows["t_sent"]).astype(np.int64)
    n = len(rows)
    parts = {p: np.zeros(n, dtype=np.int64) for p in SPLIT_PARTS}
    good = np.zeros(n, dtype=bool)
    inconsistent = incomplete = 0
    seen: dict[str, int] = {}
    provenance: dict[str, dict[str, str]] = {}
    for source in np.unique(src).tolist():
        if source == SOURCE_NONE or source not in SPLIT:
            continue
        rule = SPLIT[source]
        at = src == source
        rep = reports[at]
        q, pf, dc = (rep[f].astype(np.int64) for f in ("queue_ns", "prefill_ns", "decode_ns"))
        own = rep["network_ns"].astype(np.int64)
        net = np.where(own != MISSING, own, int(rtt_floor_ns))
        t, e = ttft[at], e2e[at]
        known = np.ones(len(rep), dtype=bool)
        for name, value in (("queue", q), ("prefill", pf), ("decode", dc)):
            if rule[name] != DERIVED:
                known &= value != MISSING
        if rule["queue"] == DERIVED:
            q = t - net - pf
        if rule["network"] == DERIVED:
            net = t - q - pf
        other = e - net - q - pf - dc
        ok = known & (q >= 0) & (net >= 0) & (other >= 0) & (pf >= 0) & (dc >= 0)
        inconsistent += int((known & ~ok).sum())
        incomplete += int((~known).sum())
        idx = np.flatnonzero(at)[ok]
        for name, value in (("network", net), ("queue", q), ("prefill", pf),
                            ("decode", dc), ("other", other)):
            parts[name][idx] = value[ok]
        good[idx] = True
        seen[SOURCE_NAMES[source]] = int(ok.sum())
        provenance[SOURCE_NAMES[source]] = dict(rule)
    return ServerSplit(parts={p: v[good] for p, v in parts.items()}, ttft_ns=ttft[good],
                       e2e_ns=e2e[good], sources=seen, provenance=provenance,
                       unreported=int((src == SOURCE_NONE).sum()), inconsistent=inconsistent,
                       incomplete=incomplete,
                       rows=np.flatnonzero(good))
