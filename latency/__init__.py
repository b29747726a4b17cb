"""Latency Lab's engine: run real pipelines under load and decompose every request's latency.

No Streamlit import anywhere in this package: the dashboard is a client of it.
"""
from latency.config import ConfigError, RunConfig
from latency.engine import execute
from latency.result import RunResult
from latency.runner import RunHandle, run, start_run

__all__ = ["ConfigError", "RunConfig", "RunHandle", "RunResult", "execute", "run", "start_run"]
