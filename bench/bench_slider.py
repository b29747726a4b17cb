"""Load Simulator: time from a slider move to the charts, uncached (target ≤ 300 ms).

    python bench/bench_slider.py
    python bench/bench_slider.py --quick    # a smoke run (CI): three of the settings

One slider move on the Load Simulator page costs, when the setting has not been seen before:
the prediction (40,000 simulated requests aggregated into a snapshot), the hockey-stick curve
(14 utilisations simulated) and three Plotly figures serialised the way Streamlit sends them.
This times exactly that work for a sweep of settings a workshop would visit; a setting seen
before comes from the cache in microseconds, and the hockey stick is cached apart from the
arrival rate (it sweeps the rate), so moving the rate slider costs only the prediction.
Browser rendering is not included.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from latency.analysis.snapshot import build_snapshot
from latency.core.config import RunConfig
from latency.figures import plots
from latency.simulation.capacity import hockey_stick
from latency.simulation.simulator import ServiceModel, SimConfig, simulate, utilisation

SIM_REQUESTS = 40_000  # as ui/load_simulator.py
CURVES: dict = {}  # the page caches the hockey stick apart from the rate (ui/simulator.curve)

SETTINGS = [  # (rate, replicas, batch, delay ms, service ms, dist)
    (50, 1, 1, 0.0, 10.0, "exponential"), (70, 1, 1, 0.0, 10.0, "exponential"),
    (90, 1, 1, 0.0, 10.0, "exponential"), (150, 2, 1, 0.0, 10.0, "lognormal"),
    (400, 2, 8, 5.0, 10.0, "exponential"), (1500, 4, 16, 10.0, 20.0, "constant"),
    (120, 1, 1, 0.0, 10.0, "exponential"),  # unstable
]


def slider_move(rate: float, replicas: int, batch: int, delay: float, service_ms: float,
                dist: str, with_curve: bool = True) -> None:
    svc = ServiceModel(forward_ms=service_ms, dist=dist, cv=1.0)
    cfg = SimConfig(rate=rate, replicas=replicas, batch_size=batch, max_batch_delay_ms=delay,
                    requests=SIM_REQUESTS)
    rows = simulate(cfg, svc)
    m = rows[~rows["warmup"]]
    snap = build_snapshot("simulated", 0, "completed", "simulated", RunConfig(rate=rate), rows,
                          {}, {},
                          int(m["t_intended"][0]), int(m["t_done"].max()))
    rho = utilisation(cfg, svc)
    key = (replicas, batch, delay, service_ms, dist)
    c = CURVES[key] = hockey_stick(cfg, svc) if with_curve else CURVES[key]
    lat = snap.summary.latency_ms
    figs = [plots.stacked_components_figure(snap.makeup_ms),
            plots.latency_histogram_figure(snap.hist_edges_ms, snap.hist_counts,
                                           {k: lat.get(k) for k in ("p50", "p95", "p99")}, 100.0,
                                           snap.share_within(100.0)),
            plots.hockey_stick_figure(c.utilisation, c.p50_ms, c.p99_ms, c.theory_p50_ms,
                                      c.theory_p99_ms,
                                      (min(rho, 0.999), lat.p50, lat.p99)
                                      if rho < 1 else None, 100.0)]
    if rho >= 1:
        figs.append(plots.timeseries_figure(snap.series, offered_rps=rate))
    for f in figs:
        f.to_json()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="three settings (a stable one, batching, the unstable one)")
    settings = [SETTINGS[0], SETTINGS[4], SETTINGS[6]] if ap.parse_args().quick else SETTINGS
    slider_move(*settings[0])  # imports and first-call costs
    times = []
    for s in settings:
        t = time.perf_counter()
        slider_move(*s)
        times.append((time.perf_counter() - t) * 1e3)
        print(f"rate {s[0]:>5} replicas {s[1]} batch {s[2]:>2}/{s[3]:g} ms "
              f"{s[4]:g} ms {s[5]:<11} {times[-1]:6.0f} ms")
    print(f"any slider → charts, uncached: median {np.median(times):.0f} ms, "
          f"max {max(times):.0f} ms (target ≤ 300 ms)")
    rate_only = []
    for s in settings:  # the rate slider: the curve is cached, only the marker moves
        t = time.perf_counter()
        slider_move(s[0] * 1.1, *s[1:], with_curve=False)
        rate_only.append((time.perf_counter() - t) * 1e3)
    print(f"rate slider → charts, uncached prediction: median {np.median(rate_only):.0f} ms, "
          f"max {max(rate_only):.0f} ms")


if __name__ == "__main__":
    main()
