"""``python -m latency serve``: our server for a pipeline over HTTP, until Ctrl-C — the Open
Inference Protocol for a one-shot pipeline, the OpenAI-compatible streaming API for a
generative one (``POST /v1/completions``, ``/v1/chat/completions``; docs/generation.md).

    python -m latency serve --model tabular-mlp --port 8000 --batch-size 8 --replicas 2
    python -m latency serve --model synthetic-lm --port 8000 --max-running 8
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from latency.cli.config_flags import config_values
from latency.cli.run_flags import add_server_flags, pipeline_kwargs
from latency.core.config import SERVE, RunConfig
from latency.core.errors import ConfigError


def add_parser(sub: Any, fmt: Any) -> None:
    s = sub.add_parser("serve", help="serve a pipeline over HTTP (Open Inference Protocol; a "
                       "generative one: the OpenAI-compatible streaming API)",
                       formatter_class=fmt)
    add_server_flags(s, SERVE)
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; anything but loopback exposes the model to "
                        "your network, so it must be asked for")
    s.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port)")


def cmd_serve(a: argparse.Namespace) -> int:
    """Serve until Ctrl-C; exit 0 after a clean stop."""
    from latency.execution.validate import validated
    from latency.host.processes import exit_now
    from latency.serve.http_server import serve, serves_generation

    if not 0 <= a.port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535 (got {a.port})")
    config = RunConfig(**{**config_values(a, SERVE), **pipeline_kwargs(a)}, requests=1)
    try:
        generative = serves_generation(config)
    except Exception:  # noqa: BLE001 - a bad name: validated() says what is wrong, in one line
        generative = False
    config = validated(config, machine_lock=False, generation=generative)  # measures nothing
    host = a.host

    def ready(port: int, built: Any) -> None:
        shown = f"[{host}]" if ":" in host else host
        api = ("OpenAI-compatible: POST /v1/completions, /v1/chat/completions (stream: true "
               "for server-sent events), GET /v1/models, /health, /metrics" if generative else
               f"Open Inference Protocol: POST /v2/models/{config.model}/infer, GET "
               "/v2/health/ready, /metrics")
        print(f"serving {config.model} on http://{shown}:{port} ({api}); Ctrl-C stops",
              flush=True)
        if host not in ("127.0.0.1", "localhost", "::1"):
            print(f"warning: listening on {host}: other machines can reach this server",
                  file=sys.stderr, flush=True)

    try:
        serve(config, host, a.port, a.max_body_mb, on_ready=ready)
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled, after a clean stop
        pass
    except OSError as exc:  # port taken, address not ours: one line
        raise ConfigError(f"cannot listen on {host}:{a.port}: {exc.strerror or exc}") from None
    print("stopped", flush=True)
    exit_now(0)  # no interpreter shutdown: torch's threads made it print "terminate called"
    return 0

