"""The generation server a RunConfig describes: one place, for a run in process, the HTTP
server a run starts, and ``python -m latency serve`` alike — so the paths cannot disagree about
the slots, the step's token budget, chunking, the KV budget or when a request stops.

(``builder`` is the one-shot server's builder; a generative pipeline is served by the
continuous-batching ``GenServer`` instead, and takes no levers.)
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from latency.core.config import RunConfig
from latency.core.gen_scheduler import scheduler_config
from latency.host.devices import DTYPES, resolve_device
from latency.pipelines.generative import GenerativePipeline, is_generative
from latency.pipelines.registry import build_pipeline
from latency.serve.gen_server import GenServer, GenServerConfig, StepCallback


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
    torch.set_num_threads(config.threads)
    t = time.perf_counter()
    if pipeline is None:
        built = build_pipeline(config.model, resolve_device(config.device),
                               DTYPES[config.dtype], config.model_args, spec=config.pipeline)
        if not is_generative(built):
            raise TypeError(f"{config.model} is not a generative pipeline")
        pipeline = built  # type: ignore[assignment]
    assert pipeline is not None
    timings = {"model_load_s": time.perf_counter() - t}
    server = GenServer(pipeline, gen_server_config(config, pipeline), on_step=on_step).start()
    return BuiltGenServer(pipeline, server, timings)
