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

from latency.core.config import RunConfig
from latency.load.inprocess import InProcessTransport
from latency.load.transport import Transport
from latency.run.http_backend import HttpBackend
from latency.serve.builder import BuiltServer, build_server


class Backend(Protocol):
    def inputs(self) -> list[Any]: ...

    def start(self, timings: dict[str, Any], env: dict[str, Any],
              on_phase: Callable[[str], None] | None = None) -> Transport: ...

    def abandon(self) -> None: ...

    def close(self, timings: dict[str, Any], warnings: list[str]) -> None: ...


class InProcessBackend:
    """The server (``latency.serve.builder``) in this process, behind a thread hand-off."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.built: BuiltServer | None = None

    def start(self, timings: dict[str, Any], env: dict[str, Any],
              on_phase: Callable[[str], None] | None = None) -> Transport:
        self.built = build_server(self.config, on_phase)
        timings.update(self.built.timings)
        if self.built.optimization is not None:
            env["optimization"] = self.built.optimization.to_dict()
        return InProcessTransport(self.built.server.submit)

    def inputs(self) -> list[Any]:
        """The pipeline's own sample inputs (call after ``start``)."""
        assert self.built is not None, "start the backend first"
        c = self.config
        return self.built.pipeline.sample_inputs(c.input_pool, c.seed)

    def abandon(self) -> None:
        if self.built is not None:
            self.built.server.abandon_waiting()

    def close(self, timings: dict[str, Any], warnings: list[str]) -> None:
        if self.built is not None:
            self.built.server.stop()


def backend_for(config: RunConfig) -> InProcessBackend | HttpBackend:
    return HttpBackend(config) if config.transport == "http" else InProcessBackend(config)


__all__ = ["Backend", "HttpBackend", "InProcessBackend", "backend_for"]
