"""Full validation of a RunConfig: its values, then what needs the rest of the system.

``RunConfig.checked()`` (core) checks ranges and choices. This adds what only the upper stages
know: the pipeline exists and accepts these model-args, this machine has the device and can run
the dtype, the levers apply to this pipeline, and a ``--bodies`` file is readable. Everything
fails here, in the caller's process, before a run process is spawned: one line, nothing run.
"""
from __future__ import annotations

from latency.core.config import RunConfig
from latency.core.errors import ConfigError, PipelineError
from latency.core.optimization import LeverError, parse_levers
from latency.host.devices import check_device_dtype
from latency.load.bodies import load_bodies
from latency.pipelines.levers import check
from latency.pipelines.registry import parse_model_args, pipeline_class


def validated(config: RunConfig) -> RunConfig:
    """A checked copy of ``config`` with defaults and model-args resolved; ConfigError if it
    cannot run here."""
    c = config.checked()
    if c.bodies is not None:
        load_bodies(c.bodies)  # fails here, before anything runs
    if c.remote_model:
        return c  # a remote model: nothing of ours is built, bodies are sent as they are
    try:
        cls = pipeline_class(c.model)
        c.model_args = parse_model_args(c.model, c.model_args)
        cls.check_args(c.model_args)
    except (PipelineError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    check_device_dtype(c.device, c.dtype, cls.dtypes)
    try:
        c.optimize = parse_levers(c.optimize)
        check(c.model, c.optimize, c.device, c.dtype, c.pre, c.post)
    except LeverError as exc:
        raise ConfigError(str(exc)) from None
    return c
