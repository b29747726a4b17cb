"""Generation runs in the run history: the same SQLite file, a table of their own.

Why a table of its own: a generation's records (a row a request, a row a token, a row a
scheduler step) and its figures (TTFT, ITL, TPOT, tokens/s) are not a one-shot run's, so they
are not squeezed into the ``runs`` table's columns; the file, its location, its write-ahead
log and its one-transaction-a-save are shared (``RunStore``'s connection). A generation's id
is ``g`` and six hex digits, so ``history show``, ``export``, ``rename``, ``delete`` and
``compare`` tell the two kinds apart by the id alone.

What is kept: the result without its records as JSON (config, environment, timings, summary,
its own warnings), and the request, token and step logs as their numpy bytes, zlib-compressed.
"""
from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from latency.analysis.gen_result import GenResult, reports_of
from latency.analysis.gen_summary import GenSummary
from latency.analysis.machine import is_disturbed
from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.core.describe import load_description, setup_description
from latency.core.gen_records import (
    GEN_DTYPE,
    STEP_DTYPE,
    STEP_LAYOUT,
    TOKEN_DTYPE,
    steps_from_bytes,
)
from latency.storage.store import DAMAGE, RunStore, StoreError, checked_name, listing_sql

PREFIX = "g"
ZLIB_LEVEL = 1

_TABLE = """
CREATE TABLE IF NOT EXISTS generations (
    id TEXT PRIMARY KEY,
    name TEXT,
    created_at REAL NOT NULL,
    status TEXT NOT NULL,
    source TEXT NOT NULL,
    model TEXT NOT NULL,
    load TEXT NOT NULL,
    setup TEXT NOT NULL,
    n INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    ttft_p50_ms REAL,
    ttft_p99_ms REAL,
    itl_p99_ms REAL,
    tpot_p99_ms REAL,
    tokens_per_s REAL,
    disturbed INTEGER,
    meta TEXT NOT NULL,
    warnings TEXT NOT NULL,
    errors_json TEXT NOT NULL,
    rows BLOB NOT NULL,
    tokens BLOB NOT NULL,
    steps BLOB NOT NULL
)"""
#: the listing's columns; a run's validity is read from its stored result (every saved
#: generation has one), so an INVALID run is never listed as merely "completed"
_INFO = ("id, name, created_at, status, source, model, load, setup, n, errors, ttft_p50_ms, "
         "ttft_p99_ms, itl_p99_ms, tpot_p99_ms, tokens_per_s, disturbed, "
         "CASE WHEN json_valid(meta) THEN json_extract(meta, '$.validity.valid') END")


def is_generation_id(ref: str) -> bool:
    """Whether ``ref`` names a generation in the history (``g`` + hex digits)."""
    return bool(re.fullmatch(r"g[0-9a-fA-F]{1,32}", (ref or "").strip()))


@dataclass(frozen=True)
class GenInfo:
    """One line of the history's generations."""

    id: str
    name: str | None
    created_at: float
    status: str
    source: str
    model: str
    load: str
    setup: str
    n: int
    errors: int
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    tpot_p99_ms: float | None
    tokens_per_s: float | None
    disturbed: bool | None
    #: VALID (True) or INVALID (False), as the run judged itself; None where unknown
    valid: bool | None = None

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created_at))

    def to_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__},
                "when": self.when, "kind": "generation"}


