"""The HTTP server as a process: uvicorn serving the OIP app (``http_app``) of a server made by
the one builder (``builder``), for ``python -m latency serve`` and for an HTTP run — or, for a
generative pipeline, the OpenAI-compatible app (``openai_app``) of its generation server
(``builder`` too), which also keeps its recent scheduler steps for the run (``gen_steps``).

Why a process of its own for a run: see ``ServerProcess``. The process reads its config as
JSON on the command line and answers with one line on a pipe of its own, ``ready {...}``: the
port, the builder's timings and the optimisation report of the levers it applied, so an HTTP
run records the same facts as an in-process one — or ``error <Type>: <message>`` when it cannot
serve.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any

from latency.core.config import DEFAULT_MAX_BODY_MB, RunConfig
from latency.core.errors import error_text
from latency.core.timing import GIL_SWITCH_INTERVAL_S
from latency.host.processes import exit_now
from latency.pipelines.generative import is_generative
from latency.pipelines.registry import pipeline_class
from latency.serve.builder import BuiltGenServer, BuiltServer, build_gen_server, build_server
from latency.serve.gen_steps import StepRing
from latency.serve.http_app import create_app
from latency.serve.openai_app import create_openai_app

#: the longest status line read from the server process (a ready line is a few kB)
MAX_STATUS = 1 << 20
#: lines of the server process's own output kept (for the reason it could not start)
TAIL_LINES = 200


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


def uvicorn_server(app: Any, limits: Any = None) -> Any:
    """A quiet uvicorn server: long keep-alive (a load generator's pooled connections must
    not be dropped between warm-up and measuring), no access log, uvloop if there, and
    httptools with the HTTP layer's limits (``http_limits``: head time and size, a connection
    cap below the file descriptor limit; ``limits``, default ``Limits.from_env()``), its
    refusals counted in ``app.state.stats``. No WebSocket: the app has no such route."""
    import uvicorn

    from latency.serve.http_limits import Guard, Limits, connection_cap, protocol_class

    limits = limits if limits is not None else Limits.from_env()
    guard = Guard(limits, app.state.stats, connection_cap(limits.max_connections))
    cfg = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                         timeout_keep_alive=120, backlog=2048,
                         timeout_graceful_shutdown=3, http=protocol_class(guard), ws="none")
    return uvicorn.Server(cfg)


def serve(config: RunConfig, host: str, port: int, max_body_mb: float = DEFAULT_MAX_BODY_MB,
          on_ready: Any = None, stop: Any = None) -> None:
    """Serve ``config``'s pipeline until Ctrl-C (or ``stop`` is set). ``on_ready(port, built)``
    is called once uvicorn serves (and handles Ctrl-C itself)."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    sock = bind(host, port)
    built: BuiltServer | BuiltGenServer
    if serves_generation(config):
        ring = StepRing()
        built = build_gen_server(config, on_step=ring.add)
        app = create_openai_app(built.server, config.model, int(built.pipeline.max_context),
                                int(max_body_mb * 1024 * 1024), steps=ring)
    else:
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


def serves_generation(config: RunConfig) -> bool:
    """Whether ``config`` names a generative pipeline (served by the OpenAI-compatible app)."""
    return is_generative(pipeline_class(config.model, config.pipeline))


