"""Run history: every finished run of either kind in one SQLite file, one table, one id space,
for the CLI, the dashboard and CI.

Both kinds share a row of ``runs`` (``kind``: "one-shot" or "generation") and its listing
columns — p50/p99 are the end-to-end latency of a one-shot run and the TTFT of a generation; a
generation adds ITL and TPOT p99 and tokens/s — so ``latest``, ``latest~N``, listing, rename,
delete and export see every run. A generation's request, token and step logs are its chunks 0,
1 and 2; what only it keeps (samples, the server's reports) is ``extra``.

Where: ``$LATENCY_LAB_DB`` if set (or ``--db`` on the command line), else
``~/.latency_lab/runs.sqlite``. Per user rather than per project directory: the dashboard and
``python -m latency run`` started from any directory then share one history, which is what
comparing "yesterday's run from the CLI" with "this run from the dashboard" needs.

What a run keeps: the config, the environment, the summary, timings, warnings, error messages,
and every request row. Rows are the engine's own fixed-size numpy records (``RECORD_DTYPE``),
zlib-compressed in chunks of ``CHUNK_ROWS`` rows: one table row per chunk keeps each BLOB far
below SQLite's 1 GB limit however long the run, and a compact array saves and loads in tens of
milliseconds where a table of 100,000 SQL rows takes seconds (see BENCHMARKS.md). The columns a
listing needs (model, load, n, p50, p99, throughput) are denormalised into ``runs`` so the
history lists without touching a BLOB, and the quantile curve and component make-up the
Compare page draws are stored too (aggregates, ~8 kB), so comparing runs loads no rows.

Why it survives a kill: one transaction per run (``BEGIN IMMEDIATE`` … ``COMMIT``) in
write-ahead-log mode. A process killed mid-write leaves uncommitted frames in the WAL, which
SQLite ignores on the next open: the run is either entirely there or not at all, and every
earlier run is untouched. WAL also lets the dashboard read while a CLI run writes (readers see
the last committed state and never block the writer). ``synchronous=NORMAL``: durable against
a killed process; after a power cut the last committed run may be lost, never corrupted.
WAL needs a local file system (not NFS).
"""
from __future__ import annotations

import builtins
import dataclasses
import json
import os
import re
import sqlite3
import time
import uuid
import zlib
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from latency.analysis.findings import Finding
from latency.analysis.gen_result import GenResult, reports_of
from latency.analysis.gen_summary import GenSummary
from latency.analysis.machine import is_disturbed
from latency.analysis.result import RunResult
from latency.analysis.run_model import MeasuredRun
from latency.analysis.snapshot import build_snapshot
from latency.analysis.summary import Summary
from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.core.describe import load_description, setup_description
from latency.core.errors import ConfigError
from latency.core.gen_records import (
    GEN_DTYPE,
    STEP_DTYPE,
    STEP_LAYOUT,
    TOKEN_DTYPE,
    steps_from_bytes,
)
from latency.core.records import RECORD_DTYPE, component_ns, measured_and_ok

__all__ = ["RunInfo", "RunStore", "StoreError", "StoredRun", "load_description",
           "setup_description"]

