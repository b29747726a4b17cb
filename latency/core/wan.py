"""The emulated WAN link's settings (a value): round-trip time, jitter and bandwidth.

The emulation itself (``latency.loadgen.wan.Link``) runs in the HTTP client; the settings live
here because a RunConfig carries them and checks their ranges without importing the client.
Everything about it is labelled *emulated* wherever it is shown.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_RTT_MS = 60_000.0
MAX_BANDWIDTH_MBPS = 1_000_000.0


@dataclass(frozen=True)
class WanProfile:
    """The emulated link. ``bandwidth_mbps`` None means no bandwidth limit."""

    rtt_ms: float = 0.0
    jitter_ms: float = 0.0
    bandwidth_mbps: float | None = None

    @property
    def active(self) -> bool:
        return self.rtt_ms > 0 or self.jitter_ms > 0 or self.bandwidth_mbps is not None

    def describe(self) -> str:
        """``emulated WAN: RTT 20 ms, jitter ≤ 5 ms, 100 Mbit/s`` (or ``no WAN emulation``)."""
        if not self.active:
            return "no WAN emulation"
        bw = (f"{self.bandwidth_mbps:g} Mbit/s" if self.bandwidth_mbps is not None
              else "unlimited bandwidth")
        return (f"emulated WAN: RTT {self.rtt_ms:g} ms, jitter ≤ {self.jitter_ms:g} ms, {bw}")

    def to_dict(self) -> dict[str, object]:
        return {"emulated": True, "rtt_ms": self.rtt_ms, "jitter_ms": self.jitter_ms,
                "bandwidth_mbps": self.bandwidth_mbps}
