"""The HTTP server as a process: uvicorn serving the OIP app (``http_app``) of a server made by
the one builder (``builder``), for ``python -m latency serve`` and for an HTTP run.

Why a process of its own for a run: see ``ServerProcess``. The process reads its config as
JSON on the command line and answers on stdout with one line, ``ready {...}``: the port, the
builder's timings and the optimisation report of the levers it applied, so an HTTP run records
the same facts as an in-process one.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from latency.core.config import DEFAULT_MAX_BODY_MB, RunConfig
from latency.core.timing import GIL_SWITCH_INTERVAL_S
from latency.serve.builder import BuiltServer, build_server
from latency.serve.http_app import create_app


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


def uvicorn_server(app: Any) -> Any:
    """A quiet uvicorn server: long keep-alive (a load generator's pooled connections must
    not be dropped between warm-up and measuring), no access log, uvloop/httptools if there."""
    import uvicorn

    cfg = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                         timeout_keep_alive=120, backlog=2048,
                         timeout_graceful_shutdown=3)
    return uvicorn.Server(cfg)


def serve(config: RunConfig, host: str, port: int, max_body_mb: float = DEFAULT_MAX_BODY_MB,
          on_ready: Any = None, stop: Any = None) -> None:
    """Serve ``config``'s pipeline until Ctrl-C (or ``stop`` is set). ``on_ready(port, built)``
    is called once uvicorn serves (and handles Ctrl-C itself)."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    sock = bind(host, port)
    built = build_server(config)
    app = create_app(built.server, config.model, int(max_body_mb * 1024 * 1024))
    uv = uvicorn_server(app)
    if stop is not None:
        def watch() -> None:
            stop.wait()
            uv.should_exit = True

        threading.Thread(target=watch, name="stop-watch", daemon=True).start()
    if on_ready is not None:
        bound = sock.getsockname()[1]

        def announce() -> None:
            while not uv.started and not uv.should_exit:
                time.sleep(0.01)
            if uv.started:
                on_ready(bound, built)

        threading.Thread(target=announce, name="announce", daemon=True).start()
    try:
        uv.run(sockets=[sock])
    finally:
        built.server.stop()
        sock.close()


# ---- the server as a child process of a run ---------------------------------------------------
class ServerProcess:
    """The run's HTTP server in its own process, on 127.0.0.1 and a free port.

    Why a process and not a thread of the run: the load generator's threads and the server's
    threads would share one GIL, so every client-side step would be charged to the server's
    queue and every server step to the client's network time. ``bench/bench_http.py``
    measures the difference.

    Why ``subprocess`` and not ``multiprocessing``: the run itself is a daemonic
    multiprocessing child (``latency.execution.process``), and those may not have children. The
    server reads its config as JSON on the command line, prints ``ready {...}`` (port, the
    builder's timings, the optimisation report), and stops when its stdin closes — so it also
    stops if the run process dies.
    """

    def __init__(self, config: RunConfig, max_body_mb: float = DEFAULT_MAX_BODY_MB) -> None:
        self.config = config
        self.max_body_mb = max_body_mb
        self.port: int | None = None
        #: what the server process reported once ready: ``timings`` and ``optimization``
        self.ready: dict[str, Any] = {}
        self._proc: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 120.0) -> ServerProcess:
        # stderr to a file, not a pipe nobody drains: a chatty pipeline must not block the server
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "latency.serve.http_server",
             json.dumps(self.config.to_dict()), str(self.max_body_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            cwd=os.getcwd())
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
        self.ready = json.loads(text[len("ready "):])
        self.port = int(self.ready["port"])
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


def ready_line(port: int, built: BuiltServer) -> str:
    """The one line a server process answers with once it serves."""
    report = built.optimization.to_dict() if built.optimization is not None else None
    return "ready " + json.dumps({"port": port, "timings": built.timings,
                                  "optimization": report})


def _main(argv: list[str]) -> int:
    """``python -m latency.serve.http_server CONFIG_JSON MAX_BODY_MB`` (ServerProcess)."""
    stop = threading.Event()

    def watchdog() -> None:  # the parent closed our stdin (or died): stop
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watchdog, name="stdin-watchdog", daemon=True).start()
    try:
        serve(RunConfig.from_dict(json.loads(argv[0])), "127.0.0.1", 0, float(argv[1]),
              on_ready=lambda port, built: print(ready_line(port, built), flush=True),
              stop=stop)
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # noqa: BLE001 - one line for the parent
        text = str(exc).splitlines()[0] if str(exc) else ""
        print(f"error {type(exc).__name__}: {text}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
