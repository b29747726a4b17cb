"""The hot paths of two versions of the code side by side: this checkout and an older one.

    git worktree add /tmp/old 18890bb
    python bench/bench_before_after.py --old /tmp/old [--rounds 8]
    python bench/bench_before_after.py --quick    # a smoke run (CI): this checkout against
                                                  # itself, one round, small sizes (< 1 min)

Each round runs, in fresh processes, old then new (alternating which goes first): the no-op
round trip at concurrency 1 (the first measurement of bench_engine_overhead.py: 20,000
requests) and the Snapshot and summary of 200,000 synthetic request rows (median of 25).
Works with the code before the package was reorganised (flat ``latency/*.py``) and after.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

PROBE = r'''
import json, os, statistics, sys, time
import numpy as np
if len(sys.argv) > 1 and sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
QUICK = os.environ.get("BENCH_QUICK") == "1"
requests, n, k = (2000, 20_000, 5) if QUICK else (20000, 200_000, 25)
try:  # before the reorganisation
    from latency.components import RECORD_DTYPE
    from latency.config import RunConfig
    from latency.engine import execute
    from latency.snapshot import build_snapshot
    from latency.summary import summarize_rows
    cfg = {}  # configs were dicts there
except ImportError:
    from latency.analysis.snapshot import build_snapshot
    from latency.analysis.summary import summarize_rows
    from latency.core.config import RunConfig
    from latency.core.records import RECORD_DTYPE
    from latency.execution.engine import execute
    cfg = RunConfig(model="synthetic")  # a typed config since the reorganisation
noop = {"preprocess_ms": 0, "forward_ms": 0, "postprocess_ms": 0}
r = execute(RunConfig(model="synthetic", model_args=noop, concurrency=1, requests=requests,
                      warmup=500))
s = r.summary
p50 = s.latency_ms.p50 if hasattr(s, "latency_ms") else s["latency_ms"]["p50"]
rng = np.random.default_rng(0)
rows = np.zeros(n, dtype=RECORD_DTYPE)
t = np.cumsum(rng.exponential(1e5, n)).astype(np.int64)
rows["t_intended"] = t; rows["t_sent"] = t + 1000; rows["t_received"] = t + 30000
rows["t_pre_start"] = t + 40000; rows["t_pre_end"] = t + 1_000_000
rows["t_fwd_start"] = t + 1_200_000
rows["t_fwd_end"] = t + (3e6 + rng.exponential(1e6, n)).astype(np.int64)
rows["t_post_start"] = rows["t_fwd_end"] + 1000
rows["t_post_end"] = rows["t_post_start"] + 200000
rows["t_done"] = rows["t_post_end"] + 30000
rows["batch_size"] = 1
def median_ms(fn, k=k):
    out = []
    for _ in range(k):
        a = time.perf_counter(); fn(); out.append((time.perf_counter() - a) * 1e3)
    return statistics.median(out)
snap = median_ms(lambda: build_snapshot("x", 1, "running", "measuring", cfg, rows, {}, {},
                                        int(t[0]), None))
summ = median_ms(lambda: summarize_rows(rows, {}, measure_start_ns=int(t[0]),
                                        measure_end_ns=None, config=cfg))
print(json.dumps({"roundtrip_us": p50 * 1000, "snapshot_ms": snap, "summary_ms": summ}))
'''


def probe(old: str | None, quick: bool = False) -> dict[str, float]:
    args = [sys.executable, "-c", PROBE] + ([old] if old else [])
    env = {**os.environ, "BENCH_QUICK": "1" if quick else "0"}
    out = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        raise SystemExit(f"the probe failed ({old or 'this checkout'}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", help="a checkout of the older commit (required but with --quick, "
                    "which compares this checkout with itself)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: one round, 2,000 requests and 20,000 rows (< 1 min)")
    a = ap.parse_args()
    if a.old is None and not a.quick:
        ap.error("--old is required (a checkout of the older commit)")
    old = a.old if a.old is not None else str(Path(__file__).resolve().parents[1])
    rounds = 1 if a.quick else a.rounds
    got: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for i in range(rounds):
        for arm in (("old", "new") if i % 2 == 0 else ("new", "old")):
            got[arm].append(probe(old if arm == "old" else None, a.quick))
            print(arm, got[arm][-1], flush=True)
    for key, unit in (("roundtrip_us", "µs"), ("snapshot_ms", "ms"), ("summary_ms", "ms")):
        for arm in ("old", "new"):
            vals = sorted(r[key] for r in got[arm])
            print(f"{key:>13} {arm}: " + ", ".join(f"{v:.1f}" for v in vals)
                  + f" {unit} (median {statistics.median(vals):.1f})")


if __name__ == "__main__":
    main()
