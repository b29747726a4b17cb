"""A target that misbehaves cannot hang the client or exhaust its memory, and a plain one that
speaks HTTP/1.0 is understood: every wait and buffer of the HTTP client is bounded."""
import asyncio
import socket
import time

import pytest

from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.loadgen.http1_pool import HttpError, Pool
from tests.conftest import QuietHandler, loopback_server


class _Http10(QuietHandler):
    """The standard library's textbook handler: HTTP/1.0, no Content-Length, the body ends
    when the connection closes."""

    def do_POST(self):
        self.read_body()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"label": "ok"}')


class _Endless(QuietHandler):
    """A reply that never ends: chunk after chunk until the client goes away."""

    protocol_version = "HTTP/1.1"
    chunk = b"x" * (1 << 20)

    def do_POST(self):
        self.read_body()
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        frame = f"{len(self.chunk):x}\r\n".encode() + self.chunk + b"\r\n"
        try:
            for _ in range(4096):  # bounded: 4 GiB at most, the client stops long before
                self.wfile.write(frame)
        except OSError:
            pass


@pytest.fixture()
def bodies(tmp_path):
    path = tmp_path / "bodies.jsonl"
    path.write_text('{"text": "hello"}\n')
    return str(path)


def test_an_http10_server_whose_replies_end_at_close_is_read(bodies):
    with loopback_server(_Http10) as url:
        r = execute(RunConfig(target=url, target_protocol="http", bodies=bodies,
                              requests=20, warmup=0))
    assert r.status == "completed"
    assert r.summary.errors == 0 and r.summary.successful == 20, r.summary.error_messages


def test_a_reply_that_never_ends_fails_its_request_at_the_size_limit():
    async def one(url: str) -> None:
        pool = Pool(url, 1, 30.0, max_response_bytes=8 << 20)
        try:
            await pool.post(b"{}", "application/json")
        finally:
            pool.close()

    with loopback_server(_Endless) as url:
        t0 = time.monotonic()
        with pytest.raises(HttpError, match="larger than 8 MiB"):
            asyncio.run(one(url))
        assert time.monotonic() - t0 < 20  # at the limit, not at the request timeout


def test_a_run_against_a_never_ending_reply_fails_those_requests_and_goes_on(bodies):
    with loopback_server(_Endless) as url:
        r = execute(RunConfig(target=url, target_protocol="http", bodies=bodies,
                              requests=2, warmup=0))
    assert r.summary.errors == 2
    assert all("larger than" in m for m in r.summary.error_messages), r.summary.error_messages


def test_connecting_is_bounded_by_the_request_timeout():
    """A listener whose backlog is full drops new connections' handshakes: the kernel would
    retry for minutes; the client gives up at its timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(8):  # fill the backlog (never accepted)
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    time.sleep(0.2)

    async def one() -> None:
        pool = Pool(f"http://127.0.0.1:{port}/", 1, 1.0)
        try:
            await pool.post(b"{}", "application/json")
        finally:
            pool.close()

    try:
        t0 = time.monotonic()
        with pytest.raises((TimeoutError, OSError)):
            asyncio.run(one())
        assert time.monotonic() - t0 < 10
    finally:
        for s in fillers:
            s.close()
        listener.close()


class _Dribble(QuietHandler):
    """Answers a GET one byte every half second: each read is quick, the whole never ends."""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        try:
            for _ in range(1000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:
            pass


def test_a_health_check_that_dribbles_is_bounded_as_a_whole(tmp_path):
    """urllib's timeout is per read; the check's is for the whole answer."""
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_text('{"x": 1}\n')
    with loopback_server(_Dribble) as url:
        t0 = time.monotonic()
        r = execute(RunConfig(target=url, target_protocol="http", bodies=str(bodies),
                              health_url=url.replace("/predict", "/health"), requests=2,
                              warmup=0))
        took = time.monotonic() - t0
    assert r.status == "failed" and "not ready" in r.failure and "within" in r.failure
    assert took < 30


@pytest.mark.parametrize("url,says", [("http://127.0.0.1:0/v2", "port 0"),
                                      ("http://u:p@127.0.0.1:8000", "user name or password")])
def test_a_target_url_that_cannot_work_is_one_line(url, says, capsys):
    from latency.cli.main import main

    assert main(["run", "--target", url, "--requests", "5", "--no-save"]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
