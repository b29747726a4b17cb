"""The transport part of a run's summary: what carried the requests, their sizes, how the
server's time was known, and the emulated WAN — labelled *emulated* wherever it shows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from latency.analysis.findings import Finding
from latency.analysis.stats import LatencyStats, describe_ms
from latency.core.config import RunConfig
from latency.core.describe import server_label
from latency.core.records import component_ns

NO_BREAKDOWN = ("the target sent no Server-Timing header with queue/preprocess/forward/"
                "postprocess durations, so its time cannot be told apart from the network's: "
                "'network' is the whole client-observed time (client time only)")
#: why a Server-Timing header the target did send gave no breakdown (the keys the HTTP client
#: counts, ``latency.loadgen.http_client.UNUSABLE``)
UNUSABLE_WHY = {
    "duration": "negative, non-finite or absurd durations",
    "longer": "longer than the client's own time for the request",
    "malformed": "malformed, or no queue/preprocess/forward/postprocess duration",
}
IN_PROCESS_NOTE = "no socket: network is the thread hand-off inside the run process"


def _bytes(values: np.ndarray) -> dict[str, float | None]:
    if not len(values):
        return {"mean": None, "p50": None, "max": None}
    return {"mean": float(values.mean()), "p50": float(np.median(values)),
            "max": float(values.max())}


@dataclass(frozen=True)
class EmulatedWan:
    """The emulated link's settings and what it added: EMULATED, never a real network."""

    rtt_ms: float
    jitter_ms: float
    bandwidth_mbps: float | None
    emulated_delay_ms: LatencyStats
    network_without_emulation_ms: LatencyStats

    def to_dict(self) -> dict[str, Any]:
        return {"emulated": True, "rtt_ms": self.rtt_ms, "jitter_ms": self.jitter_ms,
                "bandwidth_mbps": self.bandwidth_mbps,
                "emulated_delay_ms": self.emulated_delay_ms.to_dict(),
                "network_without_emulation_ms": self.network_without_emulation_ms.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EmulatedWan:
        return cls(d.get("rtt_ms", 0.0), d.get("jitter_ms", 0.0), d.get("bandwidth_mbps"),
                   LatencyStats.from_dict(d.get("emulated_delay_ms")),
                   LatencyStats.from_dict(d.get("network_without_emulation_ms")))


@dataclass(frozen=True)
class TransportSummary:
    """``kind`` in-process (a thread hand-off) or http (ours or a remote target)."""

    kind: str = "in-process"
    note: str | None = None
    server: str | None = None
    target: str | None = None
    payload: str | None = None
    request_bytes: dict[str, float | None] | None = None
    response_bytes: dict[str, float | None] | None = None
    decomposed_share: float = 1.0
    #: server-timing (every request decomposed), partial, or client-only
    decomposition: str = "server-timing"
    emulated_wan: EmulatedWan | None = None
    #: what our server answered during the run, by status (HTTP); ``counted`` False: not asked
    server_responses: dict[str, int] | None = None
    server_errors: int | None = None
    counted: bool = False
    #: successful measured replies whose Server-Timing header was sent but unusable, by why
    #: (keys of ``UNUSABLE_WHY``); None: none was (or a file from before this was counted)
    timing_unusable: dict[str, int] | None = None
    #: successful measured replies (what ``decomposed_share`` is a share of)
    answered: int | None = None

    @property
    def is_http(self) -> bool:
        return self.kind == "http"

    @property
    def unusable_count(self) -> int:
        """Replies that carried a Server-Timing header we could not use."""
        return sum((self.timing_unusable or {}).values())

    @property
    def timing_unusable_everywhere(self) -> bool:
        """Every reply carried Server-Timing and none was usable (so: no breakdown at all,
        though the target did send one)."""
        return (self.decomposition == "client-only" and self.unusable_count > 0
                and self.unusable_count >= (self.answered or 0))

    @property
    def decomposition_note(self) -> str | None:
        """Why the server's time is not split, when it is not: no Server-Timing header, or
        one that was sent but could not be used (and why)."""
        if self.decomposition == "server-timing":
            return None
        bad = self.unusable_count
        if not bad:
            return NO_BREAKDOWN
        answered = max(self.answered or 0, bad)
        split = round(self.decomposed_share * answered) if self.answered else 0
        sent = min(split + bad, answered)
        none = max(answered - sent, 0)
        why = ", ".join(f"{UNUSABLE_WHY.get(k, k)}: {n}"
                        for k, n in sorted((self.timing_unusable or {}).items()))
        which = "none was usable" if split == 0 else f"{bad} of them were unusable"
        text = f"the target sent Server-Timing in {sent} of {answered} responses but {which} "
        text += f"({why})"
        if none:
            text += f"; {none} had no Server-Timing header"
        return (text + ": no breakdown for those, so their server time cannot be told apart "
                "from the network's: 'network' is their whole client-observed time (client "
                "time only)")

    def findings(self) -> list[Finding]:
        """Warnings a reader must see next to the numbers."""
        if self.is_http and self.decomposition != "server-timing":
            return [Finding(f"{1 - self.decomposed_share:.0%} of requests without a server "
                            f"breakdown: {self.decomposition_note}", "transport")]
        return []

    def with_server_counts(self, responses: dict[str, int] | None,
                           errors: int | None) -> TransportSummary:
        from dataclasses import replace

        return replace(self, server_responses=responses, server_errors=errors, counted=True)

    def to_dict(self) -> dict[str, Any]:
        if not self.is_http:
            return {"kind": self.kind, "note": self.note}
        d: dict[str, Any] = {"kind": self.kind, "server": self.server, "target": self.target,
                             "payload": self.payload, "request_bytes": self.request_bytes,
                             "response_bytes": self.response_bytes,
                             "decomposed_share": self.decomposed_share,
                             "decomposition": self.decomposition}
        if self.decomposition_note is not None:
            d["decomposition_note"] = self.decomposition_note
        if self.timing_unusable:
            d["server_timing_unusable"] = self.timing_unusable
            d["answered"] = self.answered
        d["emulated_wan"] = self.emulated_wan.to_dict() if self.emulated_wan else None
        if self.counted:
            d["server_responses"] = self.server_responses
            d["server_errors"] = self.server_errors
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TransportSummary:
        d = d or {}
        if d.get("kind", "in-process") != "http":
            return cls(kind=d.get("kind", "in-process"), note=d.get("note", IN_PROCESS_NOTE))
        wan = d.get("emulated_wan")
        return cls(kind="http", server=d.get("server"), target=d.get("target"),
                   payload=d.get("payload"), request_bytes=d.get("request_bytes"),
                   response_bytes=d.get("response_bytes"),
                   decomposed_share=d.get("decomposed_share", 1.0),
                   decomposition=d.get("decomposition", "server-timing"),
                   emulated_wan=EmulatedWan.from_dict(wan) if wan else None,
                   server_responses=d.get("server_responses"),
                   server_errors=d.get("server_errors"), counted="server_responses" in d,
                   timing_unusable=d.get("server_timing_unusable") or None,
                   answered=d.get("answered"))


def transport_summary(ok: np.ndarray, config: RunConfig,
                      timing_unusable: dict[str, int] | None = None) -> TransportSummary:
    """The transport block of a summary, from the successful measured rows
    (``timing_unusable``: those of them whose Server-Timing was sent but unusable, by why)."""
    if config.transport != "http":
        return TransportSummary(kind="in-process", note=IN_PROCESS_NOTE)
    share = float(ok["decomposed"].mean()) if len(ok) else 1.0
    decomposition = ("server-timing" if share == 1.0 else
                     "client-only" if share == 0.0 else "partial")
    rtt, jitter = config.net_rtt_ms or 0.0, config.net_jitter_ms or 0.0
    bw = config.net_bandwidth_mbps
    wan = None
    if rtt or jitter or bw is not None:
        emulated = (ok["emulated_us"].astype(np.int64) * 1000 if len(ok)
                    else np.zeros(0, dtype=np.int64))
        real = (component_ns(ok)["network"] - emulated) if len(ok) else emulated
        wan = EmulatedWan(rtt, jitter, bw, describe_ms(emulated, with_ci=False),
                          describe_ms(real, with_ci=False))
    empty = np.zeros(0)
    return TransportSummary(
        kind="http",
        server=server_label(config),
        target=config.target,
        payload="bodies file" if config.bodies else config.payload,
        request_bytes=_bytes(ok["req_bytes"] if len(ok) else empty),
        response_bytes=_bytes(ok["resp_bytes"] if len(ok) else empty),
        decomposed_share=share, decomposition=decomposition, emulated_wan=wan,
        timing_unusable=dict(timing_unusable) if timing_unusable else None,
        answered=int(len(ok)))
