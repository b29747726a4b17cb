"""The HTTP server: the same ``Server`` (preprocess pool, batch queue, replicas) behind the Open
Inference Protocol, on Starlette + uvicorn.

Why Starlette and not FastAPI: the infer route reads the body itself (to stop at the size limit
before buffering it) and writes its own ``Server-Timing``; FastAPI's request models would add
pydantic validation per request and give nothing this route uses. uvicorn runs with uvloop and
httptools when installed (both in requirements.txt): the fastest standard ASGI stack in Python.

Routes (KServe v2 / OIP):

    GET  /v2/health/live, /v2/health/ready      liveness / readiness
    GET  /v2                                    server metadata
    GET  /v2/models/{name}[/ready]              model metadata / readiness (404 if unknown)
    POST /v2/models/{name}/infer                OIP JSON, or the raw input as
                                                application/octet-stream (see ``oip``)
    GET  /metrics                               Prometheus counters of responses by status

What the server's own clock covers (``Server-Timing``): from the moment the decoded request is
handed to the serving machinery to the moment its response object is ready — queue,
preprocess, forward, postprocess. Reading the socket, parsing HTTP and the OIP envelope,
base64, encoding the reply and writing it are transport work: the client sees them as
``network`` (client-observed minus server-observed time).

Safety: binds 127.0.0.1 unless told otherwise; a body over the limit gets 413 (checked against
Content-Length before reading, and while streaming); malformed JSON or a wrong tensor shape
400 with the reason; an unknown model 404. Every refusal is counted and the server goes on.
"""
from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from latency.components import Request
from latency.timing import now_ns
from latency.transport.oip import (JSON_TYPE, ProtocolError, decode_request, encode_response,
                                   error_body, format_server_timing)

DEFAULT_MAX_BODY_MB = 32.0
#: exception types that mean the *input* was bad (400), not the server (500).
_CLIENT_FAULTS = ("ValueError", "TypeError", "KeyError", "UnicodeDecodeError",
                  "JSONDecodeError", "IndexError")
METRIC = "latency_lab_http_responses_total"


@dataclass
class ServerStats:
    """Responses by status code; touched only on the event-loop thread."""

    by_status: dict[int, int] = field(default_factory=dict)

    def count(self, status: int) -> None:
        self.by_status[status] = self.by_status.get(status, 0) + 1

    def prometheus(self) -> str:
        lines = [f"# HELP {METRIC} HTTP responses of the Latency Lab server, by status code",
                 f"# TYPE {METRIC} counter"]
        lines += [f'{METRIC}{{code="{code}"}} {n}' for code, n in sorted(self.by_status.items())]
        return "\n".join(lines) + "\n"


def parse_metrics(text: str) -> dict[int, int]:
    """Status code → count from our ``/metrics`` text (other metrics are ignored)."""
    out: dict[int, int] = {}
    for line in text.splitlines():
        if line.startswith(METRIC + "{"):
            try:
                labels, value = line[len(METRIC):].rsplit(None, 1)
                code = int(labels.split('"')[1])
                out[code] = out.get(code, 0) + int(float(value))
            except (ValueError, IndexError):
                continue
    return out


def error_status(message: str) -> int:
    """400 when a preprocess error says the input was bad, else 500."""
    if message.startswith("preprocess: ") and message[12:].split(":")[0] in _CLIENT_FAULTS:
        return 400
    return 500


def server_timing_ns(r: Request) -> dict[str, int]:
    """The server's own durations of one request (its three waits summed as ``queue``)."""
    return {"queue": (r.t_pre_start - r.t_sent) + (r.t_fwd_start - r.t_pre_end)
            + (r.t_post_start - r.t_fwd_end),
            "preprocess": r.t_pre_end - r.t_pre_start,
            "forward": r.t_fwd_end - r.t_fwd_start,
            "postprocess": r.t_post_end - r.t_post_start}


