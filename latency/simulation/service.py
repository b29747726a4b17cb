"""Where a simulation's service times come from: parametric distributions, or resampled from a
recorded run (every component per request, the forward pass per batch size, the replica's
turnaround between batches).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from latency.core.errors import ConfigError
from latency.core.flags import flag
from latency.core.records import STATUS_OK, component_ns

DISTS = ("constant", "exponential", "lognormal")
#: the sub-command whose flags the simulated settings' fields are (``latency.cli.config_flags``
#: makes them from the fields' metadata, as for RunConfig)
SIMULATE = ("simulate",)
#: their help section for the parametric service
SERVICE = "service (parametric; --from-run resamples a recorded run's instead)"


@dataclass
class _Batches:
    """A run's batches, by replica and then in time (stamps in ns): when each started, ended
    (its last postprocess), and its first and last member became ready; its size; and its
    work (its forward pass and its members' postprocessing: the rest of start → end is the
    replica's own hand-offs)."""

    start: np.ndarray
    end: np.ndarray
    first_ready: np.ndarray
    last_ready: np.ndarray
    size: np.ndarray
    replica: np.ndarray
    work: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray) -> _Batches | None:
        ok = rows[rows["status"] == STATUS_OK]
        if len(ok) < 2:
            return None
        ids, inverse = np.unique(ok["batch_id"], return_inverse=True)
        if len(ids) < 2:
            return None
        big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        start, first = np.full(len(ids), big), np.full(len(ids), big)
        end, last = np.full(len(ids), small), np.full(len(ids), small)
        np.minimum.at(start, inverse, ok["t_fwd_start"])
        np.minimum.at(first, inverse, ok["t_pre_end"])
        np.maximum.at(last, inverse, ok["t_pre_end"])
        np.maximum.at(end, inverse, ok["t_post_end"])
        size = np.bincount(inverse, minlength=len(ids))
        replica = np.zeros(len(ids), dtype=np.int64)
        replica[inverse] = ok["replica"]
        work = np.bincount(inverse, weights=ok["t_post_end"] - ok["t_post_start"],
                           minlength=len(ids))
        fwd = np.zeros(len(ids))
        fwd[inverse] = ok["t_fwd_end"] - ok["t_fwd_start"]
        order = np.lexsort((start, replica))
        return cls(start[order], end[order], first[order], last[order], size[order],
                   replica[order], (work + fwd)[order])

    def after_previous(self) -> tuple[np.ndarray, np.ndarray]:
        """Per batch but the first of each replica: whether its first member was ready only
        after the replica's previous batch ended (it found the replica idle), and the
        replica's idle gap before it (start − previous end)."""
        same = self.replica[1:] == self.replica[:-1]
        idle = same & (self.first_ready[1:] > self.end[:-1])
        return idle, same & ~idle


def measured_turnaround_ms(rows: np.ndarray) -> float:
    """Mean time a replica spends per batch on its own hand-offs: the gap it leaves between
    finishing a batch and starting the next one, over the batches that were already waiting
    (so the gap is bookkeeping, not idleness; 0 when no batch ever waited), plus the time
    inside a batch that is neither its forward pass nor a member's postprocessing (the
    hand-over from one to the other). The mean, not the median: a queue feels every stolen
    millisecond, and on a busy machine the gaps have a long tail (the thread waits for a
    core)."""
    b = _Batches.of(rows)
    if b is None:
        return 0.0
    inside = float(np.mean(np.maximum(b.end - b.start - b.work, 0))) / 1e6
    _, waited = b.after_previous()
    if not waited.any():
        return inside
    return inside + float(np.mean((b.start[1:] - b.end[:-1])[waited])) / 1e6


def measured_wakeup_ms(rows: np.ndarray, batch_size: int = 1,
                       max_batch_delay_ms: float = 0.0) -> float:
    """Mean delay between the moment an idle replica should start a batch and the moment it
    did: the worker thread's wake-up (a condition notified, the thread scheduled back onto a
    core) — about 0.05 ms on a quiet machine, milliseconds when other work holds the cores.
    It is queue time the requests that find the server idle still pay, and it delays the
    busy period each of them opens, so a simulation without it under-predicts the queue.
    The moment it should start: when the batch was full (its last member ready, if it holds
    ``batch_size``), or ``max_batch_delay_ms`` after its first member was ready, whichever
    came first. 0 when no batch found its replica idle. The mean, as for the turnaround."""
    b = _Batches.of(rows)
    if b is None:
        return 0.0
    idle, _ = b.after_previous()
    if not idle.any():
        return 0.0
    first, last = b.first_ready[1:], b.last_ready[1:]
    due = first + round(max_batch_delay_ms * 1e6)
    full = b.size[1:] >= batch_size
    due = np.where(full & (last < due), last, due)
    late = (b.start[1:] - due)[idle]
    return float(np.mean(np.maximum(late, 0))) / 1e6


