"""The HTTP transport: wire format, Server-Timing, emulated WAN, safety, remote targets.

One ``python -m latency serve`` subprocess (module fixture) plays the remote server for the
tests that need one, as a user's cluster would; the known-answer WAN run starts its own server
process through the engine, as ``--transport http`` does.
"""
from __future__ import annotations

import http.client
import http.server
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from latency.core.config import RunConfig
from latency.core.records import COMPONENTS, component_ns
from latency.core.wan import WanProfile
from latency.execution.engine import execute
from latency.loadgen.http_client import split_target
from latency.loadgen.wan import Link
from latency.serve.oip import (
    ProtocolError,
    decode_request,
    encode_request,
    format_server_timing,
    parse_server_timing,
)
from tests.cli_support import cli_here
from tests.timing_support import machine_note

ROOT = Path(__file__).resolve().parents[1]
FAST = {"preprocess_ms": 0.0, "forward_ms": 1.0, "postprocess_ms": 0.0}


# ---- wire format ------------------------------------------------------------------------------
def test_server_timing_parses_the_w3c_examples_and_round_trips_to_the_nanosecond():
    st = parse_server_timing('miss, db;dur=53, app;dur=47.2, cache;desc="Cache Read";dur=23.2')
    assert st.metrics == {"miss": None, "db": 53_000_000, "app": 47_200_000,
                          "cache": 23_200_000}
    assert st.breakdown_ns() is None  # none of queue/preprocess/forward/postprocess
    quoted = parse_server_timing('queue;desc="a, b; c";dur=1.5, forward;dur="2"')
    assert quoted.metrics == {"queue": 1_500_000, "forward": 2_000_000}
    triton = parse_server_timing("queue_wait;dur=1, compute_infer;dur=4, junk;;")
    assert triton.breakdown_ns() == {"queue": 1_000_000, "preprocess": 0,
                                     "forward": 4_000_000, "postprocess": 0}
    ns = {"queue": 123_457, "preprocess": 2_000_001, "forward": 5_000_000, "postprocess": 7}
    assert parse_server_timing(format_server_timing(ns)).breakdown_ns() == ns


def test_oip_bodies_round_trip_text_and_bytes_and_refuse_bad_ones():
    jpeg = bytes(range(256)) * 4
    for raw in ("a sentence, with ünïcode", jpeg):
        body, ctype = encode_request(raw, "json")
        assert decode_request(body, ctype)[0] == raw
    record = {"text": "a review", "stars": [4, 5], "id": None}  # a line of a .jsonl inputs file
    body, ctype = encode_request(record, "json")
    assert decode_request(body, ctype)[0] == record  # the pipeline gets the same value back
    with pytest.raises(ValueError, match="--payload json"):
        encode_request(record, "raw")
    body, ctype = encode_request(jpeg, "raw")
    assert body == jpeg and decode_request(body, ctype)[0] == jpeg
    body, ctype = encode_request("ünïcode text", "raw")  # a text pipeline gets a str back
    assert ctype.startswith("text/plain") and decode_request(body, ctype)[0] == "ünïcode text"
    assert len(encode_request(jpeg, "json")[0]) > 1.3 * len(jpeg)  # base64 + envelope
    bad = [(b"{not json", "malformed JSON"), (b"[]", "JSON object"),
           (b'{"inputs": []}', "exactly one"),
           (b'{"inputs": [{"name": "input", "shape": [2], "datatype": "BYTES", '
            b'"data": ["a", "b"]}]}', "wrong tensor shape"),
           (b'{"inputs": [{"name": "input", "shape": [1], "datatype": "FP32", '
            b'"data": [1.0]}]}', "BYTES"),
           (b'{"inputs": [{"name": "input", "shape": [1], "datatype": "BYTES", '
            b'"data": ["a", "b"]}]}', "holds 1 element")]
    for body, needle in bad:
        with pytest.raises(ProtocolError) as exc:
            decode_request(body, "application/json")
        assert exc.value.status == 400 and needle in str(exc.value)


def test_emulated_link_delays_by_half_rtt_plus_bytes_over_bandwidth_and_queues():
    link = Link(WanProfile(rtt_ms=20, bandwidth_mbps=8), seed=0)  # 8 Mbit/s = 1 µs a byte
    assert link.delay_ns(1000, now=0) == 10_000_000 + 1_000_000
    # a second message sent at the same moment waits for the first to leave the link
    assert link.delay_ns(1000, now=0) == 10_000_000 + 2_000_000
    jittery = Link(WanProfile(rtt_ms=10, jitter_ms=4), seed=1)
    d = [jittery.delay_ns(0, now=i * 10**9) for i in range(2000)]
    assert 5_000_000 <= min(d) and max(d) <= 9_000_000
    assert np.mean(d) == pytest.approx(7_000_000, rel=0.05)  # uniform jitter: mean 2 ms


