"""What a hostile OpenAI-compatible server sends is bounded and shown as text: a
byte-at-a-time answer never trips a per-read timeout, so the whole exchange is bounded (the
probe of a ``/v1/models`` ends in one line, a ``/metrics`` scrape ends with the run); JSON
nested past any need is refused where it is read; a model id or a message with escape
sequences reaches no line raw. (Emulated servers, labelled so: raw sockets and handlers.)"""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from latency.core.errors import ConfigError
from latency.execution import openai_probe
from latency.loadgen.metrics_scraper import MetricsScraper, ScrapeError, fetch


@contextmanager
def dribbling(every_s: float = 0.2, bytes_: int = 600) -> Iterator[str]:
    """Each connection gets a 200 whose body comes one byte every ``every_s`` (bounded:
    ``bytes_`` bytes, then the connection closes)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def one(conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100000\r\n\r\n")
            for _ in range(bytes_):
                if stop.is_set():
                    break
                conn.sendall(b" ")
                time.sleep(every_s)
        except OSError:
            pass
        finally:
            conn.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        srv.close()


def _answering(body: bytes) -> type:
    """A handler answering every GET with ``body`` as JSON (a hostile /v1/models)."""
    from tests.conftest import QuietHandler

    class Answer(QuietHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Answer


def test_a_dribbling_models_page_ends_the_probe_in_one_line(monkeypatch):
    monkeypatch.setattr(openai_probe, "PROBE_TIMEOUT_S", 1.5)
    with dribbling() as url:
        t = time.monotonic()
        with pytest.raises(ConfigError, match="did not end within 1.5 s"):
            openai_probe.probe_target(f"{url}/v1")
        assert time.monotonic() - t < 5


def test_a_dribbling_metrics_page_ends_each_scrape_and_the_scraper_stops():
    with dribbling() as url:
        t = time.monotonic()
        with pytest.raises(ScrapeError, match="did not end within 1 s"):
            fetch(f"{url}/metrics", timeout_s=1.0)
        assert time.monotonic() - t < 3
        scraper = MetricsScraper(f"{url}/metrics", period_s=0.5).start()
        time.sleep(0.5)
        t = time.monotonic()
        series = scraper.stop()  # its last scrape too is bounded: the run's end is
        assert time.monotonic() - t < 15
    assert series["failures"] >= 1 and "did not end within" in series["last_error"]


def test_a_deeply_nested_models_page_is_one_line_not_a_failed_run():
    """A /v1/models of 100,000 nested arrays: the probe reads no model from it and says so
    (one line), instead of a RecursionError failing the run."""
    from tests.conftest import loopback_server

    with loopback_server(_answering(b"[" * 100_000 + b"]" * 100_000), path="/v1") as url:
        with pytest.raises(ConfigError, match="named no model"):
            openai_probe.probe_target(url)


def test_server_text_reaches_no_line_raw():
    """A model id with an escape sequence and a newline that would forge 'validity: VALID',
    an error message of 5,000 characters with escapes: neither reaches a line as it came."""
    import json

    from latency.core.fmt import server_text
    from latency.loadgen.sse_client import error_message
    from tests.conftest import loopback_server

    forged = "\x1b[2J\x1b[31mPWNED\x1b[0m\nvalidity: VALID"
    shown = server_text(forged)
    assert "\x1b" not in shown and "\n" not in shown and "\\x1b" in shown
    long = error_message(json.dumps({"error": {"message": "\x1b[31m" + "x" * 5000}}).encode())
    assert "\x1b" not in long and len(long) < 400 and "more characters" in long

    models = json.dumps({"data": [{"id": forged}]}).encode()
    with loopback_server(_answering(models), path="/v1") as url:
        with pytest.raises(ConfigError) as err:
            openai_probe.probe_target(url)
    message = str(err.value)
    assert "no model in plain text" in message and "--served-model" in message
    assert "\x1b" not in message and "\n" not in message
