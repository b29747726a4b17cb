"""Request records in and out of files, so a run written today can feed a simulation later.

``python -m latency simulate --from-run`` resamples a recorded run's service times. The run may
come as the JSON that ``run --json`` writes (its ``requests`` table: every record field, stamps
in integer ns from the first stamp, so nothing is rounded), as the CSV that ``run --csv`` writes
(stamps in ms with 4 decimals: 100 ns resolution, ample for service times) or as a run id of
the history store. Every path ends in the engine's own ``RECORD_DTYPE`` rows.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from latency.analysis.result import RunResult
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.core.records import (
    RECORD_DTYPE,
    STAMP_FIELDS,
    STATUS_ERROR,
    STATUS_OK,
    rows_from_table,
)
from latency.storage.store import DAMAGE, RunStore, StoreError


def rows_from_csv(path: str | Path) -> np.ndarray:
    """Rows from the per-request CSV of ``run --csv`` (or a history CSV export)."""
    import pandas as pd

    frame = pd.read_csv(path)
    missing = [f"{s}_ms" for s in STAMP_FIELDS if f"{s}_ms" not in frame.columns]
    if missing:
        raise ValueError(f"{path}: not a Latency Lab requests CSV (no {missing[0]} column)")
    rows = np.zeros(len(frame), dtype=RECORD_DTYPE)
    for s in STAMP_FIELDS:
        rows[s] = np.round(frame[f"{s}_ms"].to_numpy(dtype=float) * 1e6).astype(np.int64)
    for name in ("batch_id", "batch_size", "replica", "client"):
        if name in frame.columns:
            rows[name] = frame[name].to_numpy()
    rows["warmup"] = frame["warmup"].astype(bool).to_numpy() if "warmup" in frame else False
    if "status" in frame.columns:
        rows["status"] = np.where(frame["status"].astype(str) == "ok", STATUS_OK, STATUS_ERROR)
    return rows


def load_run(source: str, db: str | None = None) -> tuple[np.ndarray, RunConfig | None]:
    """Request rows and the run's config (None for a CSV, which has none) from a run JSON, a
    requests CSV or a history run id; ValueError with a one-line reason otherwise."""
    path = Path(source)
    if _history_ref(source) or path.suffix.lower() not in (".csv", ".json"):
        return _rows_from_history(source, db)
    if not path.is_file():
        raise ValueError(f"no such file: {source}")
    if path.suffix.lower() == ".csv":
        return rows_from_csv(path), None
    data = _read_json(source, "valid JSON")
    if isinstance(data, dict) and data.get("kind") == "generation":
        raise ConfigError(f"{source} is a generation run (this reads one-shot runs; "
                          "load_generation reads it)")
    table = data.get("requests") if isinstance(data, dict) else None
    if not isinstance(table, dict) or "columns" not in table:
        raise ValueError(f"{source} has no per-request records: write the run with "
                         "`python -m latency run ... --json FILE` (or --csv FILE), or a "
                         "saved one with `python -m latency history export ID --format "
                         "json --out FILE`")
    config = data.get("config")
    with _damaged(source):
        return rows_from_table(table), (RunConfig.from_dict(config)
                                        if isinstance(config, dict) else None)


def load_result(path: str | Path) -> RunResult:
    """A run JSON (``run --json``) as the RunResult it was written from: its config and
    timings typed again, its summary as measured, its request rows if the file has them."""
    data = _read_json(path, "a readable run JSON")
    if not isinstance(data, dict) or "config" not in data:
        raise ValueError(f"{path}: not a Latency Lab run JSON (no config); write one with "
                         "`python -m latency run ... --json FILE`")
    if not isinstance(data["config"], dict):
        raise ConfigError(f"{path}: damaged run JSON (its config is not an object)")
    if data.get("kind") == "generation":
        raise ConfigError(f"{path} is a generation run: read it with "
                          "latency.GenResult.from_dict (this reads one-shot runs)")
    with _damaged(path):
        return RunResult.from_dict(data)


def _read_json(path: str | Path, what: str) -> Any:
    """The JSON value in the file ``path``; ConfigError "``path``: not ``what`` (why)" where
    it cannot be read or parsed."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path}: not {what} ({_why(exc)})") from None


@contextmanager
def _damaged(path: str | Path, what: str = "run JSON") -> Iterator[None]:
    """What reading a parsed file's values raises (``DAMAGE``) as one line: ConfigError
    "``path``: damaged ``what`` (why)"."""
    try:
        yield
    except DAMAGE as exc:
        raise ConfigError(f"{path}: damaged {what} ({_why(exc)})") from None