def create_app(server: Any, model: str, max_body_bytes: int,
               stats: ServerStats | None = None) -> Any:
    """The Starlette app serving ``server`` (a started ``latency.serving.Server``) as ``model``."""
    from starlette.applications import Starlette
    from starlette.requests import Request as HttpRequest
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    stats = stats if stats is not None else ServerStats()
    submit = server.submit

    def refuse(status: int, message: str) -> Response:
        stats.count(status)
        return Response(error_body(message), status, media_type=JSON_TYPE)

    def unknown(name: str) -> Response:
        return refuse(404, f"unknown model {name!r}; this server serves {model!r}")

    async def read_body(request: HttpRequest) -> bytes:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_body_bytes:
            raise ProtocolError(413, f"body of {int(length)} bytes is over the "
                                     f"{max_body_bytes}-byte limit")
        chunks, n = [], 0
        async for chunk in request.stream():
            n += len(chunk)
            if n > max_body_bytes:
                raise ProtocolError(413, f"body is over the {max_body_bytes}-byte limit")
            chunks.append(chunk)
        return b"".join(chunks)

    async def infer(request: HttpRequest) -> Response:
        name = request.path_params["name"]
        if name != model:
            return unknown(name)
        try:
            body = await read_body(request)
            raw, rid = decode_request(body, request.headers.get("content-type", JSON_TYPE))
        except ProtocolError as exc:
            return refuse(exc.status, str(exc))
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def settle(_: Any) -> None:
            if not done.done():
                done.set_result(None)

        r = Request(raw, 0, False, lambda req: loop.call_soon_threadsafe(settle, req),
                    now_ns())
        r.t_sent = r.t_intended
        submit(r)
        await done
        if r.cancelled:
            return refuse(503, "the server is shutting down")
        headers = {"Server-Timing": format_server_timing(server_timing_ns(r)),
                   "Latency-Lab-Batch": f"{r.batch_id};{r.batch_size};{r.replica}"}
        if r.error is not None:
            status = error_status(r.error)
            stats.count(status)
            return Response(error_body(r.error), status, headers, media_type=JSON_TYPE)
        stats.count(200)
        return Response(encode_response(model, r.response, rid), 200, headers,
                        media_type=JSON_TYPE)

    async def ready(request: HttpRequest) -> Response:
        stats.count(200)
        return JSONResponse({"ready": True})

    async def server_meta(request: HttpRequest) -> Response:
        stats.count(200)
        return JSONResponse({"name": "latency-lab", "version": "1", "extensions": []})

    async def model_meta(request: HttpRequest) -> Response:
        name = request.path_params["name"]
        if name != model:
            return unknown(name)
        stats.count(200)
        return JSONResponse({
            "name": model, "versions": ["1"], "platform": "pytorch",
            "inputs": [{"name": "input", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "output", "datatype": "BYTES", "shape": [1]}],
            "parameters": {"batch_size": server.batches.max_batch,
                           "replicas": len(server._replicas)}})

    async def model_ready(request: HttpRequest) -> Response:
        name = request.path_params["name"]
        if name != model:
            return unknown(name)
        stats.count(200)
        return JSONResponse({"name": model, "ready": True})

    async def metrics(request: HttpRequest) -> Response:
        return PlainTextResponse(stats.prometheus())

    async def not_found(request: HttpRequest, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        return refuse(code, f"no route {request.method} {request.url.path}")

    routes = [
        Route("/v2/health/live", ready), Route("/v2/health/ready", ready),
        Route("/v2", server_meta),
        Route("/v2/models/{name}", model_meta),
        Route("/v2/models/{name}/ready", model_ready),
        Route("/v2/models/{name}/infer", infer, methods=["POST"]),
        Route("/v2/models/{name}/versions/{version}/infer", infer, methods=["POST"]),
        Route("/metrics", metrics),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    app.state.stats = stats
    return app


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket (port 0: any free port), made here so its port is known before
    uvicorn starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def build_server(config: Any) -> tuple[Any, Any]:
    """(pipeline, started Server) for a validated RunConfig: the same machinery as in-process."""
    import torch

    from latency.devices import DTYPES, resolve_device
    from latency.registry import build_pipeline
    from latency.serving import Server

    torch.set_num_threads(config.threads)
    pipeline = build_pipeline(config.model, resolve_device(config.device),
                              DTYPES[config.dtype], config.model_args)
    if (getattr(config, "optimize", None) or getattr(config, "pre", "fast") != "fast"
            or getattr(config, "post", "fast") != "fast"):
        from latency.optimize import prepare  # the same levers as an in-process run

        prepare(pipeline, config.optimize, config.pre, config.post, config.batch_size)
    server = Server(pipeline, replicas=config.replicas, threads=config.threads,
                    max_batch=config.batch_size, max_delay_ms=config.max_batch_delay_ms,
                    preprocess_workers=config.preprocess_workers)
    server.start()
    return pipeline, server


def uvicorn_server(app: Any) -> Any:
    """A quiet uvicorn server: long keep-alive (a load generator's pooled connections must
    not be dropped between warm-up and measuring), no access log, uvloop/httptools if there."""
    import uvicorn

    cfg = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                         timeout_keep_alive=120, backlog=2048,
                         timeout_graceful_shutdown=3)
    return uvicorn.Server(cfg)


def serve(config: Any, host: str, port: int, max_body_mb: float = DEFAULT_MAX_BODY_MB,
          on_ready: Any = None, stop: Any = None) -> None:
    """Serve ``config``'s pipeline until Ctrl-C (or ``stop`` is set). ``on_ready(port)`` is
    called once the socket listens."""
    import sys

    from latency.timing import GIL_SWITCH_INTERVAL_S

    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    sock = bind(host, port)
    _, server = build_server(config)
    app = create_app(server, config.model, int(max_body_mb * 1024 * 1024))
    uv = uvicorn_server(app)
    if stop is not None:
        def watch() -> None:
            stop.wait()
            uv.should_exit = True

        threading.Thread(target=watch, name="stop-watch", daemon=True).start()
    if on_ready is not None:
        port = sock.getsockname()[1]

        def announce() -> None:  # once uvicorn serves (and handles Ctrl-C itself)
            while not uv.started and not uv.should_exit:
                time.sleep(0.01)
            if uv.started:
                on_ready(port)

        threading.Thread(target=announce, name="announce", daemon=True).start()
    try:
        uv.run(sockets=[sock])
    finally:
        server.stop()
        sock.close()


# ---- the server as a child process of a run ---------------------------------------------------
class ServerProcess:
    """The run's HTTP server in its own process, on 127.0.0.1 and a free port.

    Why a process and not a thread of the run: the load generator's threads and the server's
    threads would share one GIL, so every client-side step would be charged to the server's
    queue and every server step to the client's network time. ``bench/bench_http.py``
    measures the difference.

    Why ``subprocess`` and not ``multiprocessing``: the run itself is a daemonic
    multiprocessing child (``latency.runner``), and those may not have children. The server
    reads its config as JSON on the command line, prints ``ready PORT``, and stops when its
    stdin closes — so it also stops if the run process dies.
    """

    def __init__(self, config: Any, max_body_mb: float = DEFAULT_MAX_BODY_MB) -> None:
        self.config = config
        self.max_body_mb = max_body_mb
        self.port: int | None = None
        self._proc: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 120.0) -> "ServerProcess":
        import json
        import os
        import subprocess
        import sys
        from pathlib import Path

        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        import tempfile

        # stderr to a file, not a pipe nobody drains: a chatty pipeline must not block the server
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "latency.transport.http_server",
             json.dumps(self.config.to_dict()), str(self.max_body_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            env=env, cwd=root)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self._proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout_s)
        text = line[0].strip() if line else ""
        if not text.startswith("ready "):
            self.stop()
            self._stderr.seek(0)
            err = self._stderr.read().strip().splitlines()
            why = text or (err[-1] if err else f"no answer within {timeout_s:g} s")
            raise RuntimeError(f"the HTTP server could not start: {why}")
        self.port = int(text.split()[1])
        return self

    def stop(self) -> None:
        if self._proc is None:
            return
        try:
            self._proc.stdin.close()  # the server's watchdog sees EOF and stops cleanly
        except OSError:
            pass
        try:
            self._proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - hung: kill it
            self._proc.kill()
            self._proc.wait(timeout=5)
        self._stderr.close()


def _main(argv: list[str]) -> int:
    """``python -m latency.transport.http_server CONFIG_JSON MAX_BODY_MB`` (ServerProcess)."""
    import json
    import sys

    from latency.config import RunConfig

    stop = threading.Event()

    def watchdog() -> None:  # the parent closed our stdin (or died): stop
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watchdog, name="stdin-watchdog", daemon=True).start()
    try:
        serve(RunConfig.from_dict(json.loads(argv[0])), "127.0.0.1", 0, float(argv[1]),
              on_ready=lambda port: print(f"ready {port}", flush=True), stop=stop)
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # noqa: BLE001 - one line for the parent
        text = str(exc).splitlines()[0] if str(exc) else ""
        print(f"error {type(exc).__name__}: {text}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