@dataclass
class ServiceModel:
    """Where service times come from. Parametric: ``forward_ms`` per batch (plus
    ``forward_per_item_ms`` per extra request), ``preprocess_ms`` and ``postprocess_ms`` per
    request, all drawn from ``dist`` (lognormal spread ``cv``). Recorded: ``samples`` of each
    component per request and ``forward_by_batch`` {batch size: forward times} from a run."""

    forward_ms: float = field(default=5.0, metadata=flag(
        "--service-ms", "Mean time (ms) one batch spends in the model's forward pass.",
        commands=SIMULATE, group=SERVICE, type="float", unset=True, default_text="5"))
    forward_per_item_ms: float = 0.0
    #: the serving machinery's own fixed costs, for predicting a real server: ``network_ms``
    #: per request (both directions together) and ``turnaround_ms`` per batch (the replica's
    #: bookkeeping between batches). Zero by default (an ideal server); the in-process engine
    #: measures about 0.1 ms and 0.05 ms (bench/bench_engine_overhead.py).
    network_ms: float = 0.0
    turnaround_ms: float = 0.0
    #: the replica's wake-up: how late an idle replica starts a batch that is due
    #: (``measured_wakeup_ms``); zero by default, as for an ideal server
    wakeup_ms: float = 0.0
    #: the load generator's own gap between intended and actual send (``overhead``) per request
    lag_ms: float = 0.0
    preprocess_ms: float = 0.0
    postprocess_ms: float = 0.0
    dist: str = field(default="exponential", metadata=flag(
        "--service-dist", "Forward-time distribution: constant, exponential or lognormal. "
        "Variable service times queue far more than constant ones at the same utilisation.",
        commands=SIMULATE, group=SERVICE, unset=True, default_text="exponential"))
    cv: float = field(default=1.0, metadata=flag(
        "--service-cv", "Lognormal spread: the forward time's standard deviation ÷ its mean "
        "(coefficient of variation).", commands=SIMULATE, group=SERVICE, type="float",
        unset=True, default_text="1"))
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    forward_by_batch: dict[int, np.ndarray] = field(default_factory=dict)
    #: replay: the forward time of the k-th batch is ``forward_trace_ms[k]`` (cycled) — the
    #: measured sequence of a run, to check the simulation's mechanics free of sampling luck
    forward_trace_ms: np.ndarray | None = None

    @classmethod
    def from_rows(cls, rows: np.ndarray, batch_size: int = 1,
                  max_batch_delay_ms: float = 0.0) -> ServiceModel:
        """Resample a recorded run: per-request components and per-batch-size forward times;
        the replica's turnaround and wake-up measured (the run's batching, to know when an
        idle replica's batch was due)."""
        ok = rows[(rows["status"] == STATUS_OK) & ~rows["warmup"]]
        if len(ok) == 0:
            raise ValueError("the recorded run has no successful measured requests")
        comps = component_ns(ok)
        first = np.unique(ok["batch_id"], return_index=True)[1]
        sizes = ok["batch_size"][first]
        fwd = comps["forward"][first] / 1e6
        keep = ("preprocess", "postprocess", "network", "overhead")
        return cls(samples={k: comps[k] / 1e6 for k in keep},
                   forward_by_batch={int(s): fwd[sizes == s] for s in np.unique(sizes)},
                   turnaround_ms=measured_turnaround_ms(rows),
                   wakeup_ms=measured_wakeup_ms(rows, batch_size, max_batch_delay_ms))

    def checked(self) -> ServiceModel:
        """Itself, after checking the parametric values a caller sets: ConfigError (one line,
        naming the CLI's flag) for a distribution or a time the simulator cannot draw."""
        if self.dist not in DISTS:
            raise ConfigError(f"--service-dist must be one of: {', '.join(DISTS)}")
        for name, value in (("service-ms", self.forward_ms), ("service-cv", self.cv)):
            if not _real(value) or not 0 < value < 1e7:
                raise ConfigError(f"--{name} must be > 0 (got {value!r})")
        for name in ("forward_per_item_ms", "preprocess_ms", "postprocess_ms", "network_ms",
                     "turnaround_ms", "wakeup_ms", "lag_ms"):
            value = getattr(self, name)
            if not _real(value) or not 0 <= value < 1e7:
                raise ConfigError(f"{name} must be >= 0 (got {value!r})")
        return self

    def mean_service_ms(self, batch: int = 1) -> float:
        """Mean replica busy time for a batch of ``batch`` (forward + its postprocessing)."""
        if self.forward_by_batch:
            fwd = float(np.mean(self._forward_pool(batch)))
            post = float(np.mean(self.samples["postprocess"])) * batch
            return fwd + post + self.turnaround_ms
        return (self.forward_ms + self.forward_per_item_ms * (batch - 1)
                + self.postprocess_ms * batch + self.turnaround_ms)

    def mean_preprocess_ms(self) -> float:
        if self.samples:
            return float(np.mean(self.samples["preprocess"]))
        return self.preprocess_ms

    def forward_draws(self, rng: np.random.Generator, n: int) -> list[float]:
        """The draws of ``n`` batches' forward passes, in the order they run (plain floats:
        the simulators' loops are scalar work): a measured trace's times (cycled), uniform
        draws into the recorded pools, or the parametric base time."""
        if self.forward_trace_ms is not None:
            return np.resize(np.asarray(self.forward_trace_ms, dtype=float), n).tolist()
        if self.forward_by_batch:
            return rng.random(n).tolist()
        return self.draw(rng, self.forward_ms, n).tolist()

    def batch_forward_ms(self, draw: float, size: int) -> float:
        """The forward time of a batch of ``size`` from its draw (``forward_draws``): that
        quantile of the recorded pool of its size, or the draw plus the per-item cost."""
        if self.forward_by_batch and self.forward_trace_ms is None:
            pool = self._forward_pool(size)
            return float(pool[int(draw * len(pool))])
        return draw + self.forward_per_item_ms * (size - 1)

    def _forward_pool(self, batch: int) -> np.ndarray:
        if batch in self.forward_by_batch:
            return self.forward_by_batch[batch]
        nearest = min(self.forward_by_batch, key=lambda s: abs(s - batch))
        return self.forward_by_batch[nearest] * batch / nearest  # scaled, clearly an estimate

    def draw(self, rng: np.random.Generator, mean: float, n: int) -> np.ndarray:
        if mean <= 0:
            return np.zeros(n)
        if self.dist == "constant":
            return np.full(n, mean)
        if self.dist == "exponential":
            return rng.exponential(mean, n)
        sigma = np.sqrt(np.log(1 + self.cv ** 2))
        return rng.lognormal(np.log(mean) - sigma ** 2 / 2, sigma, n)


