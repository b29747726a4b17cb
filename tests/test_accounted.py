"""Every offered request is accounted for: answered, failed with its reason, or dropped. A
target that never answers some requests leaves them as failures ("no reply"), never as a
silent gap in a VALID run — the gap would hide exactly the slowest requests."""
import itertools
import threading

import pytest

from latency.core.config import RunConfig
from latency.execution.engine import execute
from tests.conftest import QuietHandler, loopback_server

RELEASE = threading.Event()


class _HalfSilent(QuietHandler):
    """Answers every other request; the rest hang until the test ends."""

    protocol_version = "HTTP/1.1"
    counter = itertools.count()

    def do_POST(self):
        self.read_body()
        if next(type(self).counter) % 2:
            RELEASE.wait(120)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


@pytest.fixture()
def half_silent():
    RELEASE.clear()
    with loopback_server(_HalfSilent) as url:
        try:
            yield url
        finally:
            RELEASE.set()  # the hung handlers end before the server shuts down


def test_requests_a_target_never_answers_are_failures_not_gaps(half_silent, tmp_path):
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_text('{"x": 1}\n')
    r = execute(RunConfig(target=half_silent, target_protocol="http", bodies=str(bodies),
                          rate=40, duration_s=2, drain_grace_s=1, warmup=0, seed=3))
    offered = r.timings.offered_requests
    dropped = r.timings.dropped_overload or 0
    assert offered and r.summary.requests + dropped == offered, (offered, r.summary.requests,
                                                                  dropped)
    no_reply = sum(n for m, n in r.summary.error_messages.items() if m.startswith("no reply"))
    assert no_reply >= offered // 3, r.summary.error_messages
    assert not r.validity.valid
