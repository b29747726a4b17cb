"""Short descriptions of a run's configuration, for listings and legends: one place, so the
history, the Compare page and the CLI call a run the same thing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


def load_description(config: dict[str, Any]) -> str:
    """'open 200 req/s poisson' or 'closed 4 clients'."""
    if config.get("rate") is not None:
        return f"open {config['rate']:g} req/s {config.get('arrival', 'poisson')}"
    n = config.get("concurrency") or 1
    return f"closed {n} client{'s' if n != 1 else ''}"


def model_label(config: dict[str, Any]) -> str:
    """The pipeline as a person calls it: its name, and a model file's file name."""
    model = str(config.get("model", "?"))
    file = (config.get("model_args") or {}).get("file") if model == "model-file" else None
    return f"{model} {Path(file).name}" if file else model


def setup_description(config: dict[str, Any]) -> str:
    """The settings that differ from a plain run, shortly: 'batch ≤ 8 / 5 ms · 2 replicas ·
    int8 · naive pre · http' ('' for defaults). Two runs of one model under one load are told
    apart by this in a legend."""
    parts = []
    if config.get("model") == "model-file" and (config.get("model_args") or {}).get("file"):
        parts.append(Path(config["model_args"]["file"]).name)
    if (config.get("batch_size") or 1) > 1:
        parts.append(f"batch ≤ {config['batch_size']} / {config.get('max_batch_delay_ms') or 0:g}"
                     " ms")
    if (config.get("replicas") or 1) > 1:
        parts.append(f"{config['replicas']} replicas")
    if (config.get("threads") or 1) > 1:
        parts.append(f"{config['threads']} threads")
    if config.get("device") not in (None, "cpu"):
        parts.append(str(config["device"]))
    if config.get("dtype") not in (None, "float32"):
        parts.append(str(config["dtype"]))
    levers = config.get("optimize") or []
    parts += [str(lv) for lv in (levers if isinstance(levers, list) else [levers])]
    for stage in ("pre", "post"):
        if config.get(stage) not in (None, "fast"):
            parts.append(f"{config[stage]} {stage}")
    if config.get("backend") == "ray":
        parts.append("Ray Serve" + (" + preprocess deployment"
                                    if config.get("ray_preprocess") == "deployment" else ""))
    elif config.get("transport") not in (None, "in-process"):
        parts.append(str(config["transport"]))
    return " · ".join(parts)


#: who served an HTTP run when it was our own server
OUR_SERVER = "ours, own process, 127.0.0.1"


def server_label(config: dict[str, Any]) -> str:
    """Who answered an HTTP run's requests: 'remote target', 'Ray Serve (local instance; 2
    replica actor(s), preprocess in the replica)' or our own server."""
    if config.get("target"):
        return "remote target"
    if config.get("backend") == "ray":
        where = (f"cluster {config['ray_address']}" if config.get("ray_address")
                 else "local instance")
        pre = ("a preprocess deployment" if config.get("ray_preprocess") == "deployment"
               else "the replica")
        return (f"Ray Serve ({where}; {config.get('replicas') or 1} replica actor(s), "
                f"preprocess in {pre})")
    return OUR_SERVER
