"""The one server builder: a RunConfig in, a started server out — for an in-process run, for
the HTTP server of a run and for ``python -m latency serve`` alike, of either kind.

One place, so that the paths cannot disagree about what they serve: the pipeline built on the
configured device and dtype with its model-args, intra-op threads set; for a one-shot pipeline
the levers and pre/post variants applied (and their report kept), then the preprocess pool,
batch queue and replicas; for a generative pipeline (which takes no levers) the
continuous-batching ``GenServer`` — its slots, the step's token budget, chunking, the KV budget
and when a request stops.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from latency.core.config import RunConfig
from latency.core.gen_scheduler import scheduler_config
from latency.core.optimization import OptimizationReport
from latency.host.devices import DTYPES, resolve_device
from latency.pipelines.contract import Pipeline
from latency.pipelines.generative import GenerativePipeline, is_generative
from latency.pipelines.inputs import read_inputs
from latency.pipelines.levers import CHECK_INPUTS, prepare
from latency.pipelines.registry import build_pipeline
from latency.serve.gen_server import GenServer, GenServerConfig, StepCallback
from latency.serve.server import Server


def changes_pipeline(config: RunConfig) -> bool:
    """Whether the config asks for levers or naive pre/post (anything ``prepare`` applies)."""
    return bool(config.optimize) or config.pre != "fast" or config.post != "fast"


@dataclass
class PreparedPipeline:
    """A pipeline built as a config says, with what the levers did and how long it took."""

    pipeline: Pipeline
    optimization: OptimizationReport | None = None
    #: ``model_load_s``, and ``optimize_s`` when levers or variants were applied
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class BuiltServer(PreparedPipeline):
    """A started server, its pipeline, what the levers did and how long building took."""

    server: Server = field(kw_only=True)


def _load(config: RunConfig, pipeline: Any) -> tuple[Any, dict[str, float]]:
    """The pipeline ``config`` names (unless the caller built one already: served as it is,
    on the device it was built for), with intra-op threads set, and ``model_load_s``."""
    torch.set_num_threads(config.threads)
    t = time.perf_counter()
    if pipeline is None:
        pipeline = build_pipeline(config.model, resolve_device(config.device),
                                  DTYPES[config.dtype], config.model_args,
                                  spec=config.pipeline)
    return pipeline, {"model_load_s": time.perf_counter() - t}


def prepare_pipeline(config: RunConfig, on_phase: Callable[[str], None] | None = None,
                     pipeline: Pipeline | None = None) -> PreparedPipeline:
    """The pipeline a validated ``config`` describes, built on its device and dtype with its
    model-args, the levers and pre/post variants applied — what every server serves (ours in
    this process or its own, and each Ray Serve replica). ``on_phase("optimising")`` is called
    before the levers are applied (they may take seconds: compilation, calibration).
    ``pipeline``: one the caller built already, served as it is."""
    pipeline, timings = _load(config, pipeline)
    report = None
    if changes_pipeline(config):
        if on_phase is not None:
            on_phase("optimising")
        t = time.perf_counter()
        raws = (read_inputs(config.inputs, config.input_order, config.seed)[:CHECK_INPUTS]
                if config.inputs else None)  # the answers are checked on the run's inputs
        report = prepare(pipeline, config.optimize, config.pre, config.post, config.batch_size,
                         raws=raws)
        timings["optimize_s"] = time.perf_counter() - t  # levers + accuracy check
    return PreparedPipeline(pipeline, report, timings)


def build_server(config: RunConfig, on_phase: Callable[[str], None] | None = None,
                 pipeline: Pipeline | None = None) -> BuiltServer:
    """Build and start the server a validated ``config`` describes (its pipeline from
    ``prepare_pipeline``). ``pipeline``: one the caller built already (``latency.profile`` of a
    pipeline object): it is served as it is, on the device it was built for.
    """
    prepared = prepare_pipeline(config, on_phase, pipeline)
    server = Server(prepared.pipeline, replicas=config.replicas, threads=config.threads,
                    max_batch=config.batch_size, max_delay_ms=config.max_batch_delay_ms,
                    preprocess_workers=config.preprocess_workers)
    server.start()
    return BuiltServer(prepared.pipeline, prepared.optimization, prepared.timings,
                       server=server)


# ---- the generation server ----------------------------------------------------------------
def gen_server_config(config: RunConfig, pipeline: GenerativePipeline) -> GenServerConfig:
    """The scheduler's limits and the server's settings of ``config`` (the KV budget, when
    not given, is ``--max-running`` whole contexts: no preemption)."""
    return GenServerConfig(scheduler_config(config, int(pipeline.max_context)),
                           replicas=config.replicas, stop_on_eos=config.stop_on_eos)


@dataclass
class BuiltGenServer:
    """A started generation server, its pipeline and how long building took."""

    pipeline: GenerativePipeline
    server: GenServer
    #: ``model_load_s``
    timings: dict[str, float] = field(default_factory=dict)
    #: a generative pipeline takes no levers (the ready line's ``optimization`` is None)
    optimization: None = None


def build_gen_server(config: RunConfig, on_step: StepCallback | None = None,
                     pipeline: GenerativePipeline | None = None) -> BuiltGenServer:
    """Build (unless given) the pipeline of a validated ``config`` on its device and dtype,
    and start its generation server."""
    given = pipeline is not None
    built, timings = _load(config, pipeline)
    if not given and not is_generative(built):
        raise TypeError(f"{config.model} is not a generative pipeline")
    server = GenServer(built, gen_server_config(config, built), on_step=on_step).start()
    return BuiltGenServer(built, server, timings)
