"""The command line's transport parts: ``run``'s HTTP/WAN/target flags and ``serve``.

    python -m latency run --model image-cnn --transport http --payload raw --net-rtt-ms 40
    python -m latency run --target http://10.0.0.5:8000 --model tabular-mlp --rate 50
    python -m latency serve --model tabular-mlp --port 8000 --batch-size 8 --replicas 2
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from latency.cli.args import number
from latency.core.config import DEFAULT_MAX_BODY_MB, PAYLOADS, TRANSPORTS, RunConfig
from latency.core.errors import ConfigError


def add_run_flags(r: argparse.ArgumentParser) -> None:
    """``run``'s transport flags."""
    g = r.add_argument_group("transport (network is the first component)")
    g.add_argument("--transport", default=None, choices=TRANSPORTS,
                   help="in-process: a thread hand-off; http: a real HTTP server (our own, in "
                        "its own process on 127.0.0.1) speaking the Open Inference Protocol "
                        "(default: in-process, or http with --target)")
    g.add_argument("--payload", default="json", choices=PAYLOADS,
                   help="json: OIP v2 JSON (bytes base64-encoded); raw: the input's bytes as "
                        "the body (application/octet-stream)")
    g.add_argument("--target", metavar="URL",
                   help="profile this OIP v2 endpoint (Triton, KServe, MLServer, `latency "
                        "serve`) instead of starting a server; a /v2/models/NAME path names "
                        "the model, else --model does")
    g.add_argument("--bodies", metavar="FILE",
                   help="JSON-lines file of OIP request bodies to send as they are (instead "
                        "of the sample pipeline's inputs)")
    g.add_argument("--net-rtt-ms", type=number, default=0.0,
                   help="EMULATED WAN: round-trip time added (half each way)")
    g.add_argument("--net-jitter-ms", type=number, default=0.0,
                   help="EMULATED WAN: extra random delay each way, uniform in [0, this]")
    g.add_argument("--net-bandwidth-mbps", type=number, default=None,
                   help="EMULATED WAN: link speed in Mbit/s (bytes ÷ bandwidth each way)")
    g.add_argument("--max-body-mb", type=number, default=DEFAULT_MAX_BODY_MB,
                   help="our HTTP server's request body limit (413 above it)")


def config_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """RunConfig fields from ``run``'s transport flags."""
    from latency.core.errors import ConfigError

    if a.target and a.transport == "in-process":
        raise ConfigError("--target profiles a remote endpoint over HTTP: drop "
                          "--transport in-process")
    return {"transport": a.transport or ("http" if a.target else "in-process"),
            "payload": a.payload, "target": a.target, "bodies": a.bodies,
            "net_rtt_ms": a.net_rtt_ms, "net_jitter_ms": a.net_jitter_ms,
            "net_bandwidth_mbps": a.net_bandwidth_mbps, "max_body_mb": a.max_body_mb}


def add_server_flags(p: argparse.ArgumentParser) -> None:
    """What the served pipeline is and how it is served: shared by ``run`` and ``serve``."""
    p.add_argument("--model", default="synthetic", help="pipeline name (see `models`)")
    p.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="pipeline argument, repeatable (e.g. forward_ms=8)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16")
    p.add_argument("--batch-size", type=int, default=1, help="largest batch a replica runs")
    p.add_argument("--max-batch-delay-ms", type=number, default=0.0,
                   help="longest wait for a batch to fill, from its first request")
    p.add_argument("--replicas", type=int, default=1, help="model workers")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per replica")
    p.add_argument("--preprocess-workers", type=int, default=4,
                   help="server threads that preprocess requests")


def add_serve_parser(sub: Any, fmt: Any) -> None:
    s = sub.add_parser("serve", help="serve a pipeline over HTTP (Open Inference Protocol)",
                       formatter_class=fmt)
    add_server_flags(s)
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; anything but loopback exposes the model to "
                        "your network, so it must be asked for")
    s.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port)")
    s.add_argument("--max-body-mb", type=number, default=DEFAULT_MAX_BODY_MB,
                   help="request body limit (413 above it)")


def cmd_serve(a: argparse.Namespace) -> int:
    """Serve until Ctrl-C; exit 0 after a clean stop."""
    from latency.run.validate import validated
    from latency.serve.http_server import serve

    if not 0 <= a.port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535 (got {a.port})")
    config = validated(RunConfig(model=a.model, model_args=list(a.model_arg), device=a.device,  # type: ignore[arg-type]
                       dtype=a.dtype, batch_size=a.batch_size,
                       max_batch_delay_ms=a.max_batch_delay_ms, replicas=a.replicas,
                       threads=a.threads, preprocess_workers=a.preprocess_workers,
                       max_body_mb=a.max_body_mb, requests=1))
    host = a.host

    def ready(port: int, built: Any) -> None:
        shown = f"[{host}]" if ":" in host else host
        print(f"serving {config.model} on http://{shown}:{port} (Open Inference Protocol: "
              f"POST /v2/models/{config.model}/infer, GET /v2/health/ready, /metrics); "
              "Ctrl-C stops", flush=True)
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
    return 0
