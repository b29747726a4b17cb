"""Run configuration: one dataclass, validated before anything runs.

Validation happens in the caller's process, before a run process is spawned, so bad input costs
nothing and fails with one line (``ConfigError``). Device and dtype checks need torch, which is
cheap to ask; model-args are checked against the pipeline's declared ``ModelArg`` list.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_DURATION_S = 3600.0
MAX_REQUESTS = 10_000_000
MAX_CONCURRENCY = 1024
MAX_RATE = 100_000.0
MAX_REPLICAS = 64
MAX_THREADS = 256
MAX_BATCH = 4096
MAX_DELAY_MS = 10_000.0
ARRIVALS = ("poisson", "constant")


class ConfigError(ValueError):
    """A setting that cannot run; the message is one line meant for the user."""


@dataclass
class RunConfig:
    """Everything that defines a profiling run. Times are in the unit their name says."""

    model: str = "synthetic"
    model_args: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    dtype: str = "float32"
    batch_size: int = 1
    max_batch_delay_ms: float = 0.0
    replicas: int = 1
    threads: int = 1
    preprocess_workers: int = 4
    concurrency: int | None = None  # closed loop: number of clients
    rate: float | None = None  # open loop: requests per second
    arrival: str = "poisson"
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 20
    seed: int = 0
    input_pool: int = 64
    # ---- transport (latency.transport): in-process, or real HTTP to our server or a target
    transport: str = "in-process"  # in-process | http
    payload: str = "json"  # json (OIP v2 JSON) | raw (the input's bytes as the body)
    target: str | None = None  # profile this OIP v2 endpoint instead of starting a server
    bodies: str | None = None  # JSON-lines file of request bodies to send as they are
    net_rtt_ms: float = 0.0  # EMULATED WAN (latency.transport.wan)
    net_jitter_ms: float = 0.0
    net_bandwidth_mbps: float | None = None
    max_body_mb: float = 32.0  # our server's request body limit (413 above it)
    #: optimisation levers (latency.optimize.LEVERS) and the pre/postprocess variants
    optimize: list[str] = field(default_factory=list)
    pre: str = "fast"
    post: str = "fast"

    @property
    def mode(self) -> str:
        return "open" if self.rate is not None else "closed"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mode"] = self.mode
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunConfig":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    def validated(self) -> "RunConfig":
        """Check every setting; return a copy with defaults resolved. Raises ConfigError."""
        from latency.devices import check_device_dtype
        from latency.pipeline import PipelineError
        from latency.registry import parse_model_args, pipeline_class

        c = RunConfig(**asdict(self))
        positive_int("batch-size", c.batch_size, MAX_BATCH)
        positive_int("replicas", c.replicas, MAX_REPLICAS)
        positive_int("threads", c.threads, MAX_THREADS)
        positive_int("preprocess-workers", c.preprocess_workers, MAX_THREADS)
        positive_int("input-pool", c.input_pool, 100_000)
        if not 0 <= c.max_batch_delay_ms <= MAX_DELAY_MS:
            raise ConfigError(f"--max-batch-delay-ms must be between 0 and {MAX_DELAY_MS:g}")
        if c.warmup < 0:
            raise ConfigError("--warmup must be >= 0")
        if c.concurrency is not None and c.rate is not None:
            raise ConfigError("choose one load: --concurrency (closed loop) or --rate (open loop)")
        if c.rate is not None:
            if not (c.rate > 0 and c.rate <= MAX_RATE):
                raise ConfigError(f"--rate must be > 0 and <= {MAX_RATE:g} requests/s")
            if c.arrival not in ARRIVALS:
                raise ConfigError(f"--arrival must be one of: {', '.join(ARRIVALS)}")
        else:
            c.concurrency = 1 if c.concurrency is None else c.concurrency
            positive_int("concurrency", c.concurrency, MAX_CONCURRENCY)
        if c.requests is not None and c.duration_s is not None:
            raise ConfigError("choose one length: --requests or --duration")
        if c.requests is None and c.duration_s is None:
            c.requests = 1000
        if c.requests is not None:
            positive_int("requests", c.requests, MAX_REQUESTS)
        if c.duration_s is not None and not 0 < c.duration_s <= MAX_DURATION_S:
            raise ConfigError(f"--duration must be > 0 and <= {MAX_DURATION_S:g} s")
        from latency.transport.settings import check_transport

        check_transport(c)
        if c.target is not None and c.bodies is not None:
            return c  # a remote model: nothing of ours is built, bodies are sent as they are
        try:
            pipeline_class(c.model)
            c.model_args = parse_model_args(c.model, c.model_args)
            pipeline_class(c.model).check_args(c.model_args)
        except (PipelineError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        check_device_dtype(c.device, c.dtype, pipeline_class(c.model).dtypes)
        from latency.optimize import LeverError, check, parse_levers
        try:
            c.optimize = parse_levers(c.optimize)
            check(c.model, c.optimize, c.device, c.dtype, c.pre, c.post)
        except LeverError as exc:
            raise ConfigError(str(exc)) from None
        return c

    def oversubscribed(self) -> bool:
        """More intra-op threads across replicas than the machine has cores."""
        return self.replicas * self.threads > usable_cores()


def positive_int(flag: str, value: Any, limit: int) -> None:
    """ConfigError unless ``value`` is a whole number from 1 to ``limit``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"--{flag} must be a whole number >= 1 (got {value!r})")
    if value > limit:
        raise ConfigError(f"--{flag} must be <= {limit} (got {value})")


def usable_cores() -> int:
    """Cores this process may run on (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1
