"""The one-line verdict: where the time goes, and which lever to try first.

Like MLPerf LoadGen's summary, a run should end with a sentence a person can act on. The verdict
is built from the mean decomposition (where the time goes on average) and the p99 decomposition
is left to the charts; each dominant component maps to the levers that actually move it.
"""
from __future__ import annotations

from collections.abc import Mapping

from latency.analysis.findings import Verdict
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.records import COMPONENTS, component_label, in_process

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


#: in-process, "network" is the hand-off between the client's and the server's threads: no
#: payload crosses a wire, but the hand-off waits for a thread to be scheduled (a core, the GIL)
HANDOFF_ADVICE = ("no network is involved: it is the hand-off between the client's and the "
                  "server's threads, which waits for a core and the GIL — fewer busy threads "
                  "in the run process (workers, replicas × threads, clients), or measure a "
                  "real network with --transport http")


#: a stage "waited for the CPU/GIL" when this share of its wall time was off its thread's
#: CPU (``environment["cpu_wait"]``: time.thread_time_ns against the wall clock, per stage)...
CPU_WAIT_SHARE = 0.25
#: ...while it computes: its CPU time at least this share of its wall time (a stage that
#: sleeps, or waits for I/O or a GPU, is not waiting for the CPU) — over this many calls
CPU_BOUND_SHARE = 0.1
CPU_WAIT_MIN_CALLS = 20


def cpu_waits(stages: Mapping[str, Mapping[str, float]] | None
              ) -> list[tuple[str, float, float, float]]:
    """The stages that waited for a core or the GIL: (stage, share of its wall time spent
    waiting, wall ms, CPU ms a call), the longest wait first."""
    out = []
    for stage, s in (stages or {}).items():
        wall, cpu, calls = s.get("wall_ms") or 0.0, s.get("cpu_ms") or 0.0, s.get("calls") or 0
        if wall <= 0 or calls < CPU_WAIT_MIN_CALLS:
            continue
        waited = max(wall - cpu, 0.0) / wall
        if waited >= CPU_WAIT_SHARE and cpu / wall >= CPU_BOUND_SHARE:
            out.append((stage, waited, wall, cpu))
    return sorted(out, key=lambda w: -w[1] * w[2])


def cpu_wait_text(stages: Mapping[str, Mapping[str, float]] | None) -> str | None:
    """'preprocess waited for the CPU/GIL 62% of its time (…)', or None when no stage did."""
    waits = cpu_waits(stages)
    if not waits:
        return None
    said = "; ".join(f"{stage} waited for the CPU/GIL {fmt.share(share)} of its time "
                     f"({fmt.ms(wall)} ms a call, {fmt.ms(cpu)} ms of it on its own CPU)"
                     for stage, share, wall, cpu in waits)
    return (f"{said}: the run's threads contend for the cores and the Python interpreter — "
            "fewer busy threads (preprocess workers, replicas, clients) or less Python "
            "in the stages")


#: on Ray Serve, network holds its HTTP proxy and router (and any hop between deployments)
RAY_NETWORK_ADVICE = ("it holds Ray Serve's HTTP proxy and router: give the proxy cores of its "
                      "own (replicas × threads + 2 or more), keep preprocessing in the replica "
                      "(each hop between deployments adds one), or call the deployment "
                      "through a handle from your own ingress")


#: for a remote target: only what the person profiling it controls from here, or can ask of
#: the server's operators — its batching and replicas are the server's own settings
REMOTE_ADVICE = {
    "network": "shrink payloads, keep connections alive, or profile from closer to the server",
    "queue": "requests wait inside the server: its replicas, batching and concurrency are the "
             "server's settings — scale it, or lower the load you send",
    "preprocess": "the server's preprocessing (decode, resize, tokenise) is the cost: look "
                  "there before the model",
    "forward": "the model on the server: quantise, compile, a smaller model or faster "
               "hardware there",
    "postprocess": "the server's postprocessing: smaller responses, top-k instead of full "
                   "scores",
    "overhead": "this client could not send on schedule: lower the rate or give it more CPU",
}

