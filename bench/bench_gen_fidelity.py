"""Fidelity of the generation simulator: does it predict our own server's TTFT and TPOT on
settings it was not fitted on?

One calibration run fits the server's costs (``simulation.gen_service``: the step cost model
over its steps, its spread, the tokenizer, detokenizing). Then held-out runs — other rates,
other prompt and output lengths, chunked prefill at other chunk sizes, fewer slots — are each
measured by the engine and simulated with the calibration run's costs, replaying the held-out
run's own trace (its requests' arrival times and lengths: the load it was offered, an input,
as Vidur replays a trace; none of its times). The error is |simulated − measured| / measured of
TTFT and TPOT at p50 and p99, per held-out run, the simulated figure being the median of
``SEEDS`` simulations. The aim: every one within 10 %.

The simulator reproduces the calibration run's machine too — its drift and its spikes
(``gen_service``) — so a calibration measured while the machine was disturbed predicts a
disturbed server: the machine while each run measured is printed with it.

    python bench/bench_gen_fidelity.py                 # tiny-lm (real compute), ~5 minutes
    python bench/bench_gen_fidelity.py --model synthetic-lm
    python bench/bench_gen_fidelity.py --quick         # synthetic-lm, two short held-out runs
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from latency.analysis.summary_text import machine_line  # noqa: E402
from latency.core.config import RunConfig  # noqa: E402
from latency.execution.gen_engine import execute_generation  # noqa: E402
from latency.simulation.gen_replay import fitted_service, gen_replay  # noqa: E402

AIM = 0.10
#: simulations a held-out run is predicted by (their median: the simulator's prediction, not
#: one draw of its randomness — the measured run is one draw of the machine's)
SEEDS = 5
METRICS = (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("tpot_ms", "p50"), ("tpot_ms", "p99"))
#: synthetic-lm's set costs (ms) for its runs: a 2-core machine's tiny-lm, roughly
SYNTHETIC = {"prefill_ms": 1.5, "prefill_ms_per_token": 0.06, "step_ms": 3.0,
             "step_ms_per_seq": 0.4}


@dataclass(frozen=True)
class Setting:
    name: str
    changes: dict


def settings(quick: bool, rate: float) -> tuple[dict, list[Setting]]:
    # the calibration covers the lengths and the running sequences the held-out runs reach
    # (a simulation beyond them extrapolates, and says so)
    calibration = dict(rate=rate, prompt_tokens="uniform:16:900", output_tokens="uniform:8:48",
                       max_running=8)
    held_out = [
        Setting("half the rate", dict(rate=rate / 2)),
        Setting("1.4× the rate", dict(rate=rate * 1.4)),
        Setting("long prompts, short outputs", dict(prompt_tokens="uniform:500:900",
                                                    output_tokens="16")),
        Setting("short prompts, long outputs", dict(prompt_tokens="uniform:16:128",
                                                    output_tokens="uniform:64:96")),
        Setting("chunked prefill 128", dict(chunked_prefill=128)),
        Setting("chunked 64, 1.2× the rate", dict(chunked_prefill=64, rate=rate * 1.2)),
        Setting("4 slots", dict(max_running=4)),
    ]
    return calibration, held_out[:2] if quick else held_out


def measure(base: RunConfig, changes: dict):
    result = execute_generation(replace(base, **changes), force=True)
    if result.status != "completed":
        raise SystemExit(f"a run did not complete: {result.failure}")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="synthetic-lm, two held-out runs")
    ap.add_argument("--model", default=None, help="tiny-lm (default) or synthetic-lm")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--rate", type=float, default=None, help="the calibration run's rate")
    a = ap.parse_args(argv)
    model = a.model or ("synthetic-lm" if a.quick else "tiny-lm")
    requests = a.requests or (60 if a.quick else 240)
    rate = a.rate or (10.0 if model == "synthetic-lm" else 4.0)
    base = RunConfig(model=model, requests=requests, warmup=8, seed=1,
                     model_args=SYNTHETIC if model == "synthetic-lm" else {})
    calibration, held_out = settings(a.quick, rate)
    t0 = time.perf_counter()
    calib = measure(base, calibration)
    service = fitted_service(calib)
    print(f"calibration: {model}, {requests} requests, {calibration}")
    print(f"  fit: {service.describe()}")
    print(f"  {machine_line(calib.environment) or 'machine: not sampled'}\n")
    head = f"{'held-out setting':<30}" + "".join(
        f"{m.split('_')[0].upper() + ' ' + s:>20}" for m, s in METRICS)
    print(head + "\n" + f"{'':<30}" + "".join(f"{'run → sim (err)':>20}" for _ in METRICS))
    worst = 0.0
    machines: list[str] = []
    for s in held_out:
        run = measure(base, {**calibration, **s.changes})
        sims = [gen_replay(run, service=service, arrival="recorded", seed=seed).run()
                for seed in range(SEEDS)]
        cells = []
        for metric, stat in METRICS:
            measured = getattr(getattr(run.summary, metric), stat)
            predicted = statistics.median(getattr(getattr(sim.summary, metric), stat)
                                          for sim in sims)
            err = abs(predicted - measured) / measured
            worst = max(worst, err)
            cells.append(f"{measured:7.1f}→{predicted:6.1f} ({err:4.0%})")
        print(f"{s.name:<30}" + "".join(f"{c:>20}" for c in cells))
        for w in sims[0].warnings:
            print(f"{'':<30}warning: {w}")
        machines.append(f"  {s.name}: {machine_line(run.environment) or 'not sampled'}")
    print("\nthe machine while each held-out run measured:\n" + "\n".join(machines))
    print(f"\nworst error {worst:.1%} (aim: ≤ {AIM:.0%}); {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
