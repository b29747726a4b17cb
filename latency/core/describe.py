"""Short descriptions of a run's configuration, for listings, legends and headings: one place,
so the CLI's summary, the history, the Compare page and the Live Profiler call a run the same
thing. ``load_words`` is the only wording of a load (a run's, ``load_description``, or a
simulated one); what the history stored (its ``load`` column) was written by it, so old and
new runs list alike.
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from latency.core.config import RunConfig


def load_description(config: RunConfig) -> str:
    """'open 200 req/s poisson' or 'closed 4 clients'."""
    return load_words(config.rate, config.arrival, config.concurrency)


def load_words(rate: float | None, arrival: str, clients: int | None) -> str:
    """A load in words from plain values — open-loop arrivals at ``rate``, or (``rate``
    None) a closed loop of ``clients`` — so a simulated load (``SimConfig.describe``) is
    worded as a measured one: 'open 200 req/s poisson' or 'closed 4 clients'."""
    if rate is not None:
        return f"open {rate:g} req/s {arrival}"
    n = clients or 1
    return f"closed {n} client{'s' if n != 1 else ''}"


def model_label(config: RunConfig) -> str:
    """The pipeline as a person calls it: its name, and a model file's file name."""
    model = str(config.model)
    file = (config.model_args or {}).get("file") if model == "model-file" else None
    return f"{model} {Path(file).name}" if file else model


def setup_description(config: RunConfig) -> str:
    """The settings that differ from a plain run, shortly: 'batch ≤ 8 / 5 ms · 2 replicas ·
    int8 · naive pre · http' ('' for defaults). Two runs of one model under one load are told
    apart by this in a legend."""
    parts = []
    file = (config.model_args or {}).get("file")
    if config.model == "model-file" and file:
        parts.append(Path(file).name)
    if (config.batch_size or 1) > 1:
        parts.append(f"batch ≤ {config.batch_size} / {config.max_batch_delay_ms or 0:g} ms")
    if (config.replicas or 1) > 1:
        parts.append(f"{config.replicas} replicas")
    if (config.threads or 1) > 1:
        parts.append(f"{config.threads} threads")
    if config.device not in (None, "cpu"):
        parts.append(str(config.device))
    if config.dtype not in (None, "float32"):
        parts.append(str(config.dtype))
    levers: object = config.optimize or []
    parts += [str(lv) for lv in (levers if isinstance(levers, list) else [levers])]
    for stage, value in (("pre", config.pre), ("post", config.post)):
        if value not in (None, "fast"):
            parts.append(f"{value} {stage}")
    if config.backend == "ray":
        parts.append("Ray Serve" + (" + preprocess deployment"
                                    if config.ray_preprocess == "deployment" else ""))
    elif config.target is not None:
        parts.append(f"target {urlsplit(str(config.target)).netloc}")
    elif config.transport not in (None, "in-process"):
        parts.append(str(config.transport))
    return " · ".join(parts)


#: who served an HTTP run when it was our own server
OUR_SERVER = "ours, own process, 127.0.0.1"


def server_label(config: RunConfig) -> str:
    """Who answered an HTTP run's requests: 'remote target', 'Ray Serve (local instance; 2
    replica actor(s), preprocess in the replica)' or our own server."""
    if config.target:
        return "remote target"
    if config.backend == "ray":
        where = f"cluster {config.ray_address}" if config.ray_address else "local instance"
        pre = ("a preprocess deployment" if config.ray_preprocess == "deployment"
               else "the replica")
        return (f"Ray Serve ({where}; {config.replicas or 1} replica actor(s), "
                f"preprocess in {pre})")
    return OUR_SERVER
