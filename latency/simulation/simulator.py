"""Discrete-event simulation of the serving system the engine runs.

The same server as ``latency.serve.server``: requests arrive (Poisson, constant, bursty on/off, or
the arrival times of a recorded run), wait FIFO for one of the preprocess workers (or none, when
the pool is left unlimited), wait in one FIFO batch queue, and a free replica takes up to
``batch_size`` of them as soon as that many wait or ``max_batch_delay_ms`` has passed since the
oldest one arrived; it runs the batch's forward pass, then post-processes the batch's requests
one by one. Service times come from a ``ServiceModel``: parametric (constant, exponential,
lognormal with a mean and a spread) or resampled from a recorded run.

One replica without batching is the Lindley recursion, vectorised (a running maximum); c
replicas or batching loop once per *batch* over plain floats with a heap of replica free times.
Arrival times, service draws and the expansion of batches back to requests are vectorised with
numpy. Results are request rows in the engine's own record format (simulated nanosecond
stamps), so every statistic, summary and chart of a measured run applies unchanged — and every
output is labelled ``simulated``. What it leaves out: the CPU cores the stages share (a real
server short of cores slows every stage at once) and the interpreter lock.
"""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from latency.analysis.findings import Finding
from latency.analysis.summary import Summary, summarize_rows
from latency.core import fmt
from latency.core.config import RunConfig
from latency.core.records import RECORD_DTYPE
from latency.simulation.closed_form import ClosedForm, closed_form
from latency.simulation.config import ARRIVALS, SimConfig
from latency.simulation.horizon import suggested_requests, too_short
from latency.simulation.queueing import UnstableQueue
from latency.simulation.service import DISTS, ServiceModel, request_draws
from latency.simulation.utilisation import utilisation, utilisation_text

__all__ = ["ARRIVALS", "DISTS", "ServiceModel", "SimConfig", "simulate", "summarize_simulation",
           "utilisation"]


