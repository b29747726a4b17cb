"""What a ``timing`` test says when it fails: the machine while it measured.

A ``timing`` test (pytest.ini) compares real time with an expectation: stage times measured
back, a queue against theory, how fast something runs. On a busy machine such a comparison can
fail for a reason outside the code under test, so each numeric assert of those tests carries
the machine's own record of the measurement in its message — a failure then says "other
processes used 1.3 of 2 cores" (look at the machine) or "quiet" (look at the code):

    assert measured == pytest.approx(theory, rel=0.2), (measured, theory, machine_note(r))

``machine_note(result)`` reads what every run samples (``result.environment["disturbance"]``,
``latency.host.disturbance``); for timing code that is not a run, ``watched()`` samples the
machine around it with the same sampler.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from latency.analysis.summary_text import machine_line
from latency.analysis.validity import disturbance_of, machine_reasons


def _environment(result: Any) -> dict[str, Any] | None:
    """A RunResult's environment, a run's JSON (a dict with ``environment``) or an
    environment itself (a dict with ``disturbance``)."""
    if isinstance(result, dict):
        if "disturbance" in result:
            return result
        env = result.get("environment")
        return env if isinstance(env, dict) else None
    env = getattr(result, "environment", None)
    return env if isinstance(env, dict) else None


def machine_note(result: Any) -> str:
    """The machine while ``result`` measured, in one line (the summary's ``machine while
    measuring`` line), then DISTURBED with what disturbed it — or quiet."""
    env = _environment(result)
    line = machine_line(env) or "machine while measuring: not sampled"
    d = disturbance_of(env)
    reasons = machine_reasons(d) if d is not None else []
    return line + (" — DISTURBED: " + "; ".join(reasons) if reasons else " — quiet machine")


class Watch:
    """The machine sampled around a piece of timed code (``watched()``)."""

    def __init__(self) -> None:
        from latency.host.disturbance import DisturbanceSampler

        self._sampler = DisturbanceSampler(period_s=0.5).start()
        self._summary: dict[str, Any] | None = None

    def stop(self) -> dict[str, Any]:
        if self._summary is None:
            self._summary = self._sampler.stop()
        return self._summary

    def note(self) -> str:
        """``machine_note`` of what was sampled (stops the sampling, if still on)."""
        return machine_note({"disturbance": self.stop()})


@contextlib.contextmanager
def watched() -> Iterator[Watch]:
    """``with watched() as machine: …timed code…; assert fast, machine.note()``."""
    watch = Watch()
    try:
        yield watch
    finally:
        watch.stop()


def batch_se(values: Any, batches: int = 20) -> float:
    """The standard error of the mean of ``values`` (in time order) by batch means: the
    spread of the means of ``batches`` consecutive stretches over √batches — the error of a
    queue's mean wait, whose requests are not independent (each waits behind the last)."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    n = len(x) // batches * batches
    if n < batches * 2:
        raise ValueError(f"too few values ({len(x)}) for {batches} batches")
    return float(x[:n].reshape(batches, -1).mean(axis=1).std(ddof=1) / np.sqrt(batches))
