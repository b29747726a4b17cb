"""Pipelines named when the dashboard server starts: only whoever starts the server names
pipelines; a browser never sends code or model files."""
from __future__ import annotations

import os


def startup_pipelines(argv: list[str] | None = None) -> list[str]:
    """``streamlit run app.py -- --pipeline file.py:Name [--pipeline mod:Name]``: add those
    specs to ``$LATENCY_LAB_PIPELINES`` (inherited by every run process), so the shared
    dashboard offers them by name. A browser never sends code or model files; only whoever
    starts the server names pipelines. Returns the specs added."""
    import sys

    from latency.pipelines.registry import STARTUP_ENV

    args = list(sys.argv[1:] if argv is None else argv)
    specs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--pipeline"]
    specs += [a.split("=", 1)[1] for a in args if a.startswith("--pipeline=")]
    have = [s for s in os.environ.get(STARTUP_ENV, "").split(",") if s.strip()]
    new = [s for s in specs if s not in have]
    if new:
        os.environ[STARTUP_ENV] = ",".join(have + new)
    return new


__all__ = ["startup_pipelines"]
