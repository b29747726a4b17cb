"""Closed-loop simulation: N clients, each sending its next request when the last one's
answer arrives — the load of the profiler's closed-loop runs and of every A/B block.

Open-loop arrivals at a closed-loop run's measured throughput describe a different system: a
saturated closed loop runs its server at utilisation ~1 with at most N requests inside, while
Poisson arrivals at that rate build an unbounded queue. So a closed-loop run is replayed as a
closed loop: the same server as ``latency.simulation.simulator`` (FIFO preprocess worker pool,
one FIFO batch queue, replicas taking up to ``batch_size`` as soon as that many wait or
``max_batch_delay_ms`` has passed since the oldest was ready, postprocessing one by one on the
replica, the replica's turnaround between batches and its wake-up), but arrivals are an
outcome: a faster server is asked more often, as real clients would ask it.

An event loop over a heap (times in ms, plain floats); every random quantity from its own
stream, as in the open-loop simulator. Rows are the engine's record format, warm-up labelled.
"""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from latency.core.records import RECORD_DTYPE
from latency.simulation.service import ServiceModel, request_draws

#: event kinds, in the order ties are resolved (a replica freed before a timer fires)
_ARRIVE, _PRE_DONE, _READY, _REPLICA_FREE, _TIMER, _ANSWERED = range(6)


def simulate_closed(clients: int, service: ServiceModel, *, requests: int, replicas: int = 1,
                    batch_size: int = 1, max_batch_delay_ms: float = 0.0,
                    preprocess_workers: int | None = None, warmup_fraction: float = 0.1,
                    seed: int = 0) -> np.ndarray:
    """``requests`` simulated request rows from ``clients`` closed-loop clients."""
    if clients < 1 or requests < 1:
        raise ValueError("a closed loop needs at least one client and one request")
    n = requests
    d = request_draws(service, n, seed)  # the arrival stream goes unused: arrivals are an outcome
    fwd_draws = service.forward_draws(d.forward, n)
    pre_l, post_l, net_l, lag_l = d.pre.tolist(), d.post.tolist(), d.net.tolist(), d.lag.tolist()
    stamps = {k: [0.0] * n for k in ("intended", "sent", "received", "pre_start", "pre_end",
                                     "fwd_start", "fwd_end", "post_start", "post_end", "done")}
    batch_of, size_of, replica_of = [0] * n, [0] * n, [0] * n
    client_of = [0] * n
    events: list[tuple[float, int, int, int]] = []
    seq = 0

    def push(t: float, kind: int, x: int) -> None:
        nonlocal seq
        heapq.heappush(events, (t, kind, seq, x))
        seq += 1

    created = 0

    def send(t: float, client: int) -> None:
        nonlocal created
        i = created
        created += 1
        client_of[i] = client
        stamps["intended"][i] = t
        stamps["sent"][i] = t + lag_l[i]
        stamps["received"][i] = stamps["sent"][i] + net_l[i] / 2
        push(stamps["received"][i], _ARRIVE, i)

    free_workers = preprocess_workers if preprocess_workers else n + clients
    waiting_pre: deque[int] = deque()
    ready: deque[int] = deque()
    idle = list(range(replicas))
    timer_at: float | None = None
    batches = 0
    B, D, turnaround = batch_size, max_batch_delay_ms, service.turnaround_ms
    wake = service.wakeup_ms

    def start_pre(t: float, i: int) -> None:
        stamps["pre_start"][i] = t
        push(t + pre_l[i], _PRE_DONE, i)

    def dispatch(t: float) -> None:
        nonlocal batches, timer_at
        while idle and ready:
            due = stamps["pre_end"][ready[0]] + D + wake
            if len(ready) < B and t < due:
                if timer_at is None or timer_at > due:
                    timer_at = due
                    push(due, _TIMER, -1)
                return
            members = [ready.popleft() for _ in range(min(B, len(ready)))]
            r = idle.pop(0)
            size = len(members)
            fwd = service.batch_forward_ms(fwd_draws[batches], size)
            # every member's forward pass ends with the batch's; the replica then
            # post-processes them one by one, and a member's wait for its batch-mates'
            # postprocessing is queue (as the engine records it), not forward
            fwd_end = end = t + fwd
            for i in members:
                stamps["fwd_start"][i], stamps["fwd_end"][i] = t, fwd_end
                stamps["post_start"][i] = end
                end += post_l[i]
                stamps["post_end"][i] = end
                stamps["done"][i] = end + net_l[i] / 2
                batch_of[i], size_of[i], replica_of[i] = batches, size, r
                push(stamps["done"][i], _ANSWERED, i)
            push(end + turnaround, _REPLICA_FREE, r)
            batches += 1

    for c in range(min(clients, n)):
        send(1.0, c)  # 1 ms in: a stamp of 0 would read as "never taken"
    while events:
        t, kind, _, x = heapq.heappop(events)
        if kind == _ARRIVE:
            if free_workers > 0:
                free_workers -= 1
                start_pre(t, x)
            else:
                waiting_pre.append(x)
        elif kind == _PRE_DONE:
            stamps["pre_end"][x] = t
            if waiting_pre:
                start_pre(t, waiting_pre.popleft())
            else:
                free_workers += 1
            if wake:  # a replica sees it after its wake-up
                push(t + wake, _READY, x)
            else:
                ready.append(x)
                dispatch(t)
        elif kind == _READY:
            ready.append(x)
            dispatch(t)
        elif kind == _REPLICA_FREE:
            idle.append(x)
            idle.sort()
            dispatch(t)
        elif kind == _TIMER:
            if timer_at is not None and t >= timer_at:
                timer_at = None
            dispatch(t)
        elif created < n:  # answered: that client asks again at once
            send(t, client_of[x])
    rows = np.zeros(n, dtype=RECORD_DTYPE)
    for key, values in stamps.items():
        rows[f"t_{key}"] = np.round(np.asarray(values) * 1e6).astype(np.int64)
    rows["batch_id"], rows["batch_size"] = batch_of, size_of
    rows["replica"], rows["client"] = replica_of, client_of
    order = np.argsort(rows["t_intended"], kind="stable")
    rows = rows[order]
    rows["warmup"] = np.arange(n) < int(n * warmup_fraction)
    return rows