def _why(exc: BaseException) -> str:
    """An error in a few words (a RecursionError's message is no help to a reader)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _rows_from_history(ref: str, db: str | None = None) -> tuple[np.ndarray, RunConfig]:
    if Path(ref).suffix:
        raise ValueError(f"{ref}: give a .json or .csv file, or a history run id")
    try:
        run = RunStore(db).load(ref)
    except StoreError as exc:
        raise ValueError(f"{ref}: not a file nor a run in the history ({exc})") from None
    if run.info.kind == "generation":
        raise ConfigError(f"history run {run.info.id} is a generation (this reads one-shot "
                          "runs' request records)")
    if not isinstance(run.result, RunResult) or not len(run.result.log):
        raise ValueError(f"history run {ref} has no request records")
    return run.result.log, run.config


def stored_run_from_json(path: str | Path) -> Any:
    """A run JSON (``run --json``) as a StoredRun, so ``compare`` and its p99 gate take a
    baseline file committed to a repository as well as a history id."""
    from latency.analysis.summary import Summary
    from latency.storage.store import RunInfo, StoredRun, listing_columns

    p = Path(path)
    data = _read_json(path, "a readable run JSON")
    if not isinstance(data, dict) or "summary" not in data or "config" not in data:
        raise ValueError(f"{path}: not a Latency Lab run JSON (no summary/config); write one "
                         "with `python -m latency run ... --json FILE`")
    if not isinstance(data["summary"], dict) or not isinstance(data.get("config") or {}, dict):
        raise ConfigError(f"{path}: damaged run JSON (its summary or config is not an object)")
    result = None
    summary: Any
    with _damaged(path):
        if data.get("kind") == "generation":
            from latency.analysis.gen_result import GenResult

            result = GenResult.from_dict(data)
            summary, cfg = result.summary, result.config
        else:
            summary = Summary.from_dict(data["summary"])
            cfg = RunConfig.from_dict(data.get("config") or {})
    # an exported history run (`history export --format json`, `history show --json`) says
    # its name and date; a `run --json` file has neither, so its path and time stand for them
    exported = isinstance(data.get("id"), str)
    name = data.get("name") if exported else str(p)
    when = data.get("created_at")
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when):
        when = p.stat().st_mtime
    info = RunInfo(id=p.name, name=str(name) if name else None, created_at=float(when),
                   status=str(data.get("status", "completed")), source="file",
                   origin_id=data["id"] if exported else None,
                   machine=_machine(data.get("environment")), **listing_columns(summary, cfg))
    return StoredRun(info=info, summary=summary, config=cfg,
                     environment=data.get("environment") or {}, makeup_ms={}, spectrum=None,
                     result=result)


def _machine(environment: Any) -> dict[str, Any] | None:
    """A run file's machine while it measured, as the history lists it (without the series)."""
    d = environment.get("disturbance") if isinstance(environment, dict) else None
    return {k: v for k, v in d.items() if k != "series"} if isinstance(d, dict) else None


def _history_ref(ref: str) -> bool:
    """Whether ``ref`` names a run of the history rather than a file: no file of that name,
    and no extension (ids, prefixes, ``latest~N``)."""
    return not Path(ref).exists() and not Path(ref).suffix


def is_generation_file(ref: str, db: str | None = None) -> bool:
    """Whether ``ref`` is a generation: a run of that kind in the history, or a generation
    run's JSON file (``"kind": "generation"``)."""
    if _history_ref(ref):
        try:
            return RunStore(db).info(ref).kind == "generation"
        except StoreError:
            return False  # the one who loads it says why
    if not ref.lower().endswith(".json") or not Path(ref).is_file():
        return False
    try:
        with open(ref, "rb") as f:
            head = f.read(64)
        return b'"kind": "generation"' in head or b'"kind":"generation"' in head
    except OSError:
        return False


def load_generation(ref: str, db: str | None = None) -> Any:
    """A generation run as its GenResult: a history id or a ``run --json`` file;
    ConfigError (one line) for anything that is not one."""
    from latency.analysis.gen_result import GenResult

    if _history_ref(ref):
        run = RunStore(db).load(ref)
        if run.info.kind != "generation":
            raise ConfigError(f"{ref} ({run.info.id}) is a one-shot run, not a generation")
        return run.result
    data = _read_json(ref, "a readable generation run JSON")
    with _damaged(ref, "generation run JSON"):
        return GenResult.from_dict(data)
