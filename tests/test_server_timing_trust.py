"""A target that sends ``Server-Timing`` we cannot use is told apart from one that sends none.

A header whose durations are negative, not finite, malformed or longer than the client's own
time for the request gives no breakdown (its time stays network, no component goes negative,
the run completes) — and the run says the target *did* send Server-Timing, in how many
responses, and why none was usable, instead of "the target sent no Server-Timing header"
(hostile defect D09). A target with a good header still gets its breakdown."""

import pytest

from latency.analysis.result import RunResult
from latency.core.config import RunConfig
from latency.core.records import COMPONENTS, component_ns
from latency.execution.engine import execute
from tests.conftest import QuietHandler, loopback_server


class _Target(QuietHandler):
    """POST → 200 ``{}`` with the Server-Timing header the test chose (None: no header)."""

    protocol_version = "HTTP/1.1"
    header: str | None = None

    def do_POST(self):
        self.read_body()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        if type(self).header is not None:
            self.send_header("Server-Timing", type(self).header)
        self.end_headers()
        self.wfile.write(b"{}")


@pytest.fixture()
def target():
    with loopback_server(_Target) as url:
        yield url
    _Target.header = None


def _run(url: str, tmp_path, header: str | None, requests: int = 20) -> RunResult:
    _Target.header = header
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_text('{"x": 1}\n')
    return execute(RunConfig(target=url, target_protocol="http", bodies=str(bodies),
                             requests=requests, warmup=2, seed=1))


def _no_negative_component(r: RunResult) -> None:
    parts = component_ns(r.measured())
    assert all((parts[c] >= 0).all() for c in COMPONENTS), {c: parts[c].min() for c in COMPONENTS}
    assert all((r.summary.components_ms[c].mean or 0) >= 0 for c in COMPONENTS)


@pytest.mark.parametrize("header,why", [
    ("queue;dur=-1000, forward;dur=1", "duration"),   # negative
    ("forward;dur=-5", "duration"),
    ("forward;dur=inf", "duration"),                  # not finite
    ("queue;dur=NaN, forward;dur=nan", "duration"),
    ("forward;dur=1e303", "duration"),                # absurd
    ("forward;dur=100000", "longer"),                 # 100 s for a sub-ms request
    (";;;,,,=dur=dur;dur=;dur=1e;forward;dur=--1", "malformed"),   # garbage
    ("forward;dur=abc", "duration"),                  # not a number
    ("db;dur=3, cache;desc=hit", "malformed"),        # no stage of ours
])
def test_server_timing_sent_but_unusable_is_named_as_such(target, tmp_path, header, why):
    r = _run(target, tmp_path, header)
    assert r.status == "completed", r.failure
    s = r.summary
    assert s.errors == 0 and s.requests == 20, s.error_messages
    _no_negative_component(r)
    assert s.transport.decomposition == "client-only"
    assert r.timings.server_timing_unusable == {why: 20}  # warm-up not counted
    note = s.transport.decomposition_note
    assert "sent Server-Timing in 20 of 20 responses but none was usable" in note, note
    assert "no Server-Timing header" not in note
    found = [w for w in s.warnings if "Server-Timing" in w]
    assert found and all("sent no Server-Timing" not in w for w in found), found
    assert "sent Server-Timing in 20 of 20" in found[0]
    v = str(s.verdict)
    assert v.startswith("the split is unavailable") and "none was usable" in v, v
    assert "sends no Server-Timing" not in v
    # the JSON carries the count, and a result read back says the same
    d = r.to_dict()
    assert d["summary"]["transport"]["server_timing_unusable"] == {why: 20}
    assert d["timings"]["server_timing_unusable"] == {why: 20}
    back = RunResult.from_dict(d)
    assert back.summary.transport.decomposition_note == note


def test_a_target_without_server_timing_still_says_it_sent_none(target, tmp_path):
    r = _run(target, tmp_path, None)
    assert r.status == "completed", r.failure
    assert r.timings.server_timing_unusable is None
    t = r.summary.transport
    assert t.decomposition == "client-only" and t.unusable_count == 0
    assert "sent no Server-Timing header" in t.decomposition_note
    assert "sends no Server-Timing header" in str(r.summary.verdict)
    assert "server_timing_unusable" not in r.to_dict()["timings"]


def test_a_usable_server_timing_still_gets_its_breakdown(target, tmp_path):
    r = _run(target, tmp_path, "queue;dur=0.01, forward;dur=0.05")
    assert r.status == "completed" and r.summary.errors == 0, r.failure
    t = r.summary.transport
    assert t.decomposition == "server-timing" and t.decomposition_note is None
    assert r.timings.server_timing_unusable is None
    assert r.summary.components_ms["forward"].p50 == pytest.approx(0.05)
    _no_negative_component(r)


def test_some_usable_some_not_says_how_many_of_each():
    """The note from the counts alone: 20 answered, 12 split, 5 unusable, 3 without any."""
    from latency.analysis.transport_summary import TransportSummary

    t = TransportSummary(kind="http", decomposed_share=12 / 20, decomposition="partial",
                         timing_unusable={"longer": 5}, answered=20)
    note = t.decomposition_note
    assert "sent Server-Timing in 17 of 20 responses but 5 of them were unusable" in note
    assert "longer than the client's own time" in note and "3 had no Server-Timing" in note
    assert "40% of requests without a server breakdown" in t.findings()[0]
    assert TransportSummary.from_dict(t.to_dict()).decomposition_note == note
