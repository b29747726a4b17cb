"""The Load Simulator's generation mode: how long the page takes to answer, uncached.

    python bench/bench_gen_page.py
    python bench/bench_gen_page.py --quick    # a smoke run (CI): one round

Times the page's own script through Streamlit's AppTest — what the server computes before it
sends the page (the setting's simulation, the rate sweep, the goodput bisection, the figures)
— for: the page opened in generation mode with nothing cached (each round in a fresh process:
Streamlit's caches live in the process), then the arrival rate changed (the sweep is cached
apart from the rate, so only the setting's own simulation runs again), then a slider that
changes the server (the sweep runs again). Browser rendering is not included. The figures go
in BENCHMARKS.md with the machine's state; docs/simulator.md quotes them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE_ROUND = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from streamlit.testing.v1 import AppTest

at = AppTest.from_file(sys.argv[1] + "/app.py", default_timeout=600)
at.run()
at.switch_page("views/load_simulator.py").run()
t = time.perf_counter()
at.sidebar.segmented_control(key="sim_kind").set_value("generation").run()
cold = time.perf_counter() - t
assert not at.exception and not at.error, (at.exception, at.error)
rate = at.sidebar.number_input(key="gsim_rate")
t = time.perf_counter()
rate.set_value(rate.value + 1.0).run()
rate_s = time.perf_counter() - t
slots = at.sidebar.slider(key="gsim_max_running")
t = time.perf_counter()
slots.set_value(slots.value * 2).run()
server_s = time.perf_counter() - t
assert not at.exception and not at.error, (at.exception, at.error)
print(json.dumps({"cold_s": cold, "rate_s": rate_s, "server_s": server_s}))
'''


def one_round() -> dict[str, float]:
    """One fresh process: the page opened cold, the rate moved, the slots moved (an empty
    history of its own: the parametric server, as a new user first sees it)."""
    import tempfile

    db = Path(tempfile.mkdtemp(prefix="bench-gen-page-")) / "runs.sqlite"
    out = subprocess.run([sys.executable, "-c", ONE_ROUND, str(ROOT)], capture_output=True,
                         text=True, timeout=900, cwd=ROOT,
                         env={**os.environ, "LATENCY_LAB_DB": str(db)})
    if out.returncode:
        raise SystemExit(f"error: a round failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="one round (a smoke run)")
    a = p.parse_args(argv)
    rounds = 1 if a.quick else a.rounds
    rows = []
    for i in range(rounds):
        t = time.perf_counter()
        rows.append(one_round())
        print(f"round {i + 1}: cold {rows[-1]['cold_s']:.1f} s, rate {rows[-1]['rate_s']:.1f} s, "
              f"slots {rows[-1]['server_s']:.1f} s ({time.perf_counter() - t:.0f} s with "
              "start-up)", flush=True)
    print(f"{'':<36}{'median':>8}{'max':>8}")
    for key, label in (("cold_s", "opened in generation mode, cold"),
                       ("rate_s", "the arrival rate changed"),
                       ("server_s", "the slots changed (the sweep again)")):
        values = [r[key] for r in rows]
        print(f"{label:<36}{statistics.median(values):>7.1f}s{max(values):>7.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
