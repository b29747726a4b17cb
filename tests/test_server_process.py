"""Our HTTP server as a run's process: why it could not start is its own first error, a
pipeline that prints (while it loads, or a megabyte a request) neither breaks the start nor
blocks the server."""
from pathlib import Path

import pytest

from latency.core.config import RunConfig
from latency.execution.engine import execute

PIPELINES = Path(__file__).with_name("hostile_pipelines.py")


def _http(name: str, **kw) -> RunConfig:
    return RunConfig(pipeline=f"{PIPELINES}:{name}", transport="http", warmup=0, **kw)


@pytest.mark.parametrize("name,says", [("InitRaise", "bad init"),
                                       ("InitExit", "SystemExit")])
def test_a_server_that_cannot_start_says_why(name, says):
    r = execute(_http(name, requests=5))
    assert r.status == "failed"
    assert "could not start" in r.failure and says in r.failure, r.failure
    assert "closed file" not in r.failure


@pytest.mark.parametrize("name", ["PrintInit", "PrintMB"])
def test_a_pipeline_that_prints_is_served_over_http(name):
    r = execute(_http(name, requests=30, concurrency=2))
    assert r.status == "completed", r.failure
    assert r.summary.errors == 0 and r.summary.successful == 30, r.summary.error_messages


def test_a_response_json_cannot_carry_is_a_counted_500_with_its_reason():
    r = execute(_http("PostTensor", requests=10))
    assert r.summary.errors == 10
    assert all("cannot be sent as JSON" in m for m in r.summary.error_messages), \
        r.summary.error_messages
    assert r.timings.server_responses == {"500": 10}  # /metrics counts what was sent
