"""Property: every offered request is accounted for — offered = answered + failed + dropped —
whatever the pipeline's stages or the target do, under any small load shape.

Hypothesis composes hostile pipelines (each stage: fine, or at a random rate raise, exit,
return the wrong thing, give a short batch, or sleep a little) and hostile loopback targets
(some requests answered, some with unusable Server-Timing, an error status, a dropped
connection, garbage, a slow or a hung reply), under closed loops of 1-4 clients and open loops
at a rate, with small batches and request counts. For every run:

- it completes (a bad stage or reply fails its own request, never the run);
- offered (``--requests``, and for an open loop the generator's own count) = answered +
  failed + dropped;
- every failed request has a non-empty reason;
- a run that failed, dropped or lost requests beyond what ``--max-error-rate`` allows is not
  VALID, and the "every request accounted for" check is VALID only when the counts add up.

Bounded for a busy 2-core CI machine: ``derandomize=True`` (the same examples every time),
``deadline=None``, 40 examples a test (plus a few explicit ones) of runs well under a second
each: ~25 s for the file on a busy 2-core machine. A last test crafts results
whose counts do not add up: the validity check names what is missing.
"""
from __future__ import annotations

import json
import random
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, currently_in_test_context, event, example, given, settings
from hypothesis import strategies as st

from latency.analysis.result import RunResult
from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.core.records import STATUS_ERROR
from latency.execution.engine import execute
from latency.loadgen import generator, http_client
from tests.conftest import QuietHandler, loopback_server
from tests.hostile_pipelines import Base

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

# ---- hostile pipelines, composed ------------------------------------------------------------
#: what each stage may do instead of its job
STAGE_KINDS = {
    "preprocess": ("raise", "exit", "wrong", "sleep"),
    "forward": ("raise", "exit", "wrong", "short", "sleep"),
    "split": ("wrong", "short"),
    "postprocess": ("raise", "exit", "wrong", "sleep"),
}
RATES = (0.05, 0.2, 0.5, 1.0)


class Composed(Base):
    """A pipeline whose every stage misbehaves as told: ``plan`` maps a stage to
    (kind, rate) pairs; each call draws, from one seeded generator, whether it misbehaves."""

    def __init__(self, plan: dict[str, list[tuple[str, float]]], seed: int) -> None:
        super().__init__()
        self.plan = plan
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def _kind(self, stage: str) -> str | None:
        with self._lock:
            for kind, rate in self.plan.get(stage, ()):
                if self._rng.random() < rate:
                    return kind
        return None

    @staticmethod
    def _common(stage: str, kind: str | None) -> None:
        if kind == "raise":
            raise RuntimeError(f"{stage} broke")
        if kind == "exit":
            sys.exit(0)
        if kind == "sleep":
            time.sleep(0.003)

    def preprocess(self, raw: Any) -> Any:
        kind = self._kind("preprocess")
        self._common("preprocess", kind)
        return "not a tensor" if kind == "wrong" else torch.ones(4)

    def forward(self, batch: Any) -> Any:
        kind = self._kind("forward")
        self._common("forward", kind)
        if kind == "wrong":
            return None
        out = self.model(batch)
        return out[:1] if kind == "short" else out

    def split(self, output: Any, n: int) -> Any:
        kind = self._kind("split")
        if kind == "wrong":
            return 42
        items = super().split(output, n)
        return items[:-1] if kind == "short" else items

    def postprocess(self, item: Any) -> Any:
        kind = self._kind("postprocess")
        self._common("postprocess", kind)
        return item if kind == "wrong" else {"y": float(item[0])}


stage_plans = st.fixed_dictionaries({
    stage: st.lists(st.tuples(st.sampled_from(kinds), st.sampled_from(RATES)), max_size=2,
                    unique_by=lambda kr: kr[0])
    for stage, kinds in STAGE_KINDS.items()})


@st.composite
def load_shapes(draw: Any) -> dict[str, Any]:
    """A closed loop of 1-4 clients or an open loop at a rate (a small backlog limit now and
    then, so requests are dropped by overload too), few requests, small batches."""
    shape: dict[str, Any] = {"requests": draw(st.integers(1, 24)),
                             "warmup": draw(st.integers(0, 2)),
                             "seed": draw(st.integers(0, 2**16))}
    if draw(st.booleans()):
        shape["concurrency"] = draw(st.integers(1, 4))
    else:
        shape["rate"] = float(draw(st.sampled_from([50, 200, 1000, 5000])))
        shape["arrival"] = draw(st.sampled_from(["poisson", "constant"]))
        shape["max_backlog"] = draw(st.sampled_from([None, 1, 2, 4]))
        shape["drain_grace_s"] = 0.3
    return shape


