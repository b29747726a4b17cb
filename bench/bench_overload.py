"""An overloaded open-loop run is bounded: its memory and wall time, with and without the bound.

    python bench/bench_overload.py [--duration 20]
    python bench/bench_overload.py --quick    # a smoke run (CI): 2 s and 0.5 s of load

The synthetic pipeline at its defaults (2 ms preprocess, 5 ms forward, 1 ms postprocess: about
200 requests/s on one replica) offered far more than it can serve, as `python -m latency run`
in a subprocess; peak RSS of that process (``wait4``) and its wall time. "Bound off" raises the
backlog cap to its maximum (1,000,000 in flight) and, for the second pair, the drain grace to
600 s — the behaviour before the bound existed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(args: list[str]) -> dict[str, float]:
    out = Path(tempfile.mkdtemp()) / "r.json"
    t = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "latency", "run", "--warmup", "0",
                             "--quiet", "--no-save", "--json", str(out), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t
    s = json.loads(out.read_text())["summary"]
    return {"wall_s": wall, "peak_rss_mb": usage.ru_maxrss / 1024,
            "served": s["requests"], "dropped": s.get("dropped", 0)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true",
                    help="2 s at 100,000 req/s, 0.5 s at 2,000 (the unbounded drain ~5 s)")
    a = ap.parse_args()
    if a.quick:
        a.duration = 2.0
    d = f"{a.duration:g}"
    short = "0.5" if a.quick else "5"
    cases = [
        (f"--rate 100000 --duration {d}, bounded (default)", ["--rate", "100000",
                                                               "--duration", d]),
        (f"--rate 100000 --duration {d}, backlog cap off", ["--rate", "100000", "--duration",
                                                             d, "--max-backlog", "1000000"]),
        (f"--rate 2000 --duration {short}, bounded (default)",
         ["--rate", "2000", "--duration", short]),
        (f"--rate 2000 --duration {short}, bound off (cap and grace)",
         ["--rate", "2000", "--duration", short, "--max-backlog", "1000000",
          "--drain-grace", "600"]),
    ]
    for label, args in cases:
        r = run(args)
        print(f"{label:<52} wall {r['wall_s']:6.1f} s, peak RSS {r['peak_rss_mb']:6.0f} MB, "
              f"served {r['served']:,}, dropped {r['dropped']:,}", flush=True)


if __name__ == "__main__":
    main()
