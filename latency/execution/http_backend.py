"""The HTTP backend of a run: a server (ours, started in its own process on 127.0.0.1) or a
remote target, the HTTP client, and the server's response counters.

It keeps the same ``Backend`` protocol as the in-process one (``latency.execution.backends``):
everything else stays the same — the same load generator, request log and summary.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import torch

from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.core.describe import server_label
from latency.loadgen.bodies import load_bodies
from latency.loadgen.http_client import HttpTransport, split_target
from latency.pipelines.inputs import read_inputs
from latency.pipelines.registry import build_pipeline
from latency.serve.http_app import parse_metrics
from latency.serve.http_server import ServerProcess
from latency.serve.ray_serve import RayServe

#: open loop: the client pool's connections (requests beyond wait for a free one, and that
#: wait is part of their network time, as in any pooled client).
OPEN_LOOP_CONNECTIONS = 256


#: the largest answer a health check or /metrics may give (ours are a few kB)
MAX_GET_BYTES = 16 * 1024 * 1024


def http_get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
    """(status, body) of a GET; status 0 and the reason as body when nothing answered.

    Bounded as a whole, not per read: urllib's timeout restarts at every byte, so a server
    that dribbles its answer would hold the run (and a stop) for ever. The GET runs in a
    daemon thread joined for ``timeout_s``, and reads at most ``MAX_GET_BYTES``."""
    result: list[tuple[int, bytes]] = []
    worker = threading.Thread(target=lambda: result.append(_get(url, timeout_s)),
                              name="http-get", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not result:
        return 0, f"no complete answer within {timeout_s:g} s".encode()
    return result[0]


def _get(url: str, timeout_s: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - http(s)
            body = resp.read(MAX_GET_BYTES + 1)
            if len(body) > MAX_GET_BYTES:
                return 0, f"the answer is larger than {MAX_GET_BYTES >> 20} MiB".encode()
            return resp.status, body
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(MAX_GET_BYTES)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return 0, str(reason).encode()


def server_counts(base: str) -> dict[int, int] | None:
    """Responses by status code from ``{base}/metrics``, or None where there is no such
    counter (a remote server other than ours)."""
    status, body = http_get(f"{base}/metrics")
    if status != 200:
        return None
    counts = parse_metrics(body.decode("utf-8", "replace"))
    return counts or None


def retried_note(retried: int) -> list[str]:
    """The run's line for requests sent again on a fresh connection (``http1_pool``)."""
    if not retried:
        return []
    return [f"{retried} request(s) were sent again on a fresh connection: the server closed a "
            "kept-alive connection as they went out, before any byte of a reply (each "
            "counted once, its time from the first send); after the first, every request "
            "had a connection of its own"]


#: how long our server process may take to end once a run abandoned what it had sent: the
#: run's measurement is already read (its counters too), and the run process itself must end
#: within ``process.KILL_AFTER_STOP_S`` of a stop, hung stages or not
ABANDONED_STOP_S = 1.0


