"""The flags that say what is served and how it is reached, shared by ``run`` and ``serve``:
the RunConfig fields each takes (declared once, on the fields: ``latency.cli.config_flags``)
and the model file's flags (``add_server_flags``), and what needs more than one flag to
become a ``RunConfig`` field: the pipeline (``pipeline_kwargs``) and the transport
(``config_kwargs``).

    python -m latency run --model image-cnn --transport http --payload raw --net-rtt-ms 40
    python -m latency run --target http://10.0.0.5:8000 --model tabular-mlp --rate 50
"""
from __future__ import annotations

import argparse
from typing import Any

from latency.cli.args import NO_DEFAULT
from latency.cli.config_flags import add_config_flags
from latency.core.config import PIPELINE
from latency.core.errors import ConfigError


def config_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """``run``'s transport: ``--transport`` when given (checked against ``--target`` and
    ``--backend ray``, which are reached over HTTP), else what they imply."""
    if a.target and a.transport == "in-process":
        raise ConfigError("--target profiles a remote endpoint over HTTP: drop "
                          "--transport in-process")
    if a.backend == "ray" and a.transport == "in-process":
        raise ConfigError("Ray Serve is reached over HTTP, through its proxy: drop "
                          "--transport in-process")
    return {"transport": a.transport or ("http" if a.target or a.backend == "ray"
                                         else "in-process")}


def add_server_flags(p: argparse.ArgumentParser, command: str
                     ) -> dict[str, argparse._ArgumentGroup]:
    """The RunConfig flags ``command`` takes (``config_flags``), and the model file's, which
    become ``--model`` and ``--model-arg`` values: shared by ``run`` and ``serve``."""
    groups = add_config_flags(p, command)
    g = groups[PIPELINE]
    g.add_argument("--model-file", metavar="FILE",
                   help="a model file, no Python class needed: .onnx (ONNX Runtime) or .pt2 "
                        "(torch.export); --pre image|text|tensor, --post topk|argmax|raw"
                        + NO_DEFAULT)
    g.add_argument("--trust-model-file", action="store_true",
                   help="allow loading a .pt2 (it unpickles Python objects, which can run "
                        "code): only for files from a source you trust")
    return groups


def pipeline_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """RunConfig fields naming the pipeline: ``--model``, ``--pipeline``, ``--model-file``
    (whose ``--pre``/``--post`` choose its stock stages), ``--model-arg``."""
    pairs = list(a.model_arg)
    out: dict[str, Any] = {"model": a.model, "pipeline": a.pipeline}
    stages = {"pre": getattr(a, "pre", "fast"), "post": getattr(a, "post", "fast")}
    model_file = getattr(a, "model_file", None)  # ``ab`` takes none
    trust = getattr(a, "trust_model_file", False)
    if model_file is not None:
        if a.pipeline is not None:
            raise ConfigError("choose one: --pipeline SPEC or --model-file FILE")
        out["model"] = "model-file"
        pairs.append(f"file={model_file}")
        for stage, value in stages.items():
            if value not in ("fast", "naive"):  # a stock stage of the model file
                pairs.append(f"{stage}={value}")
                stages[stage] = "fast"
        if trust:
            pairs.append("trust=true")
    elif trust:
        raise ConfigError("--trust-model-file applies to --model-file FILE.pt2")
    out["model_args"] = pairs or {}  # none given: RunConfig's own default
    return {**out, **stages} if hasattr(a, "pre") else out