DB_ENV = "LATENCY_LAB_DB"
DEFAULT_DB = Path.home() / ".latency_lab" / "runs.sqlite"
#: rows per BLOB: 65,536 rows of ~100 bytes = 6-7 MB raw, a few MB compressed.
CHUNK_ROWS = 65_536
#: zlib level 1: about 3× smaller than raw rows for a fraction of the save time (BENCHMARKS.md).
ZLIB_LEVEL = 1
SCHEMA_VERSION = 5
#: the version ``_SCHEMA`` creates; a new file then takes the migrations after it
BASE_VERSION = 3
#: statements that bring a database from version k-1 to k (key k)
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("ALTER TABLE runs ADD COLUMN setup TEXT NOT NULL DEFAULT ''",),
    #: who may rename or delete the run from the shared dashboard (its session), if anyone
    3: ("ALTER TABLE runs ADD COLUMN owner TEXT",),
    #: the kind of each of the summary's warnings (a JSON list beside its texts; NULL for
    #: runs saved before: their warnings read back as kind "recorded")
    4: ("ALTER TABLE runs ADD COLUMN finding_kinds TEXT",),
    #: one table for both kinds of run: a generation's listing figures beside a one-shot
    #: run's, its validity, and what only a generation keeps (``extra``); the generations of
    #: the table they had until version 4 move in (``_move_generations``)
    5: tuple(f"ALTER TABLE runs ADD COLUMN {c}" for c in (
        "kind TEXT NOT NULL DEFAULT 'one-shot'", "valid INTEGER", "itl_p99_ms REAL",
        "tpot_p99_ms REAL", "tokens_per_s REAL", "extra TEXT")),
}
#: a generation's three logs, as the chunk numbers of its rows in ``request_chunks``
GENERATION_PARTS = ("rows", "tokens", "steps")
#: how long a writer waits for another writer (a CLI run and the dashboard saving at once).
BUSY_TIMEOUT_MS = 30_000
#: the table ``check_writable`` creates, and rolls back, to prove the history takes a write
WRITE_PROBE = "_latency_write_probe"
ID_LENGTH = 6
#: the longest run name kept (a name is a label, not a document)
MAX_NAME = 200

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT,
    created_at REAL NOT NULL,
    status TEXT NOT NULL,
    source TEXT NOT NULL,
    origin_id TEXT,
    model TEXT NOT NULL,
    mode TEXT NOT NULL,
    load TEXT NOT NULL,
    setup TEXT NOT NULL,
    device TEXT,
    n INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    p50_ms REAL,
    p99_ms REAL,
    throughput_rps REAL,
    config TEXT NOT NULL,
    environment TEXT NOT NULL,
    summary TEXT NOT NULL,
    timings TEXT NOT NULL,
    warnings TEXT NOT NULL,
    failure TEXT,
    error_messages TEXT NOT NULL,
    makeup TEXT NOT NULL,
    spectrum BLOB,
    n_rows INTEGER NOT NULL,
    record_dtype TEXT NOT NULL,
    owner TEXT
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
CREATE TABLE IF NOT EXISTS request_chunks (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    chunk INTEGER NOT NULL,
    n_rows INTEGER NOT NULL,
    codec TEXT NOT NULL,
    rows BLOB NOT NULL,
    PRIMARY KEY (run_id, chunk)
) WITHOUT ROWID;
"""


class StoreError(ConfigError):
    """The history cannot be used (unreadable file, unknown or ambiguous run id): one line."""


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write as one transaction: ``BEGIN IMMEDIATE`` (the writer's lock, taken before
    anything is read) … ``COMMIT``; anything raised inside rolls all of it back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def default_path() -> Path:
    """``$LATENCY_LAB_DB`` if set, else ``~/.latency_lab/runs.sqlite``."""
    env = os.environ.get(DB_ENV)
    return Path(env).expanduser() if env else DEFAULT_DB


@dataclass(frozen=True)
class RunInfo:
    """One line of the history: what a listing shows, without the request rows."""

    id: str
    name: str | None
    created_at: float
    status: str
    source: str
    model: str
    mode: str
    load: str
    setup: str
    device: str | None
    n: int
    errors: int
    p50_ms: float | None
    p99_ms: float | None
    throughput_rps: float | None
    origin_id: str | None = None
    owner: str | None = None
    #: "one-shot" (p50/p99: end-to-end latency) or "generation" (p50/p99: TTFT)
    kind: str = "one-shot"
    #: VALID (True) or INVALID (False) as the run judged itself; None if saved before
    valid: bool | None = None
    itl_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    tokens_per_s: float | None = None
    #: the machine while the run measured (its ``environment["disturbance"]`` without the
    #: per-second series); None for a run saved before the machine was sampled
    machine: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def disturbed(self) -> bool | None:
        """True when the machine was busy while the run measured (DISTURBED), False when it
        was quiet, None when the run has no samples of it (nothing is shown then)."""
        return is_disturbed({"disturbance": self.machine} if self.machine else None)

    @property
    def label(self) -> str:
        """What to call the run in a legend: its name, else model, load and setup."""
        return self.name or " · ".join(p for p in (self.model, self.load, self.setup) if p)

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created_at))

    def to_dict(self) -> dict[str, Any]:
        """Every field in order (``owner`` left out: a session id is not for listings), the
        label and date after the name, whether the machine was disturbed before it."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name not in ("owner", "machine")}
        return {"id": d.pop("id"), "name": d.pop("name"), "label": self.label,
                "when": self.when, **d, "disturbed": self.disturbed, "machine": self.machine}


