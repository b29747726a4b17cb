"""Run history: save and load a 100,000-request run, and why rows are stored as compressed
array chunks rather than one SQL row per request.

    python bench/bench_store.py [--requests 100000] [--repeat 5]
    python bench/bench_store.py --quick    # a smoke run (CI): 5,000 requests, 1 repeat

The run is real (the synthetic pipeline with zero-cost stages, closed loop, 4 clients), saved
into a fresh database in a temporary directory. Side by side in one process: ``RunStore.save``
/ ``load`` as shipped (zlib level 1 chunks), the same with raw (uncompressed) chunks, and a
plain table with one SQL row per request (``executemany``), which is what the BLOB replaces.
"""
from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.storage import store as store_mod
from latency.storage.store import RunStore


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), out


def per_row_table(path: Path, rows) -> tuple[float, float]:
    """Save and load the rows as one SQL row per request (the alternative to a BLOB)."""
    names = list(rows.dtype.names)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"CREATE TABLE IF NOT EXISTS req (run TEXT, {', '.join(names)})")
    t = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(f"INSERT INTO req VALUES ('r', {', '.join('?' * len(names))})",
                     rows.tolist())
    conn.execute("COMMIT")
    save = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    back = conn.execute(f"SELECT {', '.join(names)} FROM req WHERE run='r'").fetchall()
    np.array(back, dtype=rows.dtype)
    load = (time.perf_counter() - t) * 1e3
    conn.close()
    return save, load


def _size_mb(path: Path) -> float:
    """The database file and its write-ahead log."""
    wal = Path(str(path) + "-wal")
    return (path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="5,000 requests, 1 repeat")
    a = ap.parse_args()
    if a.quick:
        a.requests, a.repeat = 5_000, 1
    cfg = RunConfig(model="synthetic", model_args={"forward_ms": 0.0, "preprocess_ms": 0.0,
                                                   "postprocess_ms": 0.0},
                    concurrency=4, requests=a.requests, warmup=100)
    result = execute(cfg)
    n = len(result.log)
    raw_mb = result.log.nbytes / 1e6
    print(f"run: {n:,} request rows ({result.log.dtype.itemsize} bytes each, {raw_mb:.1f} MB "
          f"raw), status {result.status}\n")
    with tempfile.TemporaryDirectory() as tmp:
        for label, level in (("zlib-1 chunks (shipped)", store_mod.ZLIB_LEVEL),
                             ("zlib-6 chunks", 6)):
            store_mod.ZLIB_LEVEL = level
            store = RunStore(Path(tmp) / f"{level}.sqlite")
            save_ms, rid = timed(lambda s=store: s.save(result), a.repeat)
            load_ms, _ = timed(lambda s=store, r=rid: s.load(r), a.repeat)
            agg_ms, _ = timed(lambda s=store, r=rid: s.load(r, rows=False), a.repeat)
            list_ms, _ = timed(lambda s=store: s.list(), a.repeat)
            size = _size_mb(store.path) / a.repeat
            print(f"{label:<26} save {save_ms:7.1f} ms   load {load_ms:6.1f} ms   "
                  f"aggregates only {agg_ms:5.2f} ms   list {list_ms:5.2f} ms   "
                  f"{size:5.1f} MB per run")
        store_mod.ZLIB_LEVEL = 1
        # raw chunks: same code path with compression off
        orig = store_mod.zlib.compress
        store_mod.zlib.compress = lambda data, level=0: data  # type: ignore[assignment]
        orig_decompress = store_mod.zlib.decompress
        store_mod.zlib.decompress = lambda data: data  # type: ignore[assignment]
        try:
            store = RunStore(Path(tmp) / "raw.sqlite")
            save_ms, rid = timed(lambda: store.save(result), a.repeat)
            load_ms, _ = timed(lambda: store.load(rid), a.repeat)
            size = _size_mb(store.path) / a.repeat
            print(f"{'raw chunks':<26} save {save_ms:7.1f} ms   load {load_ms:6.1f} ms   "
                  f"{'':<37}{size:5.1f} MB per run")
        finally:
            store_mod.zlib.compress = orig
            store_mod.zlib.decompress = orig_decompress
        save_ms, load_ms = per_row_table(Path(tmp) / "rows.sqlite", result.log)
        print(f"{'one SQL row per request':<26} save {save_ms:7.1f} ms   load {load_ms:6.1f} ms"
              "   (single measurement)")


if __name__ == "__main__":
    main()
