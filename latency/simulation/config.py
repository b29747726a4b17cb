"""The simulated system's settings: one dataclass whose values check themselves, and the
settings a generation simulation changes from its recorded run.

Every surface that simulates — ``python -m latency simulate``, ``latency.simulate`` and the
Load Simulator page — builds a ``SimConfig`` and calls ``checked()``, so a setting the CLI
refuses is refused everywhere, with the same one line (``ConfigError``, naming the setting).

``GenSimSettings`` are a generation simulation's: the scheduler's, the lengths, the objectives
and the what-if scales — ``simulate``'s flags (their metadata), each meaning what the run's
flag of the same name means (its help is that field's), and None meaning "as the recorded run
had it".
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from latency.core.config import (
    BATCHING,
    LOAD,
    MAX_BATCH,
    MAX_REQUESTS,
    MAX_SEED,
    MIN_RATE,
    SERVER,
    field_help,
)
from latency.core.describe import load_words
from latency.core.errors import ConfigError
from latency.core.flags import flag, flags_of
from latency.simulation.service import SIMULATE, ServiceModel

ARRIVALS = ("poisson", "constant", "bursty", "recorded")
#: a simulation needs no machine, so its ceilings are those of its own cost, not a server's
MAX_SIM_RATE = 1e6
MAX_SIM_REPLICAS = 1024
MAX_SIM_WORKERS = 1024
MAX_SIM_CLIENTS = 100_000
MAX_SIM_DELAY_MS = 1e5

__all__ = ["ARRIVALS", "GEN_SETTINGS", "SIMULATE", "GenSimSettings", "SimConfig", "setting_help"]


@dataclass
class SimConfig:
    """The simulated load and server: open-loop arrivals at ``rate`` (or a closed loop of
    ``clients``), the replicas, the batching and the preprocess worker pool; how many
    requests, with which seed."""

    rate: float = field(metadata=flag(
        "--rate", "Open loop: arrivals per second (their mean).", commands=SIMULATE,
        group=LOAD, type="float", unset=True,
        default_text="the --from-run run's; required without --from-run or --clients"))
    replicas: int = field(default=1, metadata=flag(
        "--replicas", field_help("replicas"), commands=SIMULATE, group=SERVER, type="int",
        unset=True, default_text="the --from-run run's, else 1"))
    batch_size: int = field(default=1, metadata=flag(
        "--batch-size", field_help("batch_size"), commands=SIMULATE, group=SERVER, type="int",
        unset=True, default_text="the --from-run run's, else 1"))
    max_batch_delay_ms: float = field(default=0.0, metadata=flag(
        "--max-batch-delay-ms", field_help("max_batch_delay_ms"), commands=SIMULATE,
        group=SERVER, type="float", unset=True, default_text="the --from-run run's, else 0"))
    arrival: str = field(default="poisson", metadata=flag(
        "--arrival", "Arrivals: poisson (independent, the usual model of many users), "
        "constant (evenly spaced), bursty (Poisson at twice the rate for a second, then none "
        "for a second: the same mean rate, far longer queues) or recorded (a recorded run's "
        "own arrival times, replayed).", commands=SIMULATE, group=LOAD, unset=True,
        default_text="poisson; a generation run's own kind"))
    requests: int = field(default=100_000, metadata=flag(
        "--requests", "Simulated requests.", commands=SIMULATE, group=LOAD, type="int",
        unset=True, default_text="100,000; a generation run's own measured count"))
    seed: int = field(default=0, metadata=flag(
        "--seed", field_help("seed"), commands=SIMULATE, group=LOAD, type="int"))
    warmup_fraction: float = 0.1  # the transient from an empty system, dropped
    burst_on_s: float = 1.0  # bursty arrivals: on at 2× rate for this long, then off as long
    allow_unstable: bool = True
    #: the server's preprocess worker pool: requests wait FIFO for one of this many workers
    #: (the engine's ``preprocess_workers``); None = unlimited (preprocessing never queues)
    preprocess_workers: int | None = field(default=None, metadata=flag(
        "--preprocess-workers", field_help("preprocess_workers") + " Requests wait for a free "
        "one.", commands=SIMULATE, group=SERVER, type="int", unset=True,
        default_text="the --from-run run's, else unlimited"))
    #: ``arrival="recorded"``: arrival times (ms from the start) of a recorded run, replayed
    #: (cycled with the run's length as the period when more requests are asked for)
    arrival_times_ms: np.ndarray | None = None
    #: a closed loop of this many clients instead of arrivals (``rate`` and ``arrival`` are
    #: then ignored: the rate is an outcome; ``latency.simulation.closed_loop``)
    clients: int | None = field(default=None, metadata=flag(
        "--clients", "Closed loop: this many clients, each asking again when answered (the "
        "rate is then an outcome).", commands=SIMULATE, group=LOAD, type="int", unset=True,
        default_text="a closed-loop --from-run run's own clients, unless --rate is given"))

    def checked(self) -> SimConfig:
        """A copy, after checking every value: ConfigError (one line, naming the setting as
        the CLI's flag) for a value the simulator cannot run or would run for hours."""
        c = replace(self)
        _whole("replicas", c.replicas, MAX_SIM_REPLICAS)
        _whole("batch-size", c.batch_size, MAX_BATCH)
        _whole("requests", c.requests, MAX_REQUESTS)
        if c.preprocess_workers is not None:
            _whole("preprocess-workers", c.preprocess_workers, MAX_SIM_WORKERS)
        if c.clients is not None:
            _whole("clients", c.clients, MAX_SIM_CLIENTS)
        if not finite_number(c.rate) or not MIN_RATE <= c.rate <= MAX_SIM_RATE:
            raise ConfigError(f"--rate must be from {MIN_RATE:g} to {MAX_SIM_RATE:.0f} "
                              f"requests/s (got {c.rate!r})")
        if not finite_number(c.max_batch_delay_ms) or not 0 <= c.max_batch_delay_ms <= \
                MAX_SIM_DELAY_MS:
            raise ConfigError(f"--max-batch-delay-ms must be between 0 and "
                              f"{MAX_SIM_DELAY_MS:.0f} (got {c.max_batch_delay_ms!r})")
        if c.arrival not in ARRIVALS:
            raise ConfigError(f"--arrival must be one of: {', '.join(ARRIVALS)}")
        if c.arrival == "recorded" and (c.arrival_times_ms is None
                                        or len(c.arrival_times_ms) < 2):
            raise ConfigError("--arrival recorded needs a recorded run's arrival times "
                              "(--from-run RUN)")
        if not isinstance(c.seed, numbers.Integral) or isinstance(c.seed, bool) \
                or not 0 <= c.seed <= MAX_SEED:
            raise ConfigError(f"--seed must be a whole number from 0 to {MAX_SEED} "
                              f"(got {c.seed!r})")
        if not finite_number(c.warmup_fraction) or not 0 <= c.warmup_fraction < 1:
            raise ConfigError(f"warmup_fraction must be from 0 to below 1 "
                              f"(got {c.warmup_fraction!r})")
        if not finite_number(c.burst_on_s) or not 0 < c.burst_on_s <= 3600:
            raise ConfigError(f"burst_on_s must be > 0 and <= 3600 (got {c.burst_on_s!r})")
        return c

    def describe(self) -> str:
        """The simulated load and server in one line, as the CLI's header and the page's
        caption print it (the same words for the same setting; the load worded as a measured
        run's, ``load_words``)."""
        load = load_words(None if self.clients else self.rate, self.arrival, self.clients)
        return (f"{load}, {self.replicas} replica(s), batch ≤ {self.batch_size} / "
                f"{self.max_batch_delay_ms:g} ms, {self.preprocess_workers or 'unlimited'} "
                "preprocess worker(s)")

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON values (recorded arrival times as their count)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        times = d.pop("arrival_times_ms")
        d["recorded_arrivals"] = None if times is None else len(times)
        return d


def finite_number(value: Any) -> bool:
    """A real number a setting can hold: finite, and not a bool (which Python counts as 0/1)."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def _whole(flag: str, value: Any, limit: int) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or int(value) < 1:
        raise ConfigError(f"--{flag} must be a whole number >= 1 (got {value!r})")
    if int(value) > limit:
        raise ConfigError(f"--{flag} must be <= {limit} (got {value})")


def setting_help(name: str) -> str:
    """What a simulated setting means — a ``SimConfig``, parametric ``ServiceModel`` or
    generation ``GenSimSettings`` field —
    as ``simulate --help`` says it and the Load Simulator's tooltips show it. Where a
    setting means what a RunConfig field means, its help is that field's."""
    return {**flags_of(ServiceModel), **flags_of(SimConfig),
            **flags_of(GenSimSettings)}[name].help


#: the help section of these flags in ``simulate --help``
GEN_SIM = "generation (with --from-run of a generation run)"
AS_RECORDED = "the --from-run run's"


def _as_run(name: str, **kw: Any) -> dict[str, Any]:
    """A flag meaning what RunConfig's ``name`` means, unset meaning as recorded."""
    kw.setdefault("default_text", AS_RECORDED)
    return flag("--" + name.replace("_", "-"), field_help(name), commands=SIMULATE,
                group=GEN_SIM, unset=True, **kw)


@dataclass(frozen=True)
class GenSimSettings:
    """What a generation simulation changes from its recorded run (the module docstring)."""

    prompt_tokens: str | None = field(default=None, metadata=_as_run(
        "prompt_tokens", metavar="SPEC", default_text="the run's requests' own lengths"))
    output_tokens: str | None = field(default=None, metadata=_as_run(
        "output_tokens", metavar="SPEC", default_text="the run's requests' own lengths"))
    max_running: int | None = field(default=None, metadata=_as_run("max_running", type="int"))
    max_step_tokens: int | None = field(default=None, metadata=_as_run(
        "max_step_tokens", type="int"))
    chunked_prefill: int | None = field(default=None, metadata=_as_run(
        "chunked_prefill", type="int", metavar="N",
        default_text=AS_RECORDED + "; 0 turns it off"))
    kv_tokens: int | None = field(default=None, metadata=_as_run(
        "kv_tokens", type="int", metavar="N"))
    batching: str | None = field(default=None, metadata=_as_run("batching", choices=BATCHING))
    slo: str | None = field(default=None, metadata=_as_run("slo", metavar="PRESET"))
    slo_ttft_ms: float | None = field(default=None, metadata=_as_run(
        "slo_ttft_ms", type="float", metavar="MS"))
    slo_tpot_ms: float | None = field(default=None, metadata=_as_run(
        "slo_tpot_ms", type="float", metavar="MS"))
    slo_e2e_ms: float | None = field(default=None, metadata=_as_run(
        "slo_e2e_ms", type="float", metavar="MS"))
    decode_scale: float | None = field(default=None, metadata=flag(
        "--decode-scale", "What if: every decode call takes this many times the fitted time "
        "(0.6: a 40 %% faster decode step).".replace("%%", "%"), commands=SIMULATE,
        group=GEN_SIM, type="float", unset=True, default_text="1"))
    prefill_scale: float | None = field(default=None, metadata=flag(
        "--prefill-scale", "What if: every prefill call takes this many times the fitted "
        "time.", commands=SIMULATE, group=GEN_SIM, type="float", unset=True,
        default_text="1"))


#: the generation settings, by name: what ``simulate`` refuses without a generation run
GEN_SETTINGS: tuple[str, ...] = tuple(f.name for f in fields(GenSimSettings))