# ---- the property ---------------------------------------------------------------------------
def check_accounting(r: RunResult) -> None:
    """offered = answered + failed + dropped; reasons for every failure; no VALID run that
    lost, failed or dropped more than it may."""
    c, s, t = r.config, r.summary, r.timings
    assert r.status == "completed", (r.failure, r.traceback)
    dropped = t.dropped_overload or 0
    answered, failed = s.successful, s.errors
    assert answered + failed == s.requests
    if c.rate is not None:
        assert t.offered_requests == c.requests, (t.offered_requests, c.requests)
    offered = c.requests
    assert answered + failed + dropped == offered, dict(
        offered=offered, answered=answered, failed=failed, dropped=dropped,
        cancelled=t.cancelled_requests)
    assert not t.cancelled_requests  # nothing was stopped
    # every failed request (warm-up included) has a reason
    failed_rows = [i for i in range(len(r.log)) if r.log["status"][i] == STATUS_ERROR]
    assert sorted(r.errors) == failed_rows
    assert all(isinstance(m, str) and m.strip() for m in r.errors.values()), r.errors
    assert sum(s.error_messages.values()) == failed or len(s.error_messages) == 10
    # validity: the accounting check holds here; failures and drops beyond the limit are
    # never VALID
    if currently_in_test_context():  # statistics of what the examples covered
        event(f"{'open' if c.rate else 'closed'} loop; "
              + ", ".join(k for k, n in (("answered", answered), ("failed", failed),
                                         ("dropped", dropped)) if n))
    checks = {ch.name: ch for ch in r.validity.checks}
    assert checks["every request accounted for"].passed, checks["every request accounted for"]
    if r.validity.valid:
        assert dropped == 0 and answered > 0
        assert failed <= c.max_error_rate * s.requests


@given(plan=stage_plans, shape=load_shapes(), batch=st.integers(1, 4),
       delay=st.sampled_from([0.0, 1.0, 3.0]), pseed=st.integers(0, 2**16))
@example(plan={}, shape={"requests": 16, "warmup": 1, "seed": 0, "concurrency": 3}, batch=2,
         delay=1.0, pseed=0)
@SETTINGS
def test_a_hostile_pipeline_loses_no_request(plan, shape, batch, delay, pseed):
    config = RunConfig(batch_size=batch, max_batch_delay_ms=delay, **shape)
    r = execute(config, pipeline=Composed(plan, pseed), who="accounting property")
    check_accounting(r)
    for message in r.summary.error_messages:
        event("stage: " + message.split(":")[0])
    if not any(plan.values()):
        assert r.summary.errors == 0, r.summary.error_messages  # a well-behaved one is fine


# ---- hostile targets ------------------------------------------------------------------------
#: what the target may do with a request instead of answering it well
TARGET_KINDS = ("bad-timing", "no-timing", "status500", "close", "garbage", "slow", "hang")
_RELEASE = threading.Event()