class GenerationStore:
    """Generation runs in the history file (``RunStore``'s path and connections)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._runs = RunStore(path)

    @property
    def path(self) -> Path:
        return self._runs.path

    def _connect(self) -> Any:
        return self._runs._connect()

    def _table(self, conn: sqlite3.Connection) -> None:
        conn.execute(_TABLE)

    def check_writable(self) -> None:
        self._runs.check_writable()

    def save(self, result: GenResult, name: str | None = None, source: str = "cli") -> str:
        name = checked_name(name) if name is not None else None
        s, c = result.summary, result.config
        meta = {**result.to_dict(requests=False), "step_layout": STEP_LAYOUT}
        blob = {k: zlib.compress(np.ascontiguousarray(a, dtype=d).tobytes(), ZLIB_LEVEL)
                for k, a, d in (("rows", result.rows, GEN_DTYPE),
                                ("tokens", result.tokens, TOKEN_DTYPE),
                                ("steps", result.steps, STEP_DTYPE))}
        disturbed = is_disturbed(result.environment)
        with self._connect() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                self._table(conn)
                run_id = self._new_id(conn)
                conn.execute(
                    "INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                    "?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, name, time.time(), result.status, source, str(c.model),
                     load_description(c), setup_description(c), s.requests, s.errors,
                     s.ttft_ms.p50, s.ttft_ms.p99, s.itl_ms.p99, s.tpot_ms.p99,
                     s.output_tokens_per_s, None if disturbed is None else int(disturbed),
                     json.dumps(meta, default=str), json.dumps([str(w) for w in
                                                                result.warnings]),
                     json.dumps({str(k): v for k, v in result.errors.items()}),
                     blob["rows"], blob["tokens"], blob["steps"]))
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(f"cannot save to the run history {self.path}: {exc}") \
                    from None
        return run_id

    @staticmethod
    def _new_id(conn: sqlite3.Connection) -> str:
        while True:
            run_id = PREFIX + uuid.uuid4().hex[:6]
            if conn.execute("SELECT 1 FROM generations WHERE id = ?", (run_id,)).fetchone() \
                    is None:
                return run_id

    def list(self, limit: int | None = None, model: str | None = None,
             status: str | None = None, text: str | None = None) -> list[GenInfo]:
        sql, args = listing_sql(f"SELECT {_INFO} FROM generations", limit, model, status, text)
        with self._connect() as conn:
            self._table(conn)
            return [_info(r) for r in conn.execute(sql, args)]

    def resolve(self, ref: str) -> str:
        with self._connect() as conn:
            self._table(conn)
            return self._resolve(conn, ref)

    def _resolve(self, conn: sqlite3.Connection, ref: str) -> str:
        ref = (ref or "").strip().lower()
        if not is_generation_id(ref):
            raise StoreError(f"no generation {ref!r} (their ids look like g3f9c1a)")
        hits = [r[0] for r in conn.execute(
            "SELECT id FROM generations WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
            (ref, ref + "g"))]
        if not hits:
            raise StoreError(f"no generation {ref!r} in {self.path} (see `python -m latency "
                             "history`)")
        if ref in hits:
            return ref
        if len(hits) > 1:
            raise StoreError(f"generation id {ref!r} is ambiguous: " + ", ".join(hits[:5]))
        return str(hits[0])

    def info(self, ref: str) -> GenInfo:
        with self._connect() as conn:
            self._table(conn)
            run_id = self._resolve(conn, ref)
            return _info(conn.execute(f"SELECT {_INFO} FROM generations WHERE id = ?",
                                      (run_id,)).fetchone())

    def load(self, ref: str) -> tuple[GenInfo, GenResult]:
        with self._connect() as conn:
            self._table(conn)
            run_id = self._resolve(conn, ref)
            info = _info(conn.execute(f"SELECT {_INFO} FROM generations WHERE id = ?",
                                      (run_id,)).fetchone())
            meta, warnings, errors, rows, tokens, steps = conn.execute(
                "SELECT meta, warnings, errors_json, rows, tokens, steps FROM generations "
                "WHERE id = ?", (run_id,)).fetchone()
        try:
            d = json.loads(meta)
            result = GenResult(
                config=RunConfig.from_dict(d.get("config") or {}),
                environment=dict(d.get("environment") or {}), status=info.status,
                rows=np.frombuffer(zlib.decompress(rows), dtype=GEN_DTYPE).copy(),
                tokens=np.frombuffer(zlib.decompress(tokens), dtype=TOKEN_DTYPE).copy(),
                steps=steps_from_bytes(zlib.decompress(steps), int(d.get("step_layout", 1))),
                errors={int(k): str(v) for k, v in json.loads(errors).items()},
                timings=Timings.from_dict(d.get("timings")), warnings=json.loads(warnings),
                failure=d.get("failure"),
                samples={int(k): str(v) for k, v in (d.get("samples") or {}).items()})
            result.reports = reports_of(d, len(result.rows))
            if not len(result.rows) and isinstance(d.get("summary"), dict):
                result.__dict__["summary"] = GenSummary.from_dict(d["summary"])
        except DAMAGE as exc:
            raise StoreError(f"generation {run_id} in the history is damaged "
                             f"({type(exc).__name__}); `python -m latency history delete "
                             f"{run_id}` removes it") from None
        return info, result

    def rename(self, ref: str, name: str) -> GenInfo:
        name = checked_name(name)
        with self._connect() as conn:
            self._table(conn)
            run_id = self._resolve(conn, ref)
            conn.execute("UPDATE generations SET name = ? WHERE id = ?", (name, run_id))
        return self.info(run_id)

    def delete(self, ref: str) -> GenInfo:
        info = self.info(ref)
        with self._connect() as conn:
            conn.execute("DELETE FROM generations WHERE id = ?", (info.id,))
        return info


def _info(row: tuple[Any, ...]) -> GenInfo:
    values = list(row)
    for i in (-2, -1):  # disturbed, valid: SQLite's 0/1, or NULL
        values[i] = None if values[i] is None else bool(values[i])
    return GenInfo(*values)
