"""A run's timings: when it measured, and what its phases cost, as one typed value.

The engine, its backends and the server each add what they measured; the summary, the series
and the history read it back. As a dataclass a misspelt field fails where it is written, not
later as a silent ``None``. ``to_dict()`` is the ``timings`` object of a run's JSON and of the
history, key for key as before: a field never set is absent, and a key this version does not
know (a newer server's) is kept in ``extra`` and written back.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

#: fields whose key is written even when their value is None, once set (``server_counted``)
_SERVER_KEYS = ("server_responses", "server_errors")


@dataclass
class Timings:
    """Clocks in ns (``perf_counter_ns``, system-wide on Linux), durations in s."""

    #: measuring started and ended (warm-up excluded)
    measure_start_ns: int | None = None
    measure_end_ns: int | None = None
    #: CPU the run's process used while measuring (HTTP: the client's)
    measure_cpu_s: float | None = None
    warmup_s: float | None = None
    #: how long the run waited for another run to free the machine (over 0.5 s only)
    waited_for_machine_s: float | None = None
    #: open loop: requests the generator offered, and the span of their intended times
    offered_requests: int | None = None
    offered_span_s: float | None = None
    #: open loop: requests dropped by overload
    dropped_overload: int | None = None
    #: stopped: requests still waiting that were dropped unserved
    cancelled_requests: int | None = None
    #: building what serves: our HTTP server's start, the pipeline's load, the levers
    server_start_s: float | None = None
    model_load_s: float | None = None
    optimize_s: float | None = None
    #: Ray Serve: starting Ray, deploying the app
    ray_start_s: float | None = None
    deploy_s: float | None = None
    #: what our HTTP server answered during the run, by status, and how many were errors
    server_responses: dict[str, int] | None = None
    server_errors: int | None = None
    #: HTTP: measured, successful replies whose Server-Timing header was sent but unusable
    #: (negative, non-finite, malformed, longer than the client's time), by why (keys of
    #: ``latency.analysis.transport_summary.UNUSABLE_WHY``); absent when none was
    server_timing_unusable: dict[str, int] | None = None
    #: the server's counters were asked (``server_responses`` None: a remote server without
    #: our /metrics)
    server_counted: bool = False
    #: keys this version does not know, kept as they came
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:  # the fields that were set, as the JSON has them
        return "Timings(" + ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items()) + ")"

    def update(self, values: Mapping[str, Any]) -> None:
        """Take what another part measured (a server's ``ready`` timings, a stored dict)."""
        known = _known()
        for key, value in values.items():
            if key in _SERVER_KEYS:
                self.server_counted = True
            if key in known:
                setattr(self, key, value)
            else:
                self.extra[key] = value

    def count_server(self, responses: dict[str, int] | None, errors: int | None) -> None:
        """Record what our server answered (None, None: a server that cannot say)."""
        self.server_responses, self.server_errors = responses, errors
        self.server_counted = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in _known():
            value = getattr(self, name)
            if name == "server_responses" and self.server_counted:
                out[name] = value
            elif name == "server_errors" and self.server_counted and (
                    value is not None or self.server_responses is not None):
                out[name] = value
            elif value is not None and name not in _SERVER_KEYS:
                out[name] = value
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Timings:
        """Timings as stored (a run's JSON, the history), from any earlier version."""
        t = cls()
        t.update(d or {})
        return t


def _known() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Timings) if f.name not in ("server_counted", "extra"))
