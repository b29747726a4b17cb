"""The one-line verdict: where the time goes, and which lever to try first.

Like MLPerf LoadGen's summary, a run should end with a sentence a person can act on. The verdict
is built from the mean decomposition (where the time goes on average) and the p99 decomposition
is left to the charts; each dominant component maps to the levers that actually move it.
"""
from __future__ import annotations

from typing import Any

from latency.components import COMPONENTS

ADVICE = {
    "network": "shrink payloads (send preprocessed or compressed inputs), keep connections "
               "alive, or serve closer to the client",
    "queue": "requests wait for a worker: add replicas, raise the batch size, or lower the "
             "load; a faster forward pass only helps by shortening that wait",
    "preprocess": "speed up decoding/resizing/tokenising (vectorise, smaller inputs, more "
                  "preprocess workers) before touching the model",
    "forward": "the model itself: quantise, compile, a smaller model or faster hardware; "
               "batching raises throughput once several requests wait at a time",
    "postprocess": "trim postprocessing (top-k instead of full softmax, smaller responses)",
    "overhead": "the client could not send on schedule: lower the rate or give the load "
                "generator more CPU",
}


def verdict(summary: dict[str, Any], config: dict[str, Any]) -> str:
    """One sentence: the dominant component's share of the mean, and what to try."""
    if not summary.get("successful"):
        if summary.get("errors"):
            return "no successful requests: nothing to decompose (see the errors above)"
        return "no requests were measured: nothing to decompose"
    means = {c: summary["components_ms"][c]["mean"] or 0.0 for c in COMPONENTS}
    total = sum(means.values())
    if total <= 0:
        return "requests took no measurable time"
    top = max(means, key=means.get)  # type: ignore[arg-type]
    share = means[top] / total
    ranked = sorted(means, key=means.get, reverse=True)  # type: ignore[arg-type]
    second = ranked[1]
    leads = "dominates" if share >= 0.5 else "is the largest share"
    text = (f"{top} {leads} ({share:.0%} of the mean {total:.2f} ms; next: {second} "
            f"{means[second] / total:.0%}) — {ADVICE[top]}")
    if summary.get("overloaded"):
        return (f"overloaded: {summary['offered_rps']:g} req/s offered, "
                f"{summary['throughput_rps']:.1f} served — {top} is {share:.0%} of the mean "
                f"{total:.2f} ms and grows with the run length. Raise capacity (replicas, "
                "batching, a faster forward pass) or lower the rate")
    if top == "network" and (config.get("net_rtt_ms") or config.get("net_jitter_ms")
                             or config.get("net_bandwidth_mbps")):
        text += " (network includes the EMULATED WAN delay you set)"
    fwd_share = means["forward"] / total
    # Amdahl's bound holds for work done per request; queueing is not such work (it shrinks
    # with the service time), so the bound is only stated when another stage dominates.
    if top in ("preprocess", "postprocess", "network") and fwd_share < 0.5:
        text += (f". Even an infinitely fast model would cut at most {fwd_share:.0%} of the "
                 "mean latency")
    return text