def test_target_url_names_the_model_or_takes_it_from_model():
    assert split_target("http://h:8000", "m") == ("http://h:8000", "m")
    assert split_target("http://h:8000/v2/models/resnet/infer", "m") == ("http://h:8000",
                                                                        "resnet")
    assert split_target("https://h/x/v2/models/r/versions/2", "m") == ("https://h/x", "r")


# ---- the known answer: an emulated 20 ms RTT shows up in network and nowhere else --------------
@pytest.mark.timing
def test_emulated_rtt_lands_in_network_on_top_of_the_loopback_cost(tmp_path):
    r = execute(RunConfig(model="synthetic", model_args=FAST, transport="http",
                          net_rtt_ms=20, requests=60, warmup=5))
    assert r.status == "completed", r.failure
    m = r.measured()
    comps = component_ns(m)
    assert np.array_equal(sum(comps[c] for c in COMPONENTS), comps["total"])  # exact
    emulated = m["emulated_us"] / 1e3
    loopback = comps["network"] / 1e6 - emulated
    note = machine_note(r)
    # 10 ms each way, sleeps
    assert np.median(emulated) == pytest.approx(20.0, abs=1.5), (np.median(emulated), note)
    # sockets + HTTP + JSON on loopback
    assert 0 < np.median(loopback) < 5.0, (np.median(loopback), note)
    s = r.summary
    net = s.components_ms["network"].p50
    assert 20.0 < net < 20.0 + 1.5 + 5.0, (net, note)
    # the server's
    assert s.components_ms["forward"].p50 == pytest.approx(1.0, abs=0.2), \
        (s.components_ms["forward"].p50, note)
    t = s.transport
    assert t.kind == "http" and t.decomposition == "server-timing"
    assert t.to_dict()["emulated_wan"]["emulated"] and t.emulated_wan.rtt_ms == 20
    assert t.request_bytes["mean"] > 50 and t.response_bytes["mean"] > 50
    # the measured phase's 60 (the 5 warm-up requests are counted before measuring starts)
    assert t.server_responses["200"] == 60 and t.server_errors == 0
    from latency.analysis.summary_text import format_summary

    assert "EMULATED WAN" in format_summary(r)
    assert '"emulated": true' in r.json_text()


# ---- our server, started apart as a user would: `python -m latency serve` ----------------------
@pytest.fixture(scope="module")
def served():
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "serve", "--model", "synthetic", "--model-arg",
         "forward_ms=1", "--model-arg", "preprocess_ms=0", "--model-arg", "postprocess_ms=0",
         "--port", "0", "--max-body-mb", "0.05"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("serving synthetic on http://127.0.0.1:"), proc.stderr.read()
    url = line.split()[3]
    port = int(url.rsplit(":", 1)[1])
    yield proc, url, port
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)


def request(port: int, method: str, path: str, body: bytes | None = None,
            ctype: str = "application/json", conn: http.client.HTTPConnection | None = None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=body, headers={"Content-Type": ctype} if body is not None
              else {})
    resp = c.getresponse()
    return resp.status, resp.read(), resp.getheader("Server-Timing")


def test_served_routes_metadata_and_safety_codes(served):
    _, _, port = served
    assert request(port, "GET", "/v2/health/ready")[0] == 200
    status, body, _ = request(port, "GET", "/v2/models/synthetic")
    assert status == 200 and json.loads(body)["inputs"][0]["datatype"] == "BYTES"
    assert request(port, "GET", "/v2/models/nope")[0] == 404
    ok, body, timing = request(port, "POST", "/v2/models/synthetic/infer",
                               encode_request("hello", "json")[0])
    assert ok == 200 and json.loads(json.loads(body)["outputs"][0]["data"][0])["ok"]
    parts = parse_server_timing(timing).breakdown_ns()
    assert 1_000_000 <= parts["forward"] < 50_000_000  # holds 1 ms (first call: cold)
    status, body, _ = request(port, "POST", "/v2/models/nope/infer", b"{}")
    assert status == 404 and b"unknown model" in body
    status, body, _ = request(port, "POST", "/v2/models/synthetic/infer", b"{oops")
    assert status == 400 and b"malformed JSON" in body
    wrong = (b'{"inputs": [{"name": "input", "shape": [3], "datatype": "BYTES", '
             b'"data": ["a", "b", "c"]}]}')
    status, body, _ = request(port, "POST", "/v2/models/synthetic/infer", wrong)
    assert status == 400 and b"wrong tensor shape" in body
    status, body, _ = request(port, "POST", "/v2/models/synthetic/infer", b"x" * 60_000,
                              "application/octet-stream")
    assert status == 413 and b"limit" in body