class HttpBackend:
    """The HTTP side of one run."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.wan = config.wan
        self.server: ServerProcess | RayServe | None = None
        self.transport: HttpTransport | None = None
        self.base = ""
        self.model = config.model
        self._before: dict[int, int] | None = None
        self._abandoned = False

    def inputs(self) -> list[Any]:
        """Request bodies from ``--bodies``, else raw inputs from the sample pipeline (built on
        the CPU in this process only to generate them: the model runs in the server)."""
        c = self.config
        if c.bodies is not None:
            return list(load_bodies(c.bodies, require_json=c.target_protocol == "oip"))
        if c.inputs is not None:
            return read_inputs(c.inputs, c.input_order, c.seed)
        return build_pipeline(c.model, torch.device("cpu"), torch.float32, c.model_args,
                              spec=c.pipeline).sample_inputs(c.input_pool, c.seed)

    def start(self, timings: Timings, env: dict[str, Any],
              on_phase: Any = None) -> HttpTransport:
        c = self.config
        t = time.perf_counter()
        if c.target is None:
            self.server = (RayServe(c) if c.backend == "ray"
                           else ServerProcess(c, c.max_body_mb)).start()
            self.base = self.server.url
            timings.server_start_s = time.perf_counter() - t
            timings.update(self.server.ready.get("timings") or {})  # measured in the server
            if self.server.ready.get("optimization") is not None:
                env["optimization"] = self.server.ready["optimization"]
        elif c.target_protocol == "http":
            self.base = c.target
            self._check_plain_target()
        else:
            self.base, self.model = split_target(c.target, c.model)
            status, body = http_get(f"{self.base}/v2/health/ready", timeout_s=10)
            if status != 200:
                why = f"HTTP {status}" if status else body.decode("utf-8", "replace")
                hint = ("; not an Open Inference Protocol server? add --target-protocol http"
                        if status == 404 else "")
                raise ConnectionError(f"target {self.base} is not ready "
                                      f"(GET /v2/health/ready: {why}){hint}")
            status, body = http_get(f"{self.base}/v2/models/{self.model}")
            if status == 200:
                try:
                    env["target_model"] = json.loads(body)
                except json.JSONDecodeError:
                    pass
            elif status == 404:
                raise LookupError(f"target {self.base} has no model {self.model!r} "
                                  "(GET /v2/models/{name}: 404)")
        plain = c.target_protocol == "http"
        env["transport"] = {"kind": "http", "url": self.base, "model": self.model,
                            "protocol": "plain HTTP" if plain else "Open Inference Protocol",
                            "server": server_label(c), "payload":
                            "bodies file" if c.bodies else c.payload,
                            "wan": self.wan.to_dict() if self.wan.active else None}
        if plain:
            env["transport"].update(method=c.http_method, content_type=c.content_type)
        if isinstance(self.server, RayServe):
            env["transport"].update(ray_preprocess=c.ray_preprocess,
                                    ray_address=c.ray_address or "local instance",
                                    ray_logs=self.server.logs)
        self._before = None if plain else server_counts(self.base)
        connections = (c.concurrency or 1) if c.rate is None else OPEN_LOOP_CONNECTIONS
        self.transport = HttpTransport(self.base, self.model, payload=c.payload, wan=self.wan,
                                       connections=connections, seed=c.seed,
                                       prebuilt_bodies=c.bodies is not None,
                                       endpoint=c.target if plain else None,
                                       method=c.http_method, content_type=c.content_type,
                                       body_template=c.body_template)
        return self.transport

    def _check_plain_target(self) -> None:
        """A plain HTTP target: GET its health URL if given (2xx = ready), else make sure
        something listens at its host and port — one clear line before any request."""
        c = self.config
        if c.health_url:
            status, body = http_get(c.health_url, timeout_s=10)
            if not 200 <= status < 300:
                why = f"HTTP {status}" if status else body.decode("utf-8", "replace")
                raise ConnectionError(f"target {c.health_url} is not ready ({why})")
            return
        import socket
        from urllib.parse import urlsplit

        parts = urlsplit(str(c.target))
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname, port), timeout=10).close()
        except OSError as exc:
            raise ConnectionError(f"target {c.target} is unreachable ({parts.hostname}:{port}: "
                                  f"{exc.strerror or exc})") from None

    def begin_measuring(self) -> None:
        """Read our server's response counters now, after the warm-up, so the counts the run
        reports are those of the measured phase (a warm-up error is not another client's)."""
        if self.config.target_protocol == "oip" and self.base:
            self._before = server_counts(self.base)

    def abandon(self) -> None:
        """On Stop: requests already sent finish on the server (HTTP cannot recall them); our
        server is then given only ``ABANDONED_STOP_S`` to end when the run closes."""
        self._abandoned = True

    def close(self, timings: Timings, warnings: list[str]) -> None:
        """Read the server's counters (what it answered during the run, from every client),
        then close the client and stop our server."""
        plain = self.config.target_protocol == "http"
        after = server_counts(self.base) if self.base and not plain else None
        if after is not None:
            before = self._before or {}
            delta = {str(k): v - before.get(k, 0) for k, v in sorted(after.items())
                     if v - before.get(k, 0) > 0}
            errors = sum(v for k, v in delta.items() if int(k) >= 400)
            timings.count_server(delta, errors)
            if errors:
                kinds = ", ".join(f"{n}× HTTP {k}" for k, n in delta.items() if int(k) >= 400)
                warnings.append(f"the server answered {errors} request(s) with an error status "
                                f"during the run ({kinds}), other clients' requests included")
        elif self.base:
            timings.count_server(None, None)  # a remote server without our /metrics
        if self.transport is not None:
            self.transport.close()
            warnings += retried_note(self.transport.retried)
        if isinstance(self.server, ServerProcess) and self._abandoned:
            self.server.stop(grace_s=ABANDONED_STOP_S)  # a hung stage would hold it
        elif self.server is not None:
            self.server.stop()
