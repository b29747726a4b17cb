"""A stored run as a file: CSV or Parquet of its requests, JSON of its result, a Chrome trace.

One function serves the CLI (``history export``) and the dashboard's download buttons, so both
produce the same bytes, for both kinds of run. CSV holds one row per request (stamps relative to
the start of measurement and every component, in ms; warm-up rows included and labelled);
Parquet the same for a one-shot run and one row per token for a generation. JSON is the result
as ``run --json`` writes it — every record included, so ``simulate --from-run FILE`` and
``compare FILE …`` take it as they take a ``run --json`` file — with the run's id, name, date
(``created_at``, Unix seconds) and source first. The trace: a span per component of each
request (a generation's: its phases, tokens and scheduler steps).
"""
from __future__ import annotations

import io
import json
from typing import Any

from latency.analysis.gen_result import GenResult
from latency.analysis.result import RunResult
from latency.analysis.run_model import MeasuredRun
from latency.core.errors import ConfigError
from latency.core.records import component_labels, in_process
from latency.storage.store import StoredRun
from latency.storage.trace import chrome_trace_bytes, gen_trace_bytes

#: format → (file extension, MIME type).
FORMATS: dict[str, tuple[str, str]] = {
    "csv": ("csv", "text/csv"),
    "parquet": ("parquet", "application/vnd.apache.parquet"),
    "json": ("json", "application/json"),
    "trace": ("trace.json", "application/json"),
    # the report a person reads (``latency.figures.report``, a stage above this one)
    "html": ("html", "text/html"),
}


def file_name(run: StoredRun, fmt: str) -> str:
    return f"latency-run-{run.info.id}.{FORMATS[fmt][0]}"


def run_json_text(run: StoredRun, requests: bool = True) -> str:
    """The run as ``run --json`` writes it (``RunResult.json_text``: its request records too,
    unless ``requests`` is False) with its id, name, date and source as the first keys."""
    result = run.result
    if result is None:
        raise ValueError("load the run with its rows to export it")
    meta = json.dumps({"id": run.info.id, "name": run.info.name,
                       "created_at": run.info.created_at, "source": run.info.source},
                      indent=2, default=str)
    body = result.json_text(requests)
    if not (meta.endswith("\n}") and body.startswith("{\n")):  # (json.dumps's indent=2 form)
        raise AssertionError("unexpected JSON layout")
    return meta[:-2] + ",\n" + body[2:]


def export_bytes(run: StoredRun, fmt: str, max_trace_requests: int | None = None) -> bytes:
    """The bytes of ``run`` in ``fmt`` (one of ``FORMATS``); the run must be loaded with rows."""
    if run.result is None:
        raise ValueError("load the run with its rows to export it")
    if fmt == "json":
        return run_json_text(run).encode()
    return result_bytes(run.result, fmt, max_trace_requests, {
        "run_id": run.info.id, "name": run.info.label, "model": run.info.model,
        "load": run.info.load, "status": run.info.status, "when": run.info.when})


def result_bytes(result: MeasuredRun, fmt: str, max_trace_requests: int | None = None,
                 meta: dict[str, Any] | None = None) -> bytes:
    """The bytes of a run of either kind in ``fmt``: what ``run --json/--csv/--parquet/
    --trace`` writes, and (with the history's id first in the JSON) what an export writes.
    ``meta``: what the trace names the run by."""
    if fmt not in FORMATS or fmt == "html":
        raise ConfigError(f"unknown export format {fmt!r}: choose one of "
                          f"{', '.join(f for f in FORMATS if f != 'html')} (an HTML report: "
                          "latency.figures.report)")
    if fmt == "csv":
        return result.csv_bytes()
    if fmt == "json":
        return result.json_text().encode()
    meta = meta or {"model": str(result.config.model)}
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ConfigError("Parquet export needs pyarrow: pip install pyarrow") from None
        buf = io.BytesIO()
        (result.tokens_frame() if isinstance(result, GenResult) else
         result.requests_frame()).to_parquet(buf, index=False)  # type: ignore[attr-defined]
        return buf.getvalue()
    if isinstance(result, GenResult):
        return gen_trace_bytes(result.rows, result.tokens, result.steps, result.errors,
                               meta, in_process(result.config))
    assert isinstance(result, RunResult)
    return chrome_trace_bytes(result.log, result.errors, meta, max_trace_requests,
                              component_labels(in_process(result.config)))
