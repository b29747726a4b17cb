"""How long a sweep takes, and what its own client costs.

A sweep (``python -m latency sweep``) of our own server standing in for yours (synthetic-lm
behind ``latency serve``, reached as a ``--target``, so the client is all the run process
does): a floor, a ceiling and rates between. Printed per point: the seconds it measured, the
seconds it took in all (starting its run process, warm-up, draining, saving), the client's CPU
while it measured (the run process, in cores: what the sweep itself costs the machine) beside
the server's; then the whole sweep's time, what of it was not measuring (the sweep's own
overhead: runs starting and saving, the simulator's fit and its predictions) and the answer.

    python bench/bench_sweep.py            # 5 rates between, 15 s points
    python bench/bench_sweep.py --quick    # 2 rates between, 4 s points (CI)
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from latency.core.config import RunConfig  # noqa: E402
from latency.execution.sweep import (  # noqa: E402
    SweepPlan,
    objectives_text,
    run_sweep,
    saved_runner,
)
from latency.serve.http_server import ServerProcess  # noqa: E402
from latency.simulation.sweep_prediction import predict_points  # noqa: E402
from latency.storage.store import RunStore  # noqa: E402

SERVER = {"step_ms": 3.0, "step_ms_per_seq": 0.4, "prefill_ms": 1.5,
          "prefill_ms_per_token": 0.06}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 rates between, 4 s points")
    a = ap.parse_args(argv)
    points, point_s = (2, 4.0) if a.quick else (5, 15.0)
    server = RunConfig(model="synthetic-lm", max_running=4, model_args=SERVER)
    proc = ServerProcess(server.checked()).start()
    taken: list[tuple[str, float, object]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = RunStore(Path(tmp) / "h.sqlite")
            inner = saved_runner(store, threading.Event(), who="bench sweep")

            def runner(config: RunConfig, name: str, seconds: float):  # type: ignore[no-untyped-def]
                t0 = time.perf_counter()
                run, run_id = inner(config, name, seconds)
                taken.append((name.split(": ", 1)[-1], time.perf_counter() - t0, run))
                return run, run_id

            base = RunConfig(target=f"{proc.url}/v1", api="completions", tokenizer="server",
                             prompt_tokens="uniform:16:300", output_tokens="uniform:8:48",
                             slo_ttft_ms=300.0, slo_tpot_ms=15.0, warmup=4,
                             duration_s=point_s).checked()
            plan = SweepPlan(base, points=points, point_s=point_s, ceiling_clients=8,
                             max_duration_s=900.0)
            t0 = time.perf_counter()
            result = run_sweep(plan, runner, predict=predict_points)
            total = time.perf_counter() - t0
    finally:
        proc.stop()
    print(f"sweep of synthetic-lm behind `latency serve` (4 slots; {SERVER}), reached as a "
          f"--target; objectives {objectives_text(base)}; {points} rates between, "
          f"{point_s:g} s points")
    print(f"{'point':<16}{'measured s':>11}{'in all s':>10}{'client cores':>14}"
          f"{'server cores':>14}{'requests':>10}")
    measured = 0.0
    for label, seconds, run in taken:
        d = run.environment.get("disturbance") or {}  # type: ignore[attr-defined]
        server_cores = d.get("target_cores_mean")  # the local target's process
        span = float(run.summary.duration_s)  # type: ignore[attr-defined]
        measured += span
        print(f"{label:<16}{span:>11.1f}{seconds:>10.1f}{_n(d.get('run_cores_mean')):>14}"
              f"{_n(server_cores):>14}{run.summary.successful:>10}")  # type: ignore[attr-defined]
    print(f"the whole sweep: {total:.0f} s, of which {measured:.0f} s measuring and "
          f"{total - measured:.0f} s the sweep's own (runs starting, warming up, draining and "
          "saving; the simulator's fit and predictions)")
    print(f"answer: {result.answer.sentence(objectives_text(base))}")
    return 0


def _n(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "—"


if __name__ == "__main__":
    sys.exit(main())