def _real(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and bool(np.isfinite(value)))


@dataclass
class RequestDraws:
    """The random part of ``n`` requests, one stream per quantity (``streams`` seeded from
    one seed): a run of n requests begins with exactly the draws of a shorter run with the
    same seed — common random numbers across lengths and rates, in both simulators."""

    arrivals: np.random.Generator
    forward: np.random.Generator
    pre: np.ndarray
    post: np.ndarray
    net: np.ndarray
    lag: np.ndarray


def request_draws(service: ServiceModel, n: int, seed: int) -> RequestDraws:
    """Per-request preprocess, postprocess, network and send-lag times (ms) of ``n``
    requests — resampled from a recording, or drawn from the parametric model — and the
    generators of the arrivals and the forward passes."""
    arr, pre_g, post_g, net_g, lag_g, fwd = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(6))
    if service.samples:
        pre = pre_g.choice(service.samples["preprocess"], n)
        post = post_g.choice(service.samples["postprocess"], n)
        net = net_g.choice(service.samples["network"], n)
        lag = (lag_g.choice(service.samples["overhead"], n) if "overhead" in service.samples
               else np.zeros(n))
    else:
        pre = service.draw(pre_g, service.preprocess_ms, n)
        post = service.draw(post_g, service.postprocess_ms, n)
        net, lag = np.full(n, service.network_ms), np.full(n, service.lag_ms)
    return RequestDraws(arr, fwd, pre, post, net, lag)
