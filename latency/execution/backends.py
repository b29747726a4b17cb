"""Where a run's requests are served: in this process, or over HTTP (our server in its own
process, or a remote target). Both keep one protocol, so the engine drives either the same way.

    backend = backend_for(config)
    inputs = backend.inputs()                      # the raw inputs to cycle through
    transport = backend.start(timings, env, on_phase)
    ...                                            # the load generator sends through it
    backend.abandon()                              # on Stop: drop what has not started
    backend.close(timings, warnings)
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.execution.http_backend import HttpBackend
from latency.loadgen.inprocess import InProcessTransport
from latency.loadgen.transport import Transport
from latency.pipelines.contract import Pipeline
from latency.pipelines.inputs import read_inputs
from latency.serve.builder import BuiltServer, build_server


class Backend(Protocol):
    def inputs(self) -> list[Any]: ...

    def start(self, timings: Timings, env: dict[str, Any],
              on_phase: Callable[[str], None] | None = None) -> Transport: ...

    def begin_measuring(self) -> None: ...

    def abandon(self) -> None: ...

    def close(self, timings: Timings, warnings: list[str]) -> None: ...


class InProcessBackend:
    """The server (``latency.serve.builder``) in this process, behind a thread hand-off."""

    def __init__(self, config: RunConfig, pipeline: Pipeline | None = None) -> None:
        self.config = config
        self.pipeline = pipeline  # a pipeline already built by the caller (latency.profile)
        self.built: BuiltServer | None = None
        self._env: dict[str, Any] | None = None

    def start(self, timings: Timings, env: dict[str, Any],
              on_phase: Callable[[str], None] | None = None) -> Transport:
        self._env = env
        self.built = build_server(self.config, on_phase, pipeline=self.pipeline)
        timings.update(self.built.timings)
        if self.built.optimization is not None:
            env["optimization"] = self.built.optimization.to_dict()
        return InProcessTransport(self.built.server.submit)

    def inputs(self) -> list[Any]:
        """``--inputs``, else the pipeline's own sample inputs (call after ``start``)."""
        assert self.built is not None, "start the backend first"
        c = self.config
        if c.inputs is not None:
            return read_inputs(c.inputs, c.input_order, c.seed)
        return self.built.pipeline.sample_inputs(c.input_pool, c.seed)

    def begin_measuring(self) -> None:
        """Nothing to mark: in-process every request is a row of the log."""

    def abandon(self) -> None:
        if self.built is not None:
            self.built.server.abandon_waiting()

    def close(self, timings: Timings, warnings: list[str]) -> None:
        if self.built is not None:
            self.built.server.stop()
            stages = self.built.server.clock.means()
            if stages and self._env is not None:  # each stage's wall time against its CPU time
                self._env["cpu_wait"] = stages


def backend_for(config: RunConfig, pipeline: Pipeline | None = None
                ) -> InProcessBackend | HttpBackend:
    """Where ``config`` (validated: a pipeline object is never served over HTTP) is served;
    ``pipeline``: a pipeline object the caller built."""
    if config.transport == "http":
        return HttpBackend(config)
    return InProcessBackend(config, pipeline)


__all__ = ["Backend", "HttpBackend", "InProcessBackend", "backend_for"]