def arrivals_ms(config: SimConfig, rng: np.random.Generator) -> np.ndarray:
    n, gap = config.requests, 1000.0 / config.rate
    if config.arrival == "constant":
        return np.arange(1, n + 1) * gap
    if config.arrival == "poisson":
        return np.cumsum(rng.exponential(gap, n))
    if config.arrival == "recorded":
        t = np.sort(np.asarray(config.arrival_times_ms, dtype=float))
        if not len(t):
            raise ValueError("recorded arrivals: the run has no requests")
        t = t - t[0] + gap  # start one mean gap in, like the other arrival kinds
        span = t[-1] - t[0]
        period = span + span / max(len(t) - 1, 1)  # the next cycle starts one mean gap on
        k = np.arange(n)
        return t[k % len(t)] + (k // len(t)) * period
    if config.arrival == "bursty":  # Poisson at twice the rate, switched on and off
        t = np.cumsum(rng.exponential(gap / 2, n))
        period = config.burst_on_s * 1000
        return t + (t // period) * period  # every "on" period is followed by an equal gap
    raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}")


def simulate(config: SimConfig, service: ServiceModel) -> np.ndarray:
    """Simulated request rows (the engine's record format, stamps in ns), warm-up labelled."""
    if config.clients:
        from latency.simulation.closed_loop import simulate_closed

        return simulate_closed(config.clients, service, requests=config.requests,
                               replicas=config.replicas, batch_size=config.batch_size,
                               max_batch_delay_ms=config.max_batch_delay_ms,
                               preprocess_workers=config.preprocess_workers,
                               warmup_fraction=config.warmup_fraction, seed=config.seed)
    if not config.allow_unstable and utilisation(config, service) >= 1:
        raise UnstableQueue(f"utilisation {utilisation(config, service):.2f} ≥ 1")
    # one random stream per quantity (common random numbers across lengths and rates), so
    # the hockey stick's points and the headline's longer run describe the same luck
    n = config.requests
    d = request_draws(service, n, config.seed)
    pre, post, net, lag, fwd_rng = d.pre, d.post, d.net, d.lag, d.forward
    arrive = arrivals_ms(config, d.arrivals)
    sent = arrive + lag
    received = sent + net / 2
    pre_start = (received if not config.preprocess_workers else
                 _fifo_starts(received, pre, config.preprocess_workers))
    ready = pre_start + pre  # preprocessed; ready to be batched
    order = np.argsort(ready, kind="stable")
    ready_list = ready[order].tolist()  # plain floats: the loop below is scalar work
    post_sorted = post[order]
    post_total = np.concatenate(([0.0], np.cumsum(post_sorted))).tolist()
    fwd_draws = service.forward_draws(fwd_rng, n)
    if config.replicas == 1 and config.batch_size == 1:
        starts, t_start, t_fwd, reps = _one_server(ready[order], post_sorted, fwd_draws, service)
    else:
        starts, t_start, t_fwd, reps = _batches(config, service, ready_list, post_total,
                                                fwd_draws)
    # Expand per-batch results to requests (vectorised).
    first_idx = starts
    sizes = np.diff(np.append(first_idx, n))
    per_req_batch = np.repeat(np.arange(len(first_idx)), sizes)
    start_s = np.repeat(t_start, sizes)
    end_s = start_s + np.repeat(t_fwd, sizes)
    cum = np.asarray(post_total)
    before = cum[:-1] - cum[first_idx][per_req_batch]  # postprocessing of earlier batch-mates
    fwd_start, fwd_end, post_start = (np.empty(n) for _ in range(3))
    fwd_start[order], fwd_end[order], post_start[order] = start_s, end_s, end_s + before
    batch_id = np.empty(n, dtype=np.int32)
    batch_size = np.empty(n, dtype=np.int16)
    replica = np.empty(n, dtype=np.int16)
    batch_id[order] = per_req_batch
    batch_size[order] = np.repeat(sizes, sizes)
    replica[order] = np.repeat(reps, sizes)
    rows = np.zeros(n, dtype=RECORD_DTYPE)
    ns = lambda ms: np.round(ms * 1e6).astype(np.int64)  # noqa: E731
    post_end = post_start + post
    rows["t_intended"], rows["t_sent"] = ns(arrive), ns(sent)
    rows["t_received"], rows["t_pre_start"] = ns(received), ns(pre_start)
    rows["t_pre_end"] = ns(ready)
    rows["t_fwd_start"], rows["t_fwd_end"] = ns(fwd_start), ns(fwd_end)
    rows["t_post_start"], rows["t_post_end"] = ns(post_start), ns(post_end)
    rows["t_done"] = ns(post_end + net / 2)
    rows["batch_id"], rows["batch_size"], rows["replica"] = batch_id, batch_size, replica
    rows["warmup"] = np.arange(n) < int(n * config.warmup_fraction)
    return rows


def _fifo_starts(arrive: np.ndarray, service: np.ndarray, servers: int) -> np.ndarray:
    """When each job starts at a FIFO pool of ``servers`` identical workers (jobs in arrival
    order). One worker: the Lindley recursion, vectorised; more: a heap of free times."""
    order = np.argsort(arrive, kind="stable")
    a, x = arrive[order], service[order]
    if servers == 1:  # in integer ns (see ``_lindley_starts_ms``): a start never precedes
        start_sorted = _lindley_starts_ms(a, x)  # its arrival, not even by round-off
    else:
        free = [0.0] * servers
        out = []
        for t, d in zip(a.tolist(), x.tolist()):
            f = heapq.heappop(free)
            st = t if t > f else f
            out.append(st)
            heapq.heappush(free, st + d)
        start_sorted = np.asarray(out)
    start = np.empty_like(start_sorted)
    start[order] = start_sorted
    return start


def _one_server(ready: np.ndarray, post: np.ndarray, fwd_draws: list[float],
                service: ServiceModel) -> tuple[np.ndarray, ...]:
    """One replica, no batching: the Lindley recursion, vectorised. Request k ends at
    end_k = max(ready_k, end_{k−1}) + s_k, whose closed form is
    end_k = C_k + max_{j ≤ k}(ready_j − C_{j−1}) with C the running sum of service times."""
    n = len(ready)
    if service.forward_by_batch and service.forward_trace_ms is None:
        pool = service._forward_pool(1)
        fwd = pool[(np.asarray(fwd_draws) * len(pool)).astype(np.int64)]
    else:
        fwd = np.asarray(fwd_draws, dtype=float)
    busy = fwd + post + service.turnaround_ms  # the replica's time per request
    # an idle replica starts a request its wake-up after the request is ready
    starts = _lindley_starts_ms(ready + service.wakeup_ms, busy)
    return np.arange(n), starts, fwd, np.zeros(n, dtype=np.int64)


def _lindley_starts_ms(ready: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """When each job starts at one FIFO server (jobs in ready order, times in ms), computed
    in integer nanoseconds — the resolution of the rows they become. In floats,
    ``end − busy`` of a job that found the server idle comes back as its ready time ± a few
    ulp of the running sum (1e-10 ms after a few minutes simulated), and rounded to ns that
    is a queue of −1 ns: a negative mean wait printed. In integers it is exact: a start is
    never before its ready time, and an idle server's start is that time exactly."""
    r = np.round(ready * 1e6).astype(np.int64)
    b = np.round(busy * 1e6).astype(np.int64)
    c = np.cumsum(b)
    end = c + np.maximum.accumulate(r - (c - b))
    return (end - b) / 1e6


def _batches(config: SimConfig, service: ServiceModel, ready_list: list[float],
             post_total: list[float], fwd_draws: list[float]) -> tuple[np.ndarray, ...]:
    """c replicas and dynamic batching: one pass per batch over a heap of replica free times.
    Returns per batch: its first request (in ready order), start, forward time, replica."""
    n = len(ready_list)
    free = [(0.0, r) for r in range(config.replicas)]
    heapq.heapify(free)
    B, D = config.batch_size, config.max_batch_delay_ms
    turnaround, wake = service.turnaround_ms, service.wakeup_ms
    starts: list[int] = []
    t_start: list[float] = []
    t_fwd: list[float] = []
    reps: list[int] = []
    i = 0
    while i < n:
        t_free, r = heapq.heappop(free)
        first = ready_list[i]
        if B == 1:
            start = t_free if t_free > first + wake else first + wake
            j = i + 1
        else:
            full_at = ready_list[i + B - 1] if i + B - 1 < n else float("inf")
            due = (full_at if full_at < first + D else first + D) + wake
            start = t_free if t_free > due else due
            j = min(bisect.bisect_right(ready_list, start, i), i + B)
            j = j if j > i else i + 1
        fwd = service.batch_forward_ms(fwd_draws[len(starts)], j - i)
        starts.append(i)
        t_start.append(start)
        t_fwd.append(fwd)
        reps.append(r)
        heapq.heappush(free, (start + fwd + post_total[j] - post_total[i] + turnaround, r))
        i = j
    return np.asarray(starts), np.asarray(t_start), np.asarray(t_fwd), np.asarray(reps)


@dataclass
class SimSummary:
    """A simulation's summary: the same ``Summary`` as a measured run (every figure and check
    applies unchanged), marked simulated, with the utilisation, how an unstable queue grows,
    and the closed form where one exists."""

    summary: Summary
    utilisation: float
    queue_growth: list[tuple[float, int]] | None = None
    #: the closed form of the setting, or why there is none (``closed_form.closed_form``)
    closed_form: ClosedForm | None = None
    #: the setting simulated, as checked
    config: SimConfig | None = None

    @property
    def unstable(self) -> bool:
        """No steady state: open-loop arrivals at or above capacity. A closed loop is never
        unstable (at most its clients are inside); saturated, it reads ρ ≈ 1 either side."""
        closed = self.config is not None and bool(self.config.clients)
        return self.utilisation >= 1 and not closed

    def __repr__(self) -> str:
        from latency.analysis.summary import format_summary_block

        load = (f"{self.summary.offered_rps:g} req/s" if self.summary.offered_rps else
                f"closed loop, {fmt.rate(self.summary.throughput_rps)} req/s served")
        head = (f"SIMULATED (no model ran): {load}, utilisation "
                f"{utilisation_text(self.utilisation)}")
        text = head + "\n" + format_summary_block(self.summary)
        if self.queue_growth:
            text += ("\nqueue length over the simulated horizon: "
                     + "  ".join(f"{t:.1f}s:{q}" for t, q in self.queue_growth))
        if self.closed_form is not None:
            text += "\n" + self.closed_form.sentence()
        return text

    def to_dict(self) -> dict[str, Any]:
        d = self.summary.to_dict()
        d["simulated"] = True
        d["utilisation"] = self.utilisation
        if self.queue_growth is not None:
            d["queue_growth"] = self.queue_growth
        cf = self.closed_form
        d["closed_form"] = cf.to_dict() if cf is not None and cf.applies else None
        if cf is not None and not cf.applies:
            d["no_closed_form"] = cf.reason
        if self.config is not None:
            d["sim_config"] = self.config.to_dict()
        return d


def summarize_simulation(config: SimConfig, service: ServiceModel) -> SimSummary:
    """The same summary as a measured run, marked simulated, with the utilisation and the
    closed form (or why none applies)."""
    rows = simulate(config, service)
    measured = rows[~rows["warmup"]]
    summary = summarize_rows(rows, {}, measure_start_ns=int(measured["t_intended"].min()),
                             measure_end_ns=int(measured["t_done"].max()),
                             config=RunConfig(concurrency=config.clients) if config.clients
                             else RunConfig(rate=config.rate))
    # a closed loop's rate is an outcome: its utilisation is that of the throughput it reached
    rho = utilisation(replace(config, rate=summary.throughput_rps) if config.clients
                      else config, service)
    theory = closed_form(config, service)
    if rho < 1 or config.clients:
        total = measured["t_done"] - measured["t_intended"]
        short = too_short(config, rho, total, summary.latency_ms, theory)
        against_theory = theory is not None and theory.applies and theory.exact
        if short and (against_theory or not any(getattr(w, "kind", None) == "too_few"
                                                for w in summary.warnings)):
            # (without an exact closed form the summary's own p99-interval note says it)
            more = suggested_requests(rho, config.requests)
            summary = replace(summary, warnings=[*summary.warnings, Finding(
                f"too short to trust: {short} (simulate about {more:,} requests)",
                "too_few")])
        return SimSummary(summary, rho, closed_form=theory, config=config)
    # no steady state: a longer simulation only grows the queue, so no advice to run longer
    unstable = Finding(f"unstable: utilisation {rho:.2f} ≥ 1 — the queue grows for as long as "
                       "the simulation runs; no steady state, so no length of simulation "
                       "settles its figures", "unstable")
    kept = [w for w in summary.warnings if getattr(w, "kind", None) != "too_few"]
    return SimSummary(replace(summary, warnings=[unstable, *kept]), rho,
                      queue_growth(rows), theory, config)


def queue_growth(rows: np.ndarray, points: int = 8) -> list[tuple[float, int]]:
    """Requests in the system (arrived, not yet answered) at ``points`` moments spread over
    the simulated horizon: how an unstable queue grows, in numbers a person can read."""
    arrive, done = np.sort(rows["t_intended"]), np.sort(rows["t_done"])
    t = np.linspace(arrive[0], arrive[-1], points + 1)[1:]
    inside = np.searchsorted(arrive, t, side="right") - np.searchsorted(done, t, side="right")
    return [(float((x - arrive[0]) / 1e9), int(q)) for x, q in zip(t, inside)]