def test_remote_target_profile_through_1000_malformed_requests(served, tmp_path):
    """A run against the separately started server while another client sends it 1,000
    malformed requests: every good request succeeds, and the server's error count shows."""
    _, url, port = served
    measuring = threading.Event()

    def on_rows(rows, errors, progress):
        if progress["phase"] == "measuring":
            measuring.set()

    box = {}
    run = threading.Thread(target=lambda: box.setdefault("r", execute(
        RunConfig(model="synthetic", target=url, concurrency=2, duration_s=5.0, warmup=5),
        on_rows=on_rows, progress_interval_s=0.1)))
    run.start()
    assert measuring.wait(60)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    bad = [b"{oops", b"[]", b'{"inputs": [{"shape": [9], "datatype": "BYTES", "data": []}]}',
           b'{"inputs": [{"name": "input", "shape": [1], "datatype": "INT8", "data": [1]}]}']
    codes = set()
    for i in range(1000):
        status, _, _ = request(port, "POST", "/v2/models/synthetic/infer", bad[i % 4],
                               conn=conn)
        codes.add(status)
    assert codes == {400}
    run.join(120)
    r = box["r"]
    assert r.status == "completed", r.failure
    s = r.summary
    assert s.errors == 0 and s.successful > 100
    assert s.transport.server_errors >= 1000
    assert s.transport.server_responses["400"] >= 1000
    assert any("1000× HTTP 400" in w or "HTTP 400" in w for w in s.warnings)
    assert s.transport.decomposition == "server-timing"
    assert s.components_ms["forward"].p50 == pytest.approx(1.0, abs=0.3)
    assert request(port, "GET", "/v2/health/ready")[0] == 200  # still serving


def test_cli_profiles_a_target_with_a_bodies_file(served, tmp_path):
    _, url, _ = served
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_text("\n".join(encode_request(f"req {i}", "json")[0].decode()
                                for i in range(3)) + "\n\n")
    j = tmp_path / "r.json"
    out = cli_here("run", "--target", f"{url}/v2/models/synthetic/infer", "--bodies",
                   str(bodies), "--model", "whatever-remote", "--requests", "60", "--warmup",
                   "3", "--json", str(j), "--quiet")
    assert out.returncode == 0, out.stderr
    assert "transport: HTTP" in out.stdout and "Server-Timing" in out.stdout
    d = json.loads(j.read_text())
    assert d["config"]["target"].endswith("/infer") and d["summary"]["requests"] == 60
    assert d["environment"]["transport"]["model"] == "synthetic"


