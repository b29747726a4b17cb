"""How long a run takes to start: run processes forked by the fork server against spawned.

Each method in its own Python process (``LATENCY_LAB_START_METHOD``), side by side in one
invocation: N one-shot runs of 10 synthetic requests (stage times 0), each timed from the call
to its result. The first run of a process also starts the fork server (it imports the engine
once); the median of the others is what every later run costs — each A/B arm, each lesson
run, each dashboard run.

    python bench/bench_run_start.py [--runs 8]
    python bench/bench_run_start.py --quick      # CI: 3 runs each
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import json, sys, time
from latency.core.config import RunConfig
from latency.execution.process import run
took = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter()
    r = run(RunConfig(model="synthetic", requests=10, warmup=0,
                      model_args={"preprocess_ms": 0, "forward_ms": 0, "postprocess_ms": 0}))
    took.append(time.perf_counter() - t)
    assert r.status == "completed", r.failure
print(json.dumps(took))
"""


def timed(method: str, runs: int) -> list[float]:
    env = {**os.environ, "LATENCY_LAB_START_METHOD": method}
    out = subprocess.run([sys.executable, "-c", CHILD, str(runs)], env=env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"error: the {method} runs failed: {out.stderr.strip()[-800:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="3 runs each (CI)")
    args = ap.parse_args()
    runs = 3 if args.quick else max(args.runs, 2)
    got = {m: timed(m, runs) for m in ("spawn", "forkserver")}
    print(f"{runs} one-shot runs of 10 synthetic requests, each method in its own process")
    print(f"{'method':<11} {'first run s':>12} {'later runs s (median)':>22}")
    later = {}
    for method, took in got.items():
        later[method] = sorted(took[1:])[len(took[1:]) // 2]
        print(f"{method:<11} {took[0]:>12.2f} {later[method]:>22.2f}")
    print(f"a later run starts {later['spawn'] / later['forkserver']:.1f}× sooner forked "
          "than spawned")


if __name__ == "__main__":
    main()
