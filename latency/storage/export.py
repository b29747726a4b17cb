"""A stored run as a file: CSV or Parquet of its requests, JSON of its result, a Chrome trace.

One function serves the CLI (``history export``) and the dashboard's download buttons, so both
produce the same bytes. CSV and Parquet hold one row per request (``RunResult.requests_frame``:
stamps relative to the start of measurement and every component, in ms; warm-up rows included
and labelled). JSON is the result as ``run --json`` writes it plus the run's id and name.
"""
from __future__ import annotations

import io
import json
from typing import Any

from latency.core.errors import ConfigError
from latency.storage.store import StoredRun
from latency.storage.trace import chrome_trace_bytes

#: format → (file extension, MIME type).
FORMATS: dict[str, tuple[str, str]] = {
    "csv": ("csv", "text/csv"),
    "parquet": ("parquet", "application/vnd.apache.parquet"),
    "json": ("json", "application/json"),
    "trace": ("trace.json", "application/json"),
}


def file_name(run: StoredRun, fmt: str) -> str:
    return f"latency-run-{run.info.id}.{FORMATS[fmt][0]}"


def export_bytes(run: StoredRun, fmt: str, max_trace_requests: int | None = None) -> bytes:
    """The bytes of ``run`` in ``fmt`` (one of ``FORMATS``); the run must be loaded with rows."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}: choose one of {', '.join(FORMATS)}")
    result = run.result
    if result is None:
        raise ValueError("load the run with its rows to export it")
    if fmt == "csv":
        return result.csv_bytes()
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ConfigError("Parquet export needs pyarrow: pip install pyarrow") from None
        buf = io.BytesIO()
        result.requests_frame().to_parquet(buf, index=False)
        return buf.getvalue()
    if fmt == "json":
        d: dict[str, Any] = {"id": run.info.id, "name": run.info.name,
                             "created_at": run.info.created_at, "source": run.info.source}
        d.update(result.to_dict())
        return (json.dumps(d, indent=2, default=str) + "\n").encode()
    meta = {"run_id": run.info.id, "name": run.info.label, "model": run.info.model,
            "load": run.info.load, "status": run.info.status, "when": run.info.when}
    return chrome_trace_bytes(result.log, result.errors, meta, max_trace_requests)
