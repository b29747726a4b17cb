"""The HTTP backend of a run: a server (ours, started in its own process on 127.0.0.1) or a
remote target, the HTTP client, and the server's response counters.

It keeps the same ``Backend`` protocol as the in-process one (``latency.run.backends``):
everything else stays the same — the same load generator, request log and summary.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import torch

from latency.core.config import RunConfig
from latency.load.bodies import load_bodies
from latency.load.http_client import HttpTransport, split_target
from latency.pipelines.registry import build_pipeline
from latency.serve.http_app import parse_metrics
from latency.serve.http_server import ServerProcess

#: open loop: the client pool's connections (requests beyond wait for a free one, and that
#: wait is part of their network time, as in any pooled client).
OPEN_LOOP_CONNECTIONS = 256


def http_get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
    """(status, body) of a GET; status 0 and the reason as body when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - http(s)
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
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


class HttpBackend:
    """The HTTP side of one run."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.wan = config.wan
        self.server: ServerProcess | None = None
        self.transport: HttpTransport | None = None
        self.base = ""
        self.model = config.model
        self._before: dict[int, int] | None = None

    def inputs(self) -> list[Any]:
        """Request bodies from ``--bodies``, else raw inputs from the sample pipeline (built on
        the CPU in this process only to generate them: the model runs in the server)."""
        c = self.config
        if c.bodies is not None:
            return list(load_bodies(c.bodies))
        return build_pipeline(c.model, torch.device("cpu"), torch.float32,
                              c.model_args).sample_inputs(c.input_pool, c.seed)

    def start(self, timings: dict[str, Any], env: dict[str, Any],
              on_phase: Any = None) -> HttpTransport:
        c = self.config
        t = time.perf_counter()
        if c.target is None:
            self.server = ServerProcess(c, c.max_body_mb).start()
            self.base = self.server.url
            timings["server_start_s"] = time.perf_counter() - t
            timings.update(self.server.ready.get("timings") or {})  # measured in the server
            if self.server.ready.get("optimization") is not None:
                env["optimization"] = self.server.ready["optimization"]
        else:
            self.base, self.model = split_target(c.target, c.model)
            status, body = http_get(f"{self.base}/v2/health/ready", timeout_s=10)
            if status != 200:
                why = f"HTTP {status}" if status else body.decode("utf-8", "replace")
                raise ConnectionError(f"target {self.base} is not ready "
                                      f"(GET /v2/health/ready: {why})")
            status, body = http_get(f"{self.base}/v2/models/{self.model}")
            if status == 200:
                try:
                    env["target_model"] = json.loads(body)
                except json.JSONDecodeError:
                    pass
            elif status == 404:
                raise LookupError(f"target {self.base} has no model {self.model!r} "
                                  "(GET /v2/models/{name}: 404)")
        env["transport"] = {"kind": "http", "url": self.base, "model": self.model,
                            "server": "remote target" if c.target else
                            "ours, own process on 127.0.0.1", "payload":
                            "bodies file" if c.bodies else c.payload,
                            "wan": self.wan.to_dict() if self.wan.active else None}
        self._before = server_counts(self.base)
        connections = (c.concurrency or 1) if c.rate is None else OPEN_LOOP_CONNECTIONS
        self.transport = HttpTransport(self.base, self.model, payload=c.payload, wan=self.wan,
                                       connections=connections, seed=c.seed,
                                       prebuilt_bodies=c.bodies is not None)
        return self.transport

    def abandon(self) -> None:
        """On Stop: requests already sent finish on the server (HTTP cannot recall them)."""

    def close(self, timings: dict[str, Any], warnings: list[str]) -> None:
        """Read the server's counters (what it answered during the run, from every client),
        then close the client and stop our server."""
        after = server_counts(self.base) if self.base else None
        if after is not None:
            before = self._before or {}
            delta = {str(k): v - before.get(k, 0) for k, v in sorted(after.items())
                     if v - before.get(k, 0) > 0}
            errors = sum(v for k, v in delta.items() if int(k) >= 400)
            timings["server_responses"] = delta
            timings["server_errors"] = errors
            if errors:
                kinds = ", ".join(f"{n}× HTTP {k}" for k, n in delta.items() if int(k) >= 400)
                warnings.append(f"the server answered {errors} request(s) with an error status "
                                f"during the run ({kinds}), other clients' requests included")
        elif self.base:
            timings["server_responses"] = None  # a remote server without our /metrics
        if self.transport is not None:
            self.transport.close()
        if self.server is not None:
            self.server.stop()
