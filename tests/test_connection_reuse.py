"""Kept-alive connections are reused as HTTP allows, and a server that closes one as the next
request goes out costs that request nothing but a reconnect.

The servers here are emulations (labelled so) of one real behaviour: llama.cpp's server closes
a connection ~0.1 ms after a streamed reply while announcing ``Keep-Alive``; the pooled
connection's next request then meets a closed socket. The emulation makes the race certain:
it answers the first request on each connection, then closes on the second without a byte.
The real server's own test is in ``tests/test_llama_server.py``.
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from latency.core.config import RunConfig
from latency.execution.gen_engine import execute_generation
from latency.loadgen.http1_pool import HttpError, Pool, keep_alive

MODELS = json.dumps({"object": "list", "data": [{"id": "served", "object": "model"}]}).encode()


def _sse(n: int) -> bytes:
    """A llama.cpp-shaped stream of ``n`` tokens, as one chunked body."""
    events = [{"choices": [{"index": 0, "delta": {"content": f" w{i}"}, "finish_reason": None}]}
              for i in range(n)]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                   "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}})
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    body += b"data: [DONE]\n\n"
    return f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


class _Emulated:
    """An emulated HTTP/1.1 server on 127.0.0.1 (its own event loop thread). ``mode``:

    - ``close_second``: answers a connection's first request with ``Keep-Alive: timeout=5,
      max=100``, closes on its second without a byte (the race, made certain);
    - ``half_then_close``: answers a connection's first request, then on the second sends
      the status line and closes (a reply that had begun: must not be sent again);
    - ``max_one``: says ``Keep-Alive: timeout=5, max=1`` and closes on a second request.
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.connections = 0
        self.answered = 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        served = 0
        try:
            for _ in range(1000):  # bounded
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                if served >= 1 and self.mode in ("close_second", "max_one"):
                    break  # no byte back: the connection closes under the request
                if served >= 1 and self.mode == "half_then_close":
                    writer.write(b"HTTP/1.1 200 OK\r\n")
                    await writer.drain()
                    break
                served += 1
                self.answered += 1
                keep = b"timeout=5, max=1" if self.mode == "max_one" else b"timeout=5, max=100"
                if head.startswith(b"GET"):
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Keep-Alive: " + keep + b"\r\nContent-Length: "
                                 + str(len(MODELS)).encode() + b"\r\n\r\n" + MODELS)
                else:
                    n = int(json.loads(body).get("max_tokens") or 4)
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 b"Keep-Alive: " + keep + b"\r\nTransfer-Encoding: chunked"
                                 b"\r\n\r\n" + _sse(n))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def __enter__(self) -> _Emulated:
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def emulated(mode: str) -> Iterator[_Emulated]:
    with _Emulated(mode) as server:
        yield server


def _posts(url: str, n: int) -> tuple[list[object], Pool]:
    """``n`` POSTs one after another on a pool of one connection: each reply, or its error."""
    pool = Pool(url + "/v1/completions", 1, 10.0)

    async def go() -> list[object]:
        out: list[object] = []
        for _ in range(n):
            try:
                out.append((await pool.post(b'{"max_tokens": 2}', "application/json"))[0])
            except HttpError as exc:
                out.append(exc)
        pool.close()
        return out

    return asyncio.run(go()), pool


def test_a_request_on_a_connection_closed_under_it_is_sent_again_on_a_fresh_one():
    with emulated("close_second") as server:
        replies, pool = _posts(server.url, 6)
    assert replies == [200] * 6
    # the second request met the closed connection and went again, counted; from then on
    # the pool keeps no connection of this server's for a next request
    assert pool.retried == 1
    assert server.connections == 6


def test_a_reply_that_had_begun_is_never_sent_again():
    with emulated("half_then_close") as server:
        replies, pool = _posts(server.url, 2)
    assert replies[0] == 200
    assert isinstance(replies[1], HttpError)
    assert pool.retried == 0


def test_a_connection_is_not_reused_past_the_keep_alive_max():
    with emulated("max_one") as server:
        replies, pool = _posts(server.url, 4)
    assert replies == [200] * 4
    assert pool.retried == 0  # never reused, so never raced
    assert server.connections == 4


@pytest.mark.parametrize("value, expected", [
    (b"timeout=5, max=100", (5.0, 100)), (b"max=3", (None, 3)), (b"timeout=x", (None, None)),
    (b"timeout=-1, max=0", (None, None)), (b"", (None, None))])
def test_the_keep_alive_header_is_read(value, expected):
    assert keep_alive(value) == expected


def test_a_generation_run_against_a_server_that_closes_kept_connections_has_no_failure():
    with emulated("close_second") as server:
        result = execute_generation(RunConfig(target=server.url, output_tokens="4",
                                              requests=12, concurrency=2, warmup=0),
                                    force=True)
    assert result.status == "completed", result.failure
    assert result.summary.errors == 0
    assert result.summary.successful == 12
    retried = result.environment["target"]["retried_requests"]
    assert 1 <= retried <= 2  # at most each connection's second request, then none reused
    assert any("sent again on a fresh connection" in w for w in result.warnings)