#: the header a server sends so that its time is split into components (durations in ms).
SERVER_TIMING_EXAMPLE = ("Server-Timing: queue;dur=0.4, preprocess;dur=1.2, forward;dur=3.1, "
                         "postprocess;dur=0.2")


def verdict(successful: int, errors: int, component_means: dict[str, float | None],
            overloaded: bool, offered_rps: float | None, throughput_rps: float,
            config: RunConfig, split_unavailable: bool = False,
            dropped: int = 0, split_unusable: bool = False,
            cpu_wait: Mapping[str, Mapping[str, float]] | None = None) -> Verdict:
    """One sentence: the dominant component's share of the mean, and what to try.
    ``split_unavailable``: the target sent no usable Server-Timing, so its time is all
    "network"; ``split_unusable``: it did send Server-Timing (in some replies or all), but
    none was usable (negative, non-finite, malformed, longer than the client's time);
    ``cpu_wait``: each stage's mean wall and CPU ms a call (``environment["cpu_wait"]``), to say
    which stage waited for the CPU/GIL (``cpu_wait_text``)."""
    if not successful:
        if errors:
            return Verdict("no successful requests: nothing to decompose (see the errors "
                           "above)")
        return Verdict("no requests were measured: nothing to decompose")
    means = {c: component_means.get(c) or 0.0 for c in COMPONENTS}
    total = sum(means.values())
    if total <= 0:
        return Verdict("requests took no measurable time")
    top = max(means, key=means.get)  # type: ignore[arg-type]
    share = means[top] / total
    if split_unavailable and top == "network":
        why = ("the target sent Server-Timing, but none was usable (negative, non-finite "
               "or malformed durations, or longer than the client's own time)"
               if split_unusable else "the target sends no Server-Timing header")
        return Verdict(
            f"the split is unavailable: {why}, so its "
            f"time cannot be told from the network's — 'network' ({fmt.share(share)} of the "
            f"mean {fmt.duration(total)}) is the whole client-observed time, server included. "
            f"To decompose it the server must send, per response, {SERVER_TIMING_EXAMPLE} "
            "(durations in ms; see docs/your-server.md)", None, None)
    ranked = sorted(means, key=means.get, reverse=True)  # type: ignore[arg-type]
    second = ranked[1]
    leads = "dominates" if share >= 0.5 else "is the largest share"
    advice = (REMOTE_ADVICE if config.target else ADVICE)[top]
    if top == "network" and config.backend == "ray":
        advice = RAY_NETWORK_ADVICE
    local = in_process(config)
    if top == "network" and local:
        advice = HANDOFF_ADVICE
    name = {c: component_label(c, local) for c in (top, second)}
    text = (f"{name[top]} {leads} ({fmt.share(share)} of the mean {fmt.duration(total)}; "
            f"next: {name[second]} {fmt.share(means[second] / total)}) — {advice}")
    if overloaded:
        drop = f", {dropped:,} dropped" if dropped else ""
        return Verdict(f"overloaded: offered {offered_rps:g} req/s, served "
                       f"{fmt.rate(throughput_rps)}{drop} — {name[top]} is {fmt.share(share)} "
                       f"of the mean {fmt.duration(total)} and grows with the run length. "
                       "Raise capacity (replicas, batching, a faster forward pass) or lower "
                       "the rate",
                       top, share)
    if top == "network" and (config.net_rtt_ms or config.net_jitter_ms
                             or config.net_bandwidth_mbps):
        text += " (network includes the EMULATED WAN delay you set)"
    fwd_share = means["forward"] / total
    # Amdahl's bound holds for work done per request; queueing is not such work (it shrinks
    # with the service time), so the bound is only stated when another stage dominates.
    if top in ("preprocess", "postprocess", "network") and fwd_share < 0.5:
        text += (f". Even an infinitely fast model would cut at most {fmt.share(fwd_share)} of "
                 "the mean latency")
    waited = cpu_wait_text(cpu_wait)
    if waited:
        text += f". {waited[0].upper()}{waited[1:]}"
    return Verdict(text, top, share)