def test_serve_stops_cleanly_on_ctrl_c():
    proc = subprocess.Popen([sys.executable, "-m", "latency", "serve", "--port", "0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().startswith("serving synthetic on http://127.0.0.1:")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err


# ---- a remote server that sends no Server-Timing ------------------------------------------------
class _Plain(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        self._send(200, b'{"ready": true}')

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(0.002)
        self._send(200, b'{"outputs": []}')

    def log_message(self, *args):
        pass


class _Chunked(_Plain):
    """Replies in chunked transfer coding, and closes every third connection after replying."""

    calls = 0

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(0.0006)  # the 0.5 ms of "forward" its Server-Timing claims, really spent
        _Chunked.calls += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Server-Timing", "forward;dur=0.5")
        close = _Chunked.calls % 3 == 0
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        for part in (b'{"outputs"', b": []}"):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = close


def test_client_reads_chunked_replies_and_reconnects_after_connection_close():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Chunked)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        r = execute(RunConfig(model="synthetic", target=f"http://127.0.0.1:{srv.server_port}",
                              concurrency=2, requests=60, warmup=0))
    finally:
        srv.shutdown()
    s = r.summary
    assert r.status == "completed" and s.errors == 0, s.error_messages
    assert s.transport.response_bytes["mean"] == len(b'{"outputs": []}')
    assert s.components_ms["forward"].p50 == pytest.approx(0.5)  # from Server-Timing


@pytest.mark.timing
def test_open_loop_over_http_keeps_its_rate(served):
    _, url, _ = served
    r = execute(RunConfig(model="synthetic", target=url, rate=300.0, arrival="constant",
                          requests=600, warmup=10))
    s = r.summary
    assert r.status == "completed" and s.errors == 0
    assert s.throughput_rps == pytest.approx(300, rel=0.1), (s.throughput_rps, machine_note(r))
    assert s.schedule_lag_ms["p50"] < 1.0, (s.schedule_lag_ms, machine_note(r))


def test_target_without_server_timing_is_client_time_only_and_says_why():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        r = execute(RunConfig(model="synthetic", target=f"http://127.0.0.1:{srv.server_port}",
                              requests=30, warmup=2))
    finally:
        srv.shutdown()
    assert r.status == "completed", r.failure
    s = r.summary
    assert s.transport.decomposition == "client-only"
    assert "no Server-Timing" in s.transport.decomposition_note
    assert any("no Server-Timing" in w for w in s.warnings)
    assert s.components_ms["network"].p50 >= 2.0  # the whole client time
    assert s.components_ms["forward"].p50 == 0.0
    assert s.transport.server_responses is None  # no /metrics counter there


# ---- command-line mistakes: one line, exit 2 ---------------------------------------------------
@pytest.mark.parametrize("args,needle", [
    (["run", "--transport", "pigeon"], "--transport"),
    (["run", "--transport", "http", "--payload", "xml"], "--payload"),
    (["run", "--net-rtt-ms", "20"], "--transport http"),
    (["run", "--transport", "http", "--net-rtt-ms", "-5"], "net-rtt-ms"),
    (["run", "--transport", "http", "--net-bandwidth-mbps", "0"], "net-bandwidth-mbps"),
    (["run", "--transport", "http", "--net-jitter-ms", "soon"], "net-jitter-ms"),
    (["run", "--target", "ftp://example.com"], "--target"),
    (["run", "--target", "http://127.0.0.1:1", "--transport", "in-process"], "--target"),
    (["run", "--transport", "http", "--bodies", "/nonexistent/b.jsonl"], "--bodies"),
    (["run", "--bodies", "x.jsonl"], "--transport http"),
    (["serve", "--port", "70000"], "--port"),
    (["serve", "--model", "nope"], "unknown model"),
])
def test_bad_transport_input_is_one_line_exit_2(args, needle, capsys):
    from latency.cli.main import main

    assert main(args) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err


def test_bad_transport_input_from_a_real_shell_has_no_traceback():
    out = subprocess.run([sys.executable, "-m", "latency", "run", "--net-rtt-ms", "20"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_unreachable_target_fails_the_run_with_one_reason():
    r = execute(RunConfig(model="synthetic", target="http://127.0.0.1:9", requests=5))
    assert r.status == "failed" and "not ready" in r.failure


def test_an_http_run_with_levers_reports_them_as_an_in_process_run_does():
    """One server builder: the levers are applied in the server's process, and their report
    (agreement, timings) comes back to the run, as it does in-process."""
    cfg = dict(model="tabular-mlp", optimize=["int8"], requests=40, warmup=5, concurrency=2)
    over_http = execute(RunConfig(transport="http", **cfg))
    in_process = execute(RunConfig(**cfg))
    assert over_http.status == in_process.status == "completed", over_http.failure
    for r in (over_http, in_process):
        opt = r.environment["optimization"]
        assert opt["levers"][0]["name"] == "int8" and opt["agreement"] >= 0.9
        assert opt["inputs"] == 64 and r.timings.optimize_s > 0
        assert r.timings.model_load_s > 0
    assert over_http.environment["optimization"]["agreement"] == \
        in_process.environment["optimization"]["agreement"]  # the same check, same inputs


def test_a_target_run_describes_what_it_measured_and_advises_only_what_is_yours(served):
    """The header names the target and its model, not the local defaults; the batch sizes are
    those the server's replies reported; the advice is about the server, not our settings."""
    from latency.analysis.summary_text import format_summary

    _, url, _ = served
    r = execute(RunConfig(target=url, model="synthetic", concurrency=4, requests=120, warmup=5))
    assert r.status == "completed", r.failure
    head = format_summary(r).splitlines()[0]
    assert head.startswith(f"run completed: target {url}, model synthetic") and "cpu" not in head
    assert "batch sizes seen in its replies: mean 1.00" in head
    assert "raise the batch size" not in str(r.summary.verdict)
