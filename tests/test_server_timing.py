"""What a server says of its own time is checked before it is believed: a ``Server-Timing``
duration that is negative, not finite, or larger than the client's whole time gives no
breakdown for that response (its time stays network), never a negative component or a failed
run."""

import pytest

from latency.core.config import RunConfig
from latency.core.records import COMPONENTS, component_ns
from latency.execution.engine import execute
from latency.serve.oip import parse_server_timing
from tests.conftest import QuietHandler, loopback_server


class _Target(QuietHandler):
    """POST → 200 ``{}`` with the Server-Timing header the test chose."""

    header = ""

    def do_POST(self):
        self.read_body()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.send_header("Server-Timing", type(self).header)
        self.end_headers()
        self.wfile.write(b"{}")


@pytest.fixture()
def target():
    with loopback_server(_Target) as url:
        yield url


@pytest.mark.parametrize("value", ["-1000", "-5", "inf", "-inf", "nan", "1e303", "1e300",
                                   '"inf"', "abc"])
def test_an_impossible_duration_gives_no_breakdown(value):
    st = parse_server_timing(f"queue;dur=0.1, forward;dur={value}")
    assert st.breakdown_ns() is None


def test_a_usable_header_still_splits_and_other_metrics_do_not_matter():
    st = parse_server_timing('queue;dur=0.5, forward;dur=2, db;dur=-3, cache;desc="a, b"')
    assert st.breakdown_ns() == {"queue": 500_000, "preprocess": 0, "forward": 2_000_000,
                                 "postprocess": 0}


@pytest.mark.parametrize("header", ["queue;dur=-1000, forward;dur=1", "forward;dur=inf",
                                    "forward;dur=1e303", "forward;dur=100000"])
def test_a_target_that_lies_about_its_time_is_not_believed(target, header, tmp_path):
    _Target.header = header
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_text('{"x": 1}\n')
    r = execute(RunConfig(target=target, target_protocol="http", bodies=str(bodies),
                          requests=20, warmup=0))
    assert r.status == "completed", r.failure
    assert r.summary.errors == 0
    assert r.summary.transport.decomposition == "client-only"
    parts = component_ns(r.measured())
    assert all((parts[c] >= 0).all() for c in COMPONENTS), {c: parts[c].min() for c in COMPONENTS}
    total = r.summary.latency_ms.mean
    assert r.summary.components_ms["network"].mean == pytest.approx(total, rel=0.05)

