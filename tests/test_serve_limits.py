"""``latency serve``'s HTTP-layer limits (``latency.serve.http_limits``), from raw sockets: a
head over the size limit is refused before it is buffered, a head dribbled byte by byte is
closed at the head deadline, what the parser refuses is counted in ``/metrics``, and good
requests are served while slow connections hold more file descriptors than the server has.

The servers are ``python -m latency serve`` processes, as a user starts them: one with the head
deadline lowered to ``DEADLINE_S`` (the environment variable the server reads), one with a
file descriptor limit of ``NOFILE`` (what ``ulimit -n`` does) and the deadline long enough that
only the connection cap can keep it serving.
"""
from __future__ import annotations

import http.client
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the head deadline of the ``served`` server (its default is 10 s)
DEADLINE_S = 1.5
#: the ``crowded`` server's file descriptor limit, and the slow connections sent to it: more
#: than it has descriptors, as 1,100 against ``ulimit -n 1024`` in the defect report
NOFILE = 256
SLOW = 300
HEAD_ENV = "LATENCY_LAB_SERVE_HEAD_TIMEOUT_S"
READY = "/v2/health/ready"


def _serve(tmp: Path, env: dict[str, str], nofile: int | None = None):
    """Start ``latency serve --port 0``; (process, port) once it serves."""
    def limit() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    err = open(tmp / "stderr.txt", "w")  # the server's; _stop closes it
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "serve", "--model", "synthetic", "--model-arg",
         "forward_ms=1", "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=err,
        text=True, env={**os.environ, **env}, preexec_fn=limit if nofile else None)
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("serving synthetic on http://127.0.0.1:"):
        proc.kill()
        pytest.fail(f"the server did not start: {line!r} {(tmp / 'stderr.txt').read_text()}")
    return proc, err, int(line.split()[3].rsplit(":", 1)[1])


def _stop(proc, err) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    err.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    proc, err, port = _serve(tmp_path_factory.mktemp("served"), {HEAD_ENV: str(DEADLINE_S)})
    yield proc, port
    _stop(proc, err)


@pytest.fixture(scope="module")
def crowded(tmp_path_factory):
    proc, err, port = _serve(tmp_path_factory.mktemp("crowded"), {HEAD_ENV: "60"}, NOFILE)
    yield proc, port
    _stop(proc, err)


def metrics(port: int) -> dict[str, float]:
    """``/metrics`` as {'name{labels}': value}."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        c.request("GET", "/metrics")
        resp = c.getresponse()
        assert resp.status == 200
        text = resp.read().decode()
    finally:
        c.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(None, 1)
            out[key] = float(value)
    return out


def refused(port: int, reason: str) -> float:
    return metrics(port).get(f'latency_lab_http_refusals_total{{reason="{reason}"}}', 0.0)


def responses(port: int, code: int) -> float:
    return metrics(port).get(f'latency_lab_http_responses_total{{code="{code}"}}', 0.0)


def read_until_closed(sock: socket.socket, timeout_s: float) -> bytes:
    """What the server sends until it closes the connection (a reset after its answer counts
    as closed), or until ``timeout_s``: then whatever came (the test fails on it)."""
    sock.settimeout(timeout_s)
    out = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return out
        except TimeoutError:
            return out + b"<still open>"
        if not chunk:
            return out
        out += chunk
    return out + b"<still open>"


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


# ---- head size --------------------------------------------------------------------------------
def test_a_head_over_the_limit_is_refused_without_being_buffered(served):
    proc, port = served
    before = rss_kb(proc.pid)
    head = 32 << 20  # a 32 MiB header line (the report's was 225 MB: accepted, RSS +270 MB)
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)

    def send() -> None:
        try:
            sock.sendall(f"GET {READY} HTTP/1.1\r\nHost: x\r\nX-Big: ".encode())
            chunk = b"a" * (1 << 20)
            for _ in range(head >> 20):
                sock.sendall(chunk)
            sock.sendall(b"\r\n\r\n")
        except OSError:  # the server closed the connection: as it should
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    answer = read_until_closed(sock, 30)
    sender.join(30)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:300]
    assert b"<still open>" not in answer
    after = rss_kb(proc.pid)
    if before is not None and after is not None:
        assert after - before < (head >> 10) // 2, (before, after)  # it grew by far less
    assert refused(port, "head_too_large") >= 1


# ---- head time --------------------------------------------------------------------------------
def test_a_dribbled_head_is_closed_at_the_deadline(served):
    _, port = served
    timeouts = refused(port, "head_timeout")
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.sendall(f"GET {READY} HTTP/1.1\r\nHost: x\r\n".encode())
    t0 = time.monotonic()
    answer = b""
    while time.monotonic() - t0 < 10 * DEADLINE_S:  # one header line every 0.2 s
        ready, _, _ = select.select([sock], [], [], 0.2)
        if ready:
            answer = read_until_closed(sock, 10)
            break
        try:
            sock.sendall(b"X-a: b\r\n")
        except OSError:
            answer = read_until_closed(sock, 10)
            break
    took = time.monotonic() - t0
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408 "), (answer[:300], took)
    assert b"<still open>" not in answer
    assert took >= DEADLINE_S * 0.6, took  # the deadline, not at once (generous: timers)
    assert refused(port, "head_timeout") == timeouts + 1


# ---- what the parser refuses is counted -------------------------------------------------------
@pytest.mark.parametrize("request_bytes", [
    b"POST /v2/models/synthetic/infer HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"POST /v2/models/synthetic/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03not http at all\r\n\r\n",
], ids=["negative-content-length", "content-length-and-chunked", "not-http"])
def test_a_malformed_request_is_a_counted_400(served, request_bytes):
    _, port = served
    invalid, code_400 = refused(port, "invalid_request"), responses(port, 400)
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.sendall(request_bytes)
    answer = read_until_closed(sock, 20)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]
    assert refused(port, "invalid_request") == invalid + 1
    assert responses(port, 400) == code_400 + 1


# ---- connections ------------------------------------------------------------------------------
def test_good_requests_are_served_while_slow_connections_hold_more_fds_than_it_has(crowded):
    _, port = crowded
    slow = []
    try:
        for _ in range(SLOW):  # each an unfinished head, as slowloris.py sends
            s = socket.create_connection(("127.0.0.1", port), timeout=20)
            s.sendall(b"POST /v2/models/x/infer HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        time.sleep(0.5)  # the server has taken them in
        for _ in range(3):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            c.request("POST", "/v2/models/synthetic/infer", body=b'"x"',
                      headers={"Content-Type": "text/plain"})
            resp = c.getresponse()
            assert resp.status == 200, (resp.status, resp.read()[:300])
            resp.read()
            c.close()
        made_room = refused(port, "evicted") + refused(port, "connection_limit")
        assert made_room >= SLOW - NOFILE, made_room  # the cap, not luck, kept it serving
    finally:
        for s in slow:
            s.close()


def test_every_limit_is_in_the_serve_docs():
    from latency.serve import http_limits

    doc = (ROOT / "docs" / "your-server.md").read_text()
    for name in ("HEAD_TIMEOUT_S", "MAX_HEAD_BYTES", "MAX_CONNECTIONS", "CONNECTION_FD_SHARE",
                 "HEAD_TIMEOUT_ENV"):
        assert f"`{name}`" in doc, name
        assert hasattr(http_limits, name), name
