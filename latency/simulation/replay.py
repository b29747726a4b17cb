"""Replaying a recorded run: the simulated system that ran it, with what the caller changes.

One owner for what a replay takes from a run, so the CLI (``simulate --from-run``), the
Python API (``latency.simulate(from_run=...)``) and the Load Simulator page build the same
``SimConfig`` from the same run: its rate (from its own send times), its closed loop of
clients when it was one (open-loop arrivals at a saturated closed loop's throughput would run
its server at ρ ≈ 1 and call it unstable), its replicas, batching and preprocess workers (a
batch-8 run must not replay as batch 1).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from latency.core.errors import ConfigError
from latency.simulation.calibration import recorded_arrivals
from latency.simulation.config import SimConfig

#: the recorded server's settings a replay keeps unless told otherwise
REPLAYED = ("replicas", "batch_size", "max_batch_delay_ms", "preprocess_workers")
_FIELDS = {f.name for f in fields(SimConfig)}


@dataclass(frozen=True)
class Recording:
    """A recorded run as a replay needs it: its request rows and the setup it ran with (a
    ``RunConfig``, or a run file's config as a dict; empty for a CSV, which has none). A
    ``RunResult`` has the same two attributes and may be given instead."""

    log: np.ndarray
    config: Any = None


def recorded_setting(config: Any, key: str) -> Any:
    """One setting of a recorded run's config, whether a dict (a run file) or a RunConfig;
    None when it was not recorded."""
    if config is None:
        return None
    if isinstance(config, Mapping):
        return config.get(key)
    return getattr(config, key, None)


def recorded_batching(run: Any) -> tuple[int, float]:
    """The batch size and batch delay (ms) ``run`` (a RunResult or a ``Recording``) ran
    with — no batching when they were not recorded — to know when its batches were due."""
    size = recorded_setting(run.config, "batch_size")
    delay = recorded_setting(run.config, "max_batch_delay_ms")
    return int(size or 1), float(delay or 0.0)


def replay_config(run: Any, **overrides: Any) -> SimConfig:
    """The checked SimConfig that replays ``run`` (a RunResult or a ``Recording``): its rate
    (or, for a closed-loop run, its clients), its replicas, batching and preprocess workers,
    and its send times for ``arrival="recorded"``. ``overrides``: any SimConfig field; None
    means "as recorded". ``arrival="recorded"`` always replays the run's own rate. ConfigError
    (one line) for a setting that cannot run or a run that cannot be replayed."""
    unknown = sorted(set(overrides) - _FIELDS)
    if unknown:
        raise ConfigError(f"unknown simulation setting(s): {', '.join(unknown)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    if "clients" in given and "rate" in given:
        raise ConfigError("clients (a closed loop) and rate (arrivals) exclude each other: "
                          "choose one")
    try:
        times, recorded_rate = recorded_arrivals(run.log)
    except ValueError as exc:
        raise ConfigError(f"the recorded run cannot be replayed: {exc}") from None
    arrival = given.get("arrival", "poisson")
    concurrency = recorded_setting(run.config, "concurrency")
    if ("clients" not in given and "rate" not in given and arrival != "recorded"
            and concurrency and not recorded_setting(run.config, "rate")):
        given["clients"] = int(concurrency)
    if "rate" not in given or arrival == "recorded":
        given["rate"] = recorded_rate
    for key in REPLAYED:
        value = recorded_setting(run.config, key)
        if key not in given and value is not None:
            given[key] = value
    given.setdefault("arrival_times_ms", times)
    return SimConfig(**given).checked()