# ---- the server as a child process of a run ---------------------------------------------------
class ServerProcess:
    """The run's HTTP server in its own process, on 127.0.0.1 and a free port.

    Why a process and not a thread of the run: the load generator's threads and the server's
    threads would share one GIL, so every client-side step would be charged to the server's
    queue and every server step to the client's network time. ``bench/bench_http.py``
    measures the difference.

    Why ``subprocess`` and not ``multiprocessing``: the run itself is a daemonic
    multiprocessing child (``latency.execution.process``), and those may not have children. The
    server reads its config as JSON on the command line, writes ``ready {...}`` (port, the
    builder's timings, the optimisation report) on a status pipe, and stops when its stdin
    closes — so it also stops if the run process dies.

    Why a status pipe and not stdout: a pipeline may print, before it is ready or while it
    serves, and its output must neither be mistaken for the status line nor block the server.
    Its stdout and stderr share one pipe that a thread here always reads, keeping only the last
    ``TAIL_LINES`` lines (memory and disk stay bounded however much it prints); when the
    server cannot start, the reason is its own ``error`` line, else the last line it wrote.
    """

    def __init__(self, config: RunConfig, max_body_mb: float = DEFAULT_MAX_BODY_MB) -> None:
        self.config = config
        self.max_body_mb = max_body_mb
        self.port: int | None = None
        #: what the server process reported once ready: ``timings`` and ``optimization``
        self.ready: dict[str, Any] = {}
        self._proc: Any = None
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 120.0) -> ServerProcess:
        status_r, status_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "latency.serve.http_server",
                 json.dumps(self.config.to_dict()), str(self.max_body_mb), str(status_w)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, errors="replace", cwd=os.getcwd(), pass_fds=(status_w,))
        finally:
            os.close(status_w)
        self._drainer = threading.Thread(target=self._drain, name="server-output", daemon=True)
        self._drainer.start()
        status = os.fdopen(status_r, "r")
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(status.readline(MAX_STATUS)),
                                  daemon=True)
        reader.start()
        reader.join(timeout_s)
        text = line[0].strip() if line else ""
        if not text.startswith("ready "):
            self.stop()
            why = text.removeprefix("error ") or self._last_line() or \
                f"no answer within {timeout_s:g} s"
            status.close()
            raise RuntimeError(f"the HTTP server could not start: {why}")
        status.close()
        self.ready = json.loads(text[len("ready "):])
        self.port = int(self.ready["port"])
        return self

    def _drain(self) -> None:
        """Read the server's output as long as it writes (lines cut at 64 kB), keeping the
        tail."""
        out = self._proc.stdout
        for line in iter(lambda: out.readline(65536), ""):
            if line.strip():
                self._tail.append(line.rstrip("\n"))

    def _last_line(self) -> str:
        """The last line the server process wrote (a traceback ends with its exception)."""
        self._drainer.join(timeout=2)  # the process has ended: its output is complete
        return self._tail[-1].strip() if self._tail else ""

    def stop(self, grace_s: float = 10.0) -> None:
        """Close the server's stdin (its watchdog stops it cleanly) and wait ``grace_s`` for
        it to end, then kill it: a server whose stage hangs never ends by itself."""
        if self._proc is None:
            return
        try:
            self._proc.stdin.close()  # the server's watchdog sees EOF and stops cleanly
        except OSError:
            pass
        try:
            self._proc.wait(timeout=grace_s)
        except Exception:  # noqa: BLE001 - hung: kill it
            self._proc.kill()
            self._proc.wait(timeout=5)


def ready_line(port: int, built: BuiltServer | BuiltGenServer) -> str:
    """The one line a server process answers with once it serves."""
    report = built.optimization.to_dict() if built.optimization is not None else None
    return "ready " + json.dumps({"port": port, "timings": built.timings,
                                  "optimization": report})


def _main(argv: list[str]) -> int:
    """``python -m latency.serve.http_server CONFIG_JSON MAX_BODY_MB [STATUS_FD]``
    (ServerProcess): the ``ready``/``error`` line goes to STATUS_FD (default stdout)."""
    stop = threading.Event()
    status = os.fdopen(int(argv[2]), "w") if len(argv) > 2 else sys.stdout

    def say(line: str) -> None:
        print(line, file=status, flush=True)

    def watchdog() -> None:  # the parent closed our stdin (or died): stop
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watchdog, name="stdin-watchdog", daemon=True).start()
    try:
        serve(RunConfig.from_dict(json.loads(argv[0])), "127.0.0.1", 0, float(argv[1]),
              on_ready=lambda port, built: say(ready_line(port, built)), stop=stop)
    except KeyboardInterrupt:
        return 0
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - one line for the parent
        say(f"error {error_text(exc)}")
        return 1
    return 0


if __name__ == "__main__":
    exit_now(_main(sys.argv[1:]))
