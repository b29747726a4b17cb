"""WAN emulation: delay each HTTP request and response as a long, thin link would. EMULATED.

Why in the client and not a kernel qdisc (``tc netem``): netem needs root and changes the whole
machine's loopback, which other runs (and other people) share. The client instead holds each
message before sending it and after receiving the reply; the server never knows. Everything
here is labelled *emulated* wherever it is shown, and the delay a request actually got (the
sleeps as measured, overshoot included) is recorded per request, so the network component can
be split into emulated and real loopback time.

One direction of the link (``Link``) is a FIFO serialiser followed by propagation, the model
netem's ``rate`` and ``delay`` use:

    delay = wait for the link + bytes × 8 / bandwidth + RTT/2 + jitter

With one request at a time the link is always free, so a message is delayed by exactly
RTT/2 + jitter + bytes ÷ bandwidth. Under concurrency, messages queue for the shared link, as
they would on a real one (two 2 MB uploads on 100 Mbit/s take 160 ms + 320 ms, not 160 ms
each). Jitter is uniform in [0, jitter] per message (seeded): never below the propagation
floor RTT/2, as on a real path.
"""
from __future__ import annotations

import random

from latency.core.wan import WanProfile

__all__ = ["Link", "WanProfile"]


class Link:
    """One direction of the emulated link. Not thread-safe: the HTTP client calls it from its
    single event-loop thread."""

    def __init__(self, profile: WanProfile, seed: int) -> None:
        self.half_rtt_ns = int(profile.rtt_ms * 1e6 / 2)
        self.jitter_ns = int(profile.jitter_ms * 1e6)
        self.ns_per_byte = (8e3 / profile.bandwidth_mbps if profile.bandwidth_mbps else 0.0)
        self._free_at = 0
        self._rng = random.Random(seed)

    def delay_ns(self, nbytes: int, now: int) -> int:
        """How long a message of ``nbytes`` leaving at ``now`` (ns) takes to arrive."""
        arrive_tx = now
        if self.ns_per_byte:
            start = max(now, self._free_at)
            self._free_at = start + int(nbytes * self.ns_per_byte)
            arrive_tx = self._free_at
        jitter = int(self._rng.random() * self.jitter_ns) if self.jitter_ns else 0
        return arrive_tx - now + self.half_rtt_ns + jitter
