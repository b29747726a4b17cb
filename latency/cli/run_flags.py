"""The flags that say what is served and how it is reached, shared by ``run`` and ``serve``:
the pipeline and its server (``add_server_flags``), the transport, target and emulated WAN
(``add_run_flags``), and their conversion to ``RunConfig`` fields.

    python -m latency run --model image-cnn --transport http --payload raw --net-rtt-ms 40
    python -m latency run --target http://10.0.0.5:8000 --model tabular-mlp --rate 50
"""
from __future__ import annotations

import argparse
from typing import Any

from latency.cli.args import NO_DEFAULT, number
from latency.core.config import (
    BACKENDS,
    DEFAULT_MAX_BODY_MB,
    PAYLOADS,
    RAY_PREPROCESS,
    TRANSPORTS,
)
from latency.core.errors import ConfigError


def add_run_flags(r: argparse.ArgumentParser) -> None:
    """``run``'s transport flags."""
    g = r.add_argument_group("transport (network is the first component)")
    g.add_argument("--transport", default=None, choices=TRANSPORTS,
                   help="in-process: a thread hand-off; http: a real HTTP server (our own, in "
                        "its own process on 127.0.0.1) speaking the Open Inference Protocol "
                        "(default: in-process, or http with --target)")
    g.add_argument("--backend", default="builtin", choices=BACKENDS,
                   help="who serves the pipeline: builtin (our server) or ray (Ray Serve: "
                        "replicas as Ray actors, @serve.batch, its HTTP proxy; pip install -r "
                        "requirements-ray.txt)")
    g.add_argument("--ray-address", metavar="ADDRESS",
                   help="--backend ray: an existing Ray cluster (ray://head:10001, head:6379, "
                        "auto) instead of a local instance started by the run" + NO_DEFAULT)
    g.add_argument("--ray-preprocess", default="replica", choices=RAY_PREPROCESS,
                   help="--backend ray: preprocess in the model's replica, or in a deployment "
                        "of its own in front of it (the tensor then travels between actors)")
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
    g.add_argument("--target-protocol", default="oip", choices=("oip", "http"),
                   help="oip: an Open Inference Protocol v2 server; http: any URL (your own "
                        "POST /predict server): bodies from --bodies or --inputs, success = a "
                        "2xx status, decomposed when it sends Server-Timing")
    g.add_argument("--method", default="POST", help="http targets: the request method")
    g.add_argument("--content-type", default="application/json",
                   help="http targets: the bodies' Content-Type")
    g.add_argument("--health-url", metavar="URL",
                   help="http targets: GET this first; a 2xx means ready" + NO_DEFAULT)
    g.add_argument("--body-template", metavar="TEXT",
                   help="http targets: each body is this text with {input} replaced by the "
                        "input as JSON, e.g. '{\"text\": {input}}'" + NO_DEFAULT)
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
    if a.backend == "ray" and a.transport == "in-process":
        raise ConfigError("Ray Serve is reached over HTTP, through its proxy: drop "
                          "--transport in-process")
    return {"transport": a.transport or ("http" if a.target or a.backend == "ray"
                                         else "in-process"),
            "backend": a.backend, "ray_address": a.ray_address,
            "ray_preprocess": a.ray_preprocess,
            "payload": a.payload, "target": a.target, "bodies": a.bodies,
            "target_protocol": a.target_protocol, "http_method": a.method,
            "content_type": a.content_type, "health_url": a.health_url,
            "body_template": a.body_template,
            "net_rtt_ms": a.net_rtt_ms, "net_jitter_ms": a.net_jitter_ms,
            "net_bandwidth_mbps": a.net_bandwidth_mbps, "max_body_mb": a.max_body_mb}


def add_server_flags(p: argparse.ArgumentParser) -> None:
    """What the served pipeline is and how it is served: shared by ``run`` and ``serve``."""
    p.add_argument("--model", default="synthetic",
                   help="pipeline name (see `models`): a sample, an installed entry point or "
                        "a startup pipeline")
    p.add_argument("--pipeline", metavar="SPEC",
                   help="your own pipeline: module.path:Name or path/to/file.py:Name (a "
                        "latency.Pipeline subclass or a factory returning one)"
                        + NO_DEFAULT)
    p.add_argument("--model-file", metavar="FILE",
                   help="a model file, no Python class needed: .onnx (ONNX Runtime) or .pt2 "
                        "(torch.export); --pre image|text|tensor, --post topk|argmax|raw"
                        + NO_DEFAULT)
    p.add_argument("--trust-model-file", action="store_true",
                   help="allow loading a .pt2 (it unpickles Python objects, which can run "
                        "code): only for files from a source you trust")
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


def pipeline_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """RunConfig fields naming the pipeline: ``--model``, ``--pipeline``, ``--model-file``
    (whose ``--pre``/``--post`` choose its stock stages), ``--model-arg``."""
    pairs = list(a.model_arg)
    out: dict[str, Any] = {"model": a.model, "pipeline": a.pipeline}
    stages = {"pre": getattr(a, "pre", "fast"), "post": getattr(a, "post", "fast")}
    if a.model_file is not None:
        if a.pipeline is not None:
            raise ConfigError("choose one: --pipeline SPEC or --model-file FILE")
        out["model"] = "model-file"
        pairs.append(f"file={a.model_file}")
        for stage, value in stages.items():
            if value not in ("fast", "naive"):  # a stock stage of the model file
                pairs.append(f"{stage}={value}")
                stages[stage] = "fast"
        if a.trust_model_file:
            pairs.append("trust=true")
    elif a.trust_model_file:
        raise ConfigError("--trust-model-file applies to --model-file FILE.pt2")
    out["model_args"] = pairs
    return {**out, **stages} if hasattr(a, "pre") else out