@dataclass
class StoredRun:
    """A run read back: its listing info, its aggregates and (loaded on request) its result."""

    info: RunInfo
    summary: Summary | GenSummary
    config: RunConfig
    environment: dict[str, Any]
    #: a one-shot run's component make-up (empty for a generation)
    makeup_ms: dict[str, dict[str, float]]
    #: (percentile p in 0..1, total latency ms at p): dense in the tail, up to 1 − 1/n
    spectrum: tuple[np.ndarray, np.ndarray] | None
    result: RunResult | GenResult | None = field(default=None, repr=False)


def checked_name(name: str) -> str:
    """A run's name as it is stored (stripped), or StoreError: not empty, at most ``MAX_NAME``
    characters — checked by ``save``, ``rename`` and, before anything runs, ``run --name``."""
    name = name.strip()
    if not name:
        raise StoreError("a run's name cannot be empty")
    if len(name) > MAX_NAME:
        raise StoreError(f"a run's name has at most {MAX_NAME} characters")
    return name


class RunStore:
    """The run history in one SQLite file. Thread- and process-safe: a connection per call.

        store = RunStore()                 # $LATENCY_LAB_DB or ~/.latency_lab/runs.sqlite
        run_id = store.save(result)        # one transaction; returns a short id like 'a3f9c1'
        store.list(model="image-cnn")      # -> [RunInfo], newest first
        store.load("a3f").result           # prefix of an id, or 'latest', 'latest~1'
    """

    def __init__(self, path: str | Path | None = None) -> None:
        """``path`` None: the default, ``$LATENCY_LAB_DB`` or ~/.latency_lab/runs.sqlite,
        read at each use (so a long-lived store follows the environment it runs in)."""
        self._path = Path(path).expanduser() if path is not None else None
        self._ready_for: Path | None = None

    @property
    def path(self) -> Path:
        return self._path if self._path is not None else default_path()

    @property
    def _ready(self) -> bool:
        return self._ready_for == self.path

    # ---- connections --------------------------------------------------------------------
    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        path = self.path
        try:
            if not self._ready:
                path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000,
                                   isolation_level=None)  # we say BEGIN/COMMIT ourselves
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the run history {path}: {exc}") from None
        with closing(conn):
            try:
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA foreign_keys=ON")
                if not self._ready:
                    self._init(conn)
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"cannot use the run history {path}: {exc}") from None
            yield conn

    def _init(self, conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # e.g. a file system without shared memory
            conn.execute("PRAGMA journal_mode=DELETE")  # rollback journal: still atomic
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} was written by a newer Latency Lab "
                             f"(schema {version} > {SCHEMA_VERSION})")
        if version < SCHEMA_VERSION:
            with _transaction(conn):
                version = conn.execute("PRAGMA user_version").fetchone()[0]  # under the lock
                if version == 0:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    version = BASE_VERSION
                for k in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in _MIGRATIONS.get(k, ()):
                        conn.execute(statement)
                    if k == 5:
                        _move_generations(conn)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._ready_for = self.path

    def check_writable(self) -> None:
        """Open (creating if needed) the history now and prove it takes a write, so a bad path
        fails before a run, not after it measured: a file SQLite opened read-only (immutable,
        read-only mount), a directory where its journal cannot be created, a lock held too
        long. The probe is a table created inside a transaction that is rolled back: nothing
        is left in the file, and a history that does not exist yet is only created (as a
        first save would)."""
        with self._connect() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute(f"CREATE TABLE {WRITE_PROBE} (x)")
                finally:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write the run history {self.path}: {exc}") from None

    # ---- writing ------------------------------------------------------------------------
    def save(self, result: MeasuredRun, name: str | None = None,
             source: str = "cli", origin_id: str | None = None,
             owner: str | None = None) -> str:
        """Save a finished run of either kind in one transaction; returns its new short id."""
        name = checked_name(name) if name is not None else None
        cfg = result.config
        values, blobs = (_generation_row(result) if isinstance(result, GenResult) else
                         _one_shot_row(result))  # type: ignore[arg-type]
        values.update(listing_columns(result.summary, cfg))
        values.update({
            "name": name, "created_at": time.time(), "status": result.status,
            "source": source, "origin_id": origin_id, "config": _dumps(cfg.to_dict()),
            "environment": _dumps(result.environment),
            "timings": _dumps(result.timings.to_dict()), "failure": result.failure,
            "error_messages": _dumps({str(k): v for k, v in result.errors.items()}),
            "valid": int(result.validity.valid), "owner": owner})
        with self._connect() as conn, _transaction(conn):
            run_id = self._new_id(conn)
            cols = ["id", *values]
            conn.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES "
                         f"({', '.join('?' * len(cols))})", [run_id, *values.values()])
            conn.executemany("INSERT INTO request_chunks VALUES (?, ?, ?, ?, ?)",
                             [(run_id, *b) for b in blobs])
        return run_id

    @staticmethod
    def _new_id(conn: sqlite3.Connection) -> str:
        for length in (ID_LENGTH, ID_LENGTH, ID_LENGTH + 2, 32):
            candidate = uuid.uuid4().hex[:length]
            if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (candidate,)).fetchone():
                return candidate
        raise StoreError("could not find a free run id")  # pragma: no cover - 2^128

    def rename(self, ref: str, name: str) -> RunInfo:
        name = checked_name(name)
        with self._connect() as conn, self._writing():
            run_id = self._resolve(conn, ref)
            conn.execute("UPDATE runs SET name = ? WHERE id = ?", (name, run_id))
            return self._info(conn, run_id)

    def delete(self, ref: str) -> RunInfo:
        with self._connect() as conn, self._writing(), _transaction(conn):
            run_id = self._resolve(conn, ref)
            info = self._info(conn, run_id)
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))  # chunks cascade
        return info

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write the file refuses (read-only, disk full, locked too long) is one line."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"cannot change the run history {self.path}: {exc}") from None

    # ---- reading ------------------------------------------------------------------------
    def list(self, limit: int | None = None, model: str | None = None,
             status: str | None = None, text: str | None = None,
             kind: str | None = None) -> list[RunInfo]:
        """Runs of both kinds newest first; ``model``/``status``/``kind`` match exactly,
        ``text`` is a case-blind substring of the id, name, model, load, setup or device."""
        sql, args = listing_sql(limit, model, status, text, kind)
        with self._connect() as conn:
            return [_info_from_row(r) for r in conn.execute(sql, args)]

    def models(self) -> builtins.list[str]:  # (``list`` here is the method above)
        with self._connect() as conn:
            return [r[0] for r in conn.execute("SELECT DISTINCT model FROM runs ORDER BY model")]

    def resolve(self, ref: str) -> str:
        """The full id of ``ref``: an id, a unique prefix of one, ``latest`` or ``latest~N``."""
        with self._connect() as conn:
            return self._resolve(conn, ref)

    def info(self, ref: str) -> RunInfo:
        with self._connect() as conn:
            return self._info(conn, self._resolve(conn, ref))

    def load(self, ref: str, rows: bool = True) -> StoredRun:
        """A stored run; ``rows=False`` reads only its aggregates (fast, for comparing)."""
        with self._connect() as conn:
            conn.execute("BEGIN")  # one consistent read, even while somebody writes
            try:
                run_id = self._resolve(conn, ref)
                info = self._info(conn, run_id)
                row = conn.execute(
                    "SELECT config, environment, summary, timings, warnings, failure, "
                    "error_messages, makeup, spectrum, n_rows, record_dtype, finding_kinds, "
                    "extra FROM runs WHERE id = ?", (run_id,)).fetchone()
                chunks = (conn.execute("SELECT n_rows, codec, rows FROM request_chunks WHERE "
                                       "run_id = ? ORDER BY chunk", (run_id,)).fetchall()
                          if rows else None)
            finally:
                conn.execute("COMMIT")
        try:
            if info.kind == "generation":
                return _stored_generation(info, row, chunks)
            return _stored(info, run_id, row, chunks)
        except StoreError:
            raise
        except DAMAGE as exc:  # a row damaged on disk or by hand: one line, not a traceback
            raise StoreError(f"run {run_id} in the history is damaged ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else 'unreadable'}); "
                             f"`python -m latency history delete {run_id}` removes it") \
                from None

    def count(self, kind: str | None = None) -> int:
        with self._connect() as conn:
            return int(conn.execute("SELECT count(*) FROM runs WHERE ? IS NULL OR kind = ?",
                                    (kind, kind)).fetchone()[0])

    def integrity_check(self) -> str:
        """SQLite's own check of the file: 'ok' when consistent."""
        with self._connect() as conn:
            return str(conn.execute("PRAGMA integrity_check").fetchone()[0])

    # ---- internals ----------------------------------------------------------------------
    def _resolve(self, conn: sqlite3.Connection, ref: str) -> str:
        ref = (ref or "").strip()
        m = re.fullmatch(r"(?:latest|last)(?:~(\d+))?", ref)
        if m:
            back = int(m.group(1) or 0)
            row = conn.execute("SELECT id FROM runs ORDER BY created_at DESC, rowid DESC "
                               "LIMIT 1 OFFSET ?", (back,)).fetchone()
            if row is None:
                total = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
                raise StoreError(f"no run {ref!r}: the history ({self.path}) holds {total} "
                                 f"run{'s' if total != 1 else ''}")
            return str(row[0])
        # (a generation saved before both kinds shared this table kept its id ``g…``)
        if not re.fullmatch(r"g?[0-9a-fA-F]{1,32}", ref):
            raise StoreError(f"no run {ref!r} (ids look like a3f9c1; see `python -m latency "
                             "history`)")
        ref = ref.lower()
        hits = [r[0] for r in conn.execute(
            "SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
            (ref, ref + "g"))]
        if not hits:
            raise StoreError(f"no run {ref!r} in {self.path} (see `python -m latency history`)")
        if ref in hits:
            return ref
        if len(hits) > 1:
            raise StoreError(f"run id {ref!r} is ambiguous: " + ", ".join(hits[:5])
                             + (" …" if len(hits) > 5 else ""))
        return str(hits[0])

    @staticmethod
    def _info(conn: sqlite3.Connection, run_id: str) -> RunInfo:
        row = conn.execute(f"SELECT {_INFO_COLS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"no run {run_id!r}")
        return _info_from_row(row)


#: the machine while the run measured, read from its environment by SQLite (its JSON
#: functions; a listing reads no environment into Python): the disturbance summary without its
#: series, NULL when the run has none — or its environment is damaged
_MACHINE_COL = ("CASE WHEN json_valid(environment) AND json_type(environment, '$.disturbance') "
                "= 'object' THEN json_remove(json_extract(environment, '$.disturbance'), "
                "'$.series') END")


def listing_sql(limit: int | None, model: str | None, status: str | None, text: str | None,
                kind: str | None) -> tuple[str, list[Any]]:
    """A listing's SQL, newest first: ``model``/``status``/``kind`` match exactly, ``text``
    is a case-blind substring of the id, name, model, load, setup or device."""
    where, args = [], []
    for column, value in (("model", model), ("status", status), ("kind", kind)):
        if value:
            where.append(f"{column} = ?")
            args.append(value)
    if text:
        where.append("(instr(lower(id || ' ' || coalesce(name, '') || ' ' || model || ' ' "
                     "|| load || ' ' || setup || ' ' || coalesce(device, '')), ?) > 0)")
        args.append(text.lower())
    sql = f"SELECT {_INFO_COLS} FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
    sql += " ORDER BY created_at DESC, rowid DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, args


def _has_json() -> bool:
    """Whether this SQLite has its JSON functions (built in since 3.38; an older one without
    them lists runs without their machine)."""
    try:
        with closing(sqlite3.connect(":memory:")) as conn:
            conn.execute("SELECT json_valid('{}'), json_remove('{}', '$.x')")
        return True
    except sqlite3.Error:
        return False


#: ``RunInfo``'s fields in its order (``_info_from_row`` makes one of them), its machine last
_INFO_COLS = ", ".join([*(f.name for f in dataclasses.fields(RunInfo) if f.name != "machine"),
                        _MACHINE_COL if _has_json() else "NULL"])


#: the spectrum's grid: every 1 % up to p90, then 50 points a decade of 1/(1−p) — as dense at
#: p99.9 as at p50, which is what a percentile plot on the 1/(1−p) axis draws.
SPECTRUM_BODY = np.linspace(0.0, 0.9, 91)
SPECTRUM_POINTS_PER_DECADE = 50


#: what decoding a damaged row raises (zlib, JSON, numpy buffers, a config of the wrong shape)
DAMAGE = (zlib.error, ValueError, TypeError, AttributeError, KeyError, IndexError,
          RecursionError, OverflowError)  # (JSON and Unicode errors are ValueErrors)


def _stored(info: RunInfo, run_id: str, row: tuple[Any, ...],
            chunks: list[tuple[int, str, bytes]] | None) -> StoredRun:
    """A stored one-shot run from its row (and its request chunks, when asked for)."""
    (cfg, env, summary, timings, warnings, failure, errs, makeup, spectrum, n_rows, descr, kinds,
     _) = row
    config = json.loads(cfg)
    if not isinstance(config, dict):
        raise TypeError(f"its config is a {type(config).__name__}, not an object")
    stored = StoredRun(info=info, summary=_with_kinds(Summary.from_dict(json.loads(summary)),
                                                      kinds),
                       config=RunConfig.from_dict(config),
                       environment=json.loads(env), makeup_ms=json.loads(makeup),
                       spectrum=_spectrum_from_blob(spectrum))
    if chunks is not None:
        log = _decode_rows(chunks, n_rows, descr, run_id)
        stored.result = RunResult(
            config=stored.config, environment=stored.environment, status=info.status,
            log=log, errors={int(k): v for k, v in json.loads(errs).items()},
            timings=Timings.from_dict(json.loads(timings)), warnings=json.loads(warnings),
            failure=failure)
        stored.result.__dict__["summary"] = stored.summary  # as it was when measured
    return stored


def listing_columns(summary: Summary | GenSummary, cfg: RunConfig) -> dict[str, Any]:
    """What a listing shows of a run of either kind (``RunInfo``'s fields), from its summary
    and config: a saved run's columns, and a run file's line beside them. p50/p99 are the
    end-to-end latency of a one-shot run and the TTFT of a generation."""
    columns = {"model": str(cfg.model), "mode": cfg.mode, "load": load_description(cfg),
               "setup": setup_description(cfg), "device": cfg.device, "n": summary.requests,
               "errors": summary.errors, "throughput_rps": summary.throughput_rps}
    if isinstance(summary, GenSummary):
        return {**columns, "kind": "generation", "p50_ms": summary.ttft_ms.p50,
                "p99_ms": summary.ttft_ms.p99, "itl_p99_ms": summary.itl_ms.p99,
                "tpot_p99_ms": summary.tpot_ms.p99, "tokens_per_s": summary.output_tokens_per_s}
    return {**columns, "kind": "one-shot", "p50_ms": summary.latency_ms.p50,
            "p99_ms": summary.latency_ms.p99}


def _one_shot_row(result: RunResult) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """A one-shot run's own columns, and its request rows in chunks of ``CHUNK_ROWS``."""
    summary = result.summary
    snap = build_snapshot("", 0, result.status, "done", result.config, result.log,
                          result.errors, {}, measure_start_ns=result.timings.measure_start_ns,
                          measure_end_ns=result.timings.measure_end_ns)
    rows = np.ascontiguousarray(result.log, dtype=RECORD_DTYPE)
    blobs = [(i, len(rows[s: s + CHUNK_ROWS]),
              "zlib", zlib.compress(rows[s: s + CHUNK_ROWS].tobytes(), ZLIB_LEVEL))
             for i, s in enumerate(range(0, len(rows), CHUNK_ROWS))]
    return {"summary": _dumps(summary.to_dict()),
            "warnings": _dumps(result.warnings),
            "finding_kinds": _dumps([getattr(w, "kind", "recorded") for w in summary.warnings]),
            "makeup": _dumps(snap.makeup_ms), "spectrum": spectrum_of(result.log),
            "n_rows": len(rows), "record_dtype": _dumps(RECORD_DTYPE.descr)}, blobs


def _generation_row(result: GenResult) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """A generation's own columns, and its request, token and step logs as chunks 0, 1 and 2
    (``GENERATION_PARTS``)."""
    meta = result.to_dict(requests=False)
    extra = {k: meta[k] for k in ("samples", "reports", "server_split", "verdict") if k in meta}
    logs = [np.ascontiguousarray(a, dtype=d) for a, d in ((result.rows, GEN_DTYPE),
            (result.tokens, TOKEN_DTYPE), (result.steps, STEP_DTYPE))]
    return {"summary": _dumps(meta["summary"]),
            "warnings": _dumps([str(w) for w in result.warnings]),
            "extra": _dumps({**extra, "step_layout": STEP_LAYOUT}), "makeup": "{}",
            "n_rows": len(result.rows), "record_dtype": _dumps(GEN_DTYPE.descr)}, [
        (i, len(a), "zlib", zlib.compress(a.tobytes(), ZLIB_LEVEL)) for i, a in enumerate(logs)]


def _stored_generation(info: RunInfo, row: tuple[Any, ...],
                       chunks: list[tuple[int, str, bytes]] | None) -> StoredRun:
    """A stored generation from its row (and its three logs, when asked for)."""
    cfg, env, summary, timings, warnings, failure, errs, *_, extra = row
    d = {"config": json.loads(cfg), "environment": json.loads(env),
         "summary": json.loads(summary), **json.loads(extra or "{}")}
    stored = StoredRun(info=info, summary=GenSummary.from_dict(d["summary"]),
                       config=RunConfig.from_dict(d["config"]), environment=d["environment"],
                       makeup_ms={}, spectrum=None)
    if chunks is not None:
        rows, tokens, steps = (zlib.decompress(blob) for _, _, blob in chunks)
        result = GenResult(
            config=stored.config, environment=stored.environment, status=info.status,
            rows=np.frombuffer(rows, dtype=GEN_DTYPE).copy(),
            tokens=np.frombuffer(tokens, dtype=TOKEN_DTYPE).copy(),
            steps=steps_from_bytes(steps, int(d.get("step_layout", 1))),
            errors={int(k): str(v) for k, v in json.loads(errs).items()},
            timings=Timings.from_dict(json.loads(timings)), warnings=json.loads(warnings),
            failure=failure, samples={int(k): str(v) for k, v in d.get("samples", {}).items()})
        result.reports = reports_of(d, len(result.rows))
        if not len(result.rows):  # nothing to derive it from again: as it was saved
            result.__dict__["summary"] = stored.summary
        stored.result = result
    return stored


def _move_generations(conn: sqlite3.Connection) -> None:
    """Version 5: the generations of the table of their own (versions 1-4) become rows of
    ``runs`` of kind "generation", their logs chunks 0-2; they keep their ids (``g…``)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'generations'").fetchone():
        return
    for (run_id, name, created, status, source, model, load, setup, n, errors, ttft50, ttft99,
         itl99, tpot99, tok_s, _, meta, warnings, errs, *blobs) in conn.execute(
            "SELECT * FROM generations").fetchall():
        d: dict[str, Any]
        try:
            parsed = json.loads(meta)
            d = parsed if isinstance(parsed, dict) else {}
        except ValueError:  # kept, and said to be damaged when it is loaded
            d = {}
        raw = d.get("config")
        cfg: dict[str, Any] = raw if isinstance(raw, dict) else {}
        valid = (d.get("validity") or {}).get("valid") if isinstance(d.get("validity"),
                                                                     dict) else None
        extra = {k: d[k] for k in ("samples", "reports", "server_split", "verdict",
                                   "step_layout") if k in d}
        rows, tokens, steps = (zlib.decompress(b) for b in blobs)
        counts = (len(rows) // GEN_DTYPE.itemsize, len(tokens) // TOKEN_DTYPE.itemsize,
                  len(steps_from_bytes(steps, int(extra.get("step_layout", 1)))))
        n_rows = counts[0]
        conn.execute(
            "INSERT INTO runs (id, name, created_at, status, source, model, mode, load, setup, "
            "device, n, errors, p50_ms, p99_ms, throughput_rps, config, environment, summary, "
            "timings, warnings, failure, error_messages, makeup, n_rows, record_dtype, kind, "
            "valid, itl_p99_ms, tpot_p99_ms, tokens_per_s, extra) VALUES (?, ?, ?, ?, ?, ?, ?, "
            "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '{}', ?, ?, 'generation', ?, ?, ?, ?, "
            "?)", (run_id, name, created, status, source, model, cfg.get("mode", "closed"),
                   load, setup, cfg.get("device"), n, errors, ttft50, ttft99,
                   (d.get("summary") or {}).get("throughput_rps"), _dumps(cfg),
                   _dumps(d.get("environment") or {}), _dumps(d.get("summary") or {}),
                   _dumps(d.get("timings") or {}), warnings, d.get("failure"), errs, n_rows,
                   _dumps(GEN_DTYPE.descr), None if valid is None else int(bool(valid)), itl99,
                   tpot99, tok_s, _dumps(extra)))
        conn.executemany("INSERT INTO request_chunks VALUES (?, ?, ?, 'zlib', ?)",
                         [(run_id, i, k, b) for i, (k, b) in enumerate(zip(counts, blobs))])
    conn.execute("DROP TABLE generations")


def spectrum_of(log: np.ndarray) -> bytes | None:
    """Total latency (ms) of the successful measured requests at percentiles up to
    1 − 1/n (``latency_spectrum``), as stored."""
    _, ok = measured_and_ok(log)
    curve = latency_spectrum(component_ns(ok)["total"] / 1e6)
    return None if curve is None else np.stack(curve).astype("<f8").tobytes()


def latency_spectrum(ms: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Times (ms) at percentiles up to 1 − 1/n — past that a percentile would be the maximum
    repeated, not a measurement — as (p, ms) for a percentile plot; None under two values."""
    n = len(ms)
    if n < 2:
        return None
    top = np.log10(n)
    tail = 1.0 - 10.0 ** -np.arange(1.0, top, 1.0 / SPECTRUM_POINTS_PER_DECADE)
    p = np.unique(np.concatenate([SPECTRUM_BODY, tail[tail > 0.9], [1.0 - 1.0 / n]]))
    return p, np.quantile(np.sort(ms), p)  # numpy's linear rule, as every summary uses


def _spectrum_from_blob(blob: bytes | None) -> tuple[np.ndarray, np.ndarray] | None:
    if blob is None:
        return None
    arr = np.frombuffer(blob, dtype="<f8").reshape(2, -1)
    return arr[0], arr[1]


def _with_kinds(summary: Summary, kinds: str | None) -> Summary:
    """The stored summary with its warnings' kinds back (stored beside their texts, so the
    summary's JSON stays as it always was)."""
    if kinds is None:
        return summary
    listed = json.loads(kinds)
    if len(listed) != len(summary.warnings):  # not this summary's: keep what it says
        return summary
    return dataclasses.replace(summary, warnings=[Finding(str(w), str(k)) for w, k in
                                                  zip(summary.warnings, listed)])


def _info_from_row(row: tuple[Any, ...]) -> RunInfo:
    *listed, machine = row
    try:
        parsed = json.loads(machine) if machine else None
    except ValueError:
        parsed = None
    listed[18] = None if listed[18] is None else bool(listed[18])  # valid: SQLite's 0/1
    return dataclasses.replace(RunInfo(*listed),
                               machine=parsed if isinstance(parsed, dict) else None)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def _decode_rows(chunks: list[tuple[int, str, bytes]], n_rows: int, descr: str,
                 run_id: str) -> np.ndarray:
    stored_dtype = np.dtype([tuple(d) for d in json.loads(descr)])
    out = np.empty(n_rows, dtype=stored_dtype)
    pos = 0
    for n, codec, blob in chunks:
        raw = zlib.decompress(blob) if codec == "zlib" else bytes(blob)
        out[pos: pos + n] = np.frombuffer(raw, dtype=stored_dtype, count=n)
        pos += n
    if pos != n_rows:
        raise StoreError(f"run {run_id} has {pos} of its {n_rows} request rows")
    if stored_dtype == RECORD_DTYPE:
        return out
    # an older record layout: copy the fields both share; a field added since takes the value
    # the engine gives a request that never set it
    log = np.zeros(n_rows, dtype=RECORD_DTYPE)
    for name in RECORD_DTYPE.names or ():
        if name in (stored_dtype.names or ()):
            log[name] = out[name]
        elif name in _NEW_FIELD_DEFAULTS:
            log[name] = _NEW_FIELD_DEFAULTS[name]
    return log


#: fields of ``RECORD_DTYPE`` whose "not set" value is not zero (for rows saved before they
#: existed): a request is decomposed into server components unless the transport says not.
_NEW_FIELD_DEFAULTS: dict[str, Any] = {"decomposed": True}
