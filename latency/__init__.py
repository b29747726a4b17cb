"""Latency Lab's engine: run real pipelines under load and decompose every request's latency.

The public API, imported lazily so that ``import latency`` costs nothing and pulls in neither
torch nor Streamlit (the simulator, the store and the reports work without them):

    from latency import RunConfig, run
    result = run(RunConfig(model="image-cnn", concurrency=4, duration_s=10))
    result            # prints the summary, as the CLI does
    latency.profile(MyPipeline, inputs=[...], concurrency=8, requests=2000)   # your own

The package is laid out by stage of the data flow (docs/architecture.md); each stage imports
only the stages below it (``latency.layers``).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name → the module that defines it.
_EXPORTS = {
    "ConfigError": "latency.core.errors",
    "RunConfig": "latency.core.config",
    "RunResult": "latency.analysis.result",
    "Summary": "latency.analysis.summary",
    "LatencyStats": "latency.analysis.stats",
    "RunHandle": "latency.execution.process",
    "run": "latency.execution.process",
    "start_run": "latency.execution.process",
    "execute": "latency.execution.engine",
    "Pipeline": "latency.pipelines.contract",
    "ModelArg": "latency.pipelines.contract",
    "GenerativePipeline": "latency.pipelines.generative",
    "GenResult": "latency.analysis.gen_result",
    "profile": "latency.api",
    "simulate": "latency.api",
    "sweep": "latency.api",
    "report": "latency.api",
}

__all__ = ["ConfigError", "GenResult", "GenerativePipeline", "LatencyStats", "ModelArg",
           "Pipeline", "RunConfig", "RunHandle", "RunResult", "Summary", "execute", "profile",
           "report", "run", "simulate", "start_run", "sweep"]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors only
    from latency.analysis.gen_result import GenResult
    from latency.analysis.result import RunResult
    from latency.analysis.stats import LatencyStats
    from latency.analysis.summary import Summary
    from latency.api import profile, report, simulate, sweep
    from latency.core.config import RunConfig
    from latency.core.errors import ConfigError
    from latency.execution.engine import execute
    from latency.execution.process import RunHandle, run, start_run
    from latency.pipelines.contract import ModelArg, Pipeline
    from latency.pipelines.generative import GenerativePipeline


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'latency' has no attribute {name!r}")
