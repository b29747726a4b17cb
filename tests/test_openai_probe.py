"""The probe before a run against an OpenAI-compatible server (latency.execution.openai_probe):
against our own server in its own process, the served model, the route and the round-trip
floor are found; against what is not such a server — a 404 route, an HTML page, a reply that
is not a stream, a refused key, nobody listening — it is one line naming what is wrong."""
from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.openai_probe import api_key, probe_target
from latency.serve.http_server import ServerProcess
from tests.conftest import QuietHandler, loopback_server


@pytest.fixture(scope="module")
def ours() -> Iterator[ServerProcess]:
    cfg = RunConfig(model="synthetic-lm", model_args={"prefill_ms": 1.0, "step_ms": 1.0},
                    max_running=2).checked()
    proc = ServerProcess(cfg).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_our_server_is_found_with_its_model_route_and_round_trip(ours, api):
    info = probe_target(ours.url, api)
    assert info.model == "synthetic-lm" and info.models == ("synthetic-lm",)
    assert info.url == f"{ours.url}/v1/{'chat/completions' if api == 'chat' else 'completions'}"
    assert info.usage  # include_usage is honoured
    assert info.forces_length  # ignore_eos is taken
    assert 0 < info.rtt_floor_ns < 1_000_000_000


def test_a_model_the_server_does_not_serve_is_one_line(ours):
    with pytest.raises(ConfigError, match=r"--target .*HTTP|404"):
        probe_target(ours.url, "chat", served_model="no-such-model")


def _handler(status: int, ctype: str, body: bytes, models: bool = True
             ) -> type[BaseHTTPRequestHandler]:
    class H(QuietHandler):
        def _send(self, code: int, kind: str, data: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if models and self.path.endswith("/models"):
                self._send(200, "application/json",
                           json.dumps({"data": [{"id": "m"}]}).encode())
            else:
                self._send(status, ctype, body)

        def do_POST(self) -> None:
            self.read_body()
            self._send(status, ctype, body)

    return H


@pytest.mark.parametrize("status,ctype,body,models,says", [
    (404, "application/json", b'{"detail":"Not Found"}', True, "answered 404"),
    (200, "text/html", b"<html>hello</html>", True, "did not stream"),
    (200, "text/event-stream", b"data: {\"choices\": []}\n\n", True, "ending in \\[DONE\\]"),
    (401, "application/json", b'{"error": {"message": "bad key"}}', True, "refused"),
    (404, "text/html", b"<html>nope</html>", False, "named no model"),
    (500, "application/json", b'{"error": "boom"}', True, "HTTP 500: boom"),
])
def test_what_is_not_an_openai_streaming_server_is_one_line(status, ctype, body, models,
                                                               says):
    with loopback_server(_handler(status, ctype, body, models), path="/v1") as url:
        with pytest.raises(ConfigError, match=says) as err:
            probe_target(url, "chat")
    assert "\n" not in str(err.value)


def test_nobody_listening_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match="cannot reach it"):
        probe_target(f"http://127.0.0.1:{port}/v1")


def test_the_api_key_comes_from_the_environment_only(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    assert api_key(None) == "sk-secret"
    monkeypatch.setenv("MY_KEY", "other")
    assert api_key("MY_KEY") == "other"
    with pytest.raises(ConfigError, match="--api-key-env NOPE"):
        api_key("NOPE")