class _Hostile(QuietHandler):
    """Per request, from the current example's plan: answer well (Server-Timing included) or
    misbehave as drawn."""

    protocol_version = "HTTP/1.1"
    plan: list[tuple[str, float]] = []
    rng = random.Random(0)
    lock = threading.Lock()

    def _draw(self) -> str | None:
        cls = type(self)
        with cls.lock:
            for kind, rate in cls.plan:
                if cls.rng.random() < rate:
                    return kind
        return None

    def _answer(self, status: int, body: bytes, timing: str | None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if timing is not None:
            self.send_header("Server-Timing", timing)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.read_body()
        kind = self._draw()
        if kind == "close":
            self.close_connection = True
            return
        if kind == "garbage":
            self.wfile.write(b"\x16\x03\x01 this is not http\r\n\r\n")
            self.close_connection = True
            return
        if kind == "hang":  # past the client's (shortened) reply timeout, then away
            _RELEASE.wait(1.5)
            self.close_connection = True
            return
        if kind == "slow":
            time.sleep(0.02)
        if kind == "status500":
            self._answer(500, b'{"error": "boom"}', None)
            return
        timing = {"bad-timing": "queue;dur=-1000, forward;dur=inf", "no-timing": None}.get(
            kind or "", "queue;dur=0.01, forward;dur=0.02")
        self._answer(200, b"{}", timing)


@pytest.fixture(scope="module")
def hostile_target():
    _RELEASE.clear()
    with tempfile.TemporaryDirectory() as tmp:
        bodies = Path(tmp) / "bodies.jsonl"
        bodies.write_text('{"x": 1}\n{"x": 2}\n')
        with loopback_server(_Hostile) as url:
            try:
                yield url, str(bodies)
            finally:
                _RELEASE.set()  # hung handlers end before the server shuts down


@contextmanager
def short_waits():
    """A hung reply fails within 0.4 s (not 60) and an open loop's backlog is waited for
    0.3 s after its grace (not 10): the property needs runs of well under a second."""
    with mock.patch.object(http_client, "REQUEST_TIMEOUT_S", 0.4), \
            mock.patch.object(generator, "DRAIN_S", 0.3):
        yield


target_plans = st.lists(st.tuples(st.sampled_from(TARGET_KINDS), st.sampled_from(RATES)),
                        min_size=1, max_size=3, unique_by=lambda kr: kr[0])


@given(plan=target_plans, shape=load_shapes(), tseed=st.integers(0, 2**16))
@example(plan=[], shape={"requests": 12, "warmup": 1, "seed": 0, "concurrency": 2}, tseed=0)
@example(plan=[], shape={"requests": 12, "warmup": 0, "seed": 0, "rate": 500.0,
                         "arrival": "constant", "max_backlog": None, "drain_grace_s": 0.3},
         tseed=0)
@example(plan=[("hang", 0.5)], shape={"requests": 12, "warmup": 0, "seed": 1, "rate": 1000.0,
                                      "arrival": "poisson", "max_backlog": 4,
                                      "drain_grace_s": 0.1}, tseed=1)
@SETTINGS
def test_a_hostile_target_loses_no_request(hostile_target, plan, shape, tseed):
    url, bodies = hostile_target
    shape["requests"] = min(shape["requests"], 12)  # a hung reply holds a client 0.4 s
    _Hostile.plan, _Hostile.rng = plan, random.Random(tseed)
    with short_waits():
        r = execute(RunConfig(target=url, target_protocol="http", bodies=bodies, **shape),
                    who="accounting property")
    check_accounting(r)
    for message in r.summary.error_messages:
        event("target: " + message.split(":")[0] + (" (hung)" if "no reply" in message else ""))
    if not plan:  # a well-behaved target: all answered and split
        assert r.summary.errors == 0, r.summary.error_messages
        assert r.summary.transport.decomposition == "server-timing"


# ---- the safety net: counts that do not add up are INVALID ----------------------------------
def _crafted(requests: int, failed: int, *, rate: float | None = None,
             offered: int | None = None, dropped: int | None = None,
             status: str = "completed") -> RunResult:
    """A result with ``requests`` measured rows (``failed`` of them errors), as if a run had
    lost the rest of what it offered."""
    config = RunConfig(rate=rate, requests=offered if offered is not None else requests,
                       concurrency=None if rate else 2, warmup=0, min_requests=0)
    ok = requests - failed
    d = {"config": config.to_dict(), "status": status,
         "timings": Timings(measure_start_ns=0, measure_end_ns=10**9,
                            offered_requests=offered if rate else None,
                            offered_span_s=1.0 if rate else None,
                            dropped_overload=dropped).to_dict()}
    cols = {"t_intended": [i * 1000 for i in range(requests)],
            "status": [0] * ok + [1] * failed}
    for k in ("t_sent", "t_received", "t_pre_start", "t_pre_end", "t_fwd_start", "t_fwd_end",
              "t_post_start", "t_post_end", "t_done"):
        cols[k] = [i * 1000 + 500 for i in range(requests)]
    d["requests"] = {"count": requests, "columns": cols,
                     "errors": {str(ok + j): "boom" for j in range(failed)}}
    return RunResult.from_dict(json.loads(json.dumps(d)))


def test_a_result_whose_counts_do_not_add_up_is_invalid_and_names_the_gap():
    lost = _crafted(7, 1, offered=10)  # closed loop of 10: 3 vanished
    assert not lost.validity.valid
    check = next(c for c in lost.validity.failed if c.name == "every request accounted for")
    assert "3 of 10 offered requests are missing" in check.detail, check.detail
    assert "6 answered + 1 failed + 0 dropped" in check.detail
    assert "3 of 10 offered requests are missing" in lost.validity.line()

    open_lost = _crafted(5, 0, rate=100.0, offered=9, dropped=2)  # open loop: 2 vanished
    assert not open_lost.validity.valid
    assert "2 of 9 offered requests are missing" in open_lost.validity.line()

    whole = _crafted(7, 0, rate=100.0, offered=9, dropped=2)  # all there: only the drops fail
    names = [c.name for c in whole.validity.failed]
    assert names == ["nothing dropped by overload"], whole.validity.line()

    fine = _crafted(10, 0, offered=10)
    assert fine.validity.valid, fine.validity.line()
    assert "every request accounted for" in fine.validity.line()

    stopped = _crafted(4, 0, offered=10, status="stopped")  # fails "finished as planned" only
    assert [c.name for c in stopped.validity.failed] == ["finished as planned"]


# ---- found by the property: a stage raising what cannot be printed --------------------------
class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class _PreUnprintable(Base):
    def preprocess(self, raw: Any) -> Any:
        raise _Unprintable()


def test_a_stage_raising_an_unprintable_exception_fails_its_request_alone():
    cancel = threading.Event()
    timer = threading.Timer(1.5, cancel.set)  # bounded: without it the run never ends
    timer.start()
    try:
        with mock.patch.object(generator, "STOP_DRAIN_S", 0.3):
            r = execute(RunConfig(concurrency=2, requests=6, warmup=0), cancel=cancel,
                        pipeline=_PreUnprintable())
    finally:
        timer.cancel()
    check_accounting(r)
    assert r.summary.errors == 6
