"""``python -m latency simulate``: the serving system without a model (discrete-event
simulation), parametric or resampled from a recorded run, with the closed form where one
exists. Every output is labelled SIMULATED.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from latency.cli import history as history_cli
from latency.cli.args import EXIT_OK, FORMATTER, NO_DEFAULT, UsageError, number
from latency.core import fmt
from latency.core.errors import ConfigError


def add_parser(sub: Any) -> None:
    sm = sub.add_parser("simulate", help="simulate the serving system (no model runs)",
                        formatter_class=FORMATTER)
    sm.add_argument("--rate", type=number,
                    help="arrivals per second (required, except with --from-run: the run's)")
    sm.add_argument("--replicas", type=int,
                    help="model workers (default: the --from-run run's, else 1)" + NO_DEFAULT)
    sm.add_argument("--batch-size", type=int,
                    help="largest batch (default: the --from-run run's, else 1)" + NO_DEFAULT)
    sm.add_argument("--max-batch-delay-ms", type=number,
                    help="longest wait for a batch to fill (default: the --from-run run's, "
                         "else 0)" + NO_DEFAULT)
    sm.add_argument("--clients", type=int,
                    help="a closed loop of this many clients, each asking again when answered "
                         "(the rate is then an outcome); default: a closed-loop --from-run "
                         "run's own clients, unless --rate is given" + NO_DEFAULT)
    sm.add_argument("--arrival", default="poisson",
                    help="poisson, constant, bursty (on/off at twice the rate) or recorded "
                         "(the --from-run run's own arrival times)")
    sm.add_argument("--service-ms", type=number, default=5.0,
                    help="mean forward time per batch (ms)")
    sm.add_argument("--service-dist", default="exponential",
                    help="constant, exponential or lognormal")
    sm.add_argument("--service-cv", type=number, default=1.0,
                    help="lognormal spread (coefficient of variation)")
    sm.add_argument("--from-run", metavar="RUN",
                    help="resample service times (every component; forward per batch size) "
                         "from a recorded run: the JSON or CSV `run --json/--csv` wrote, or a "
                         "history run id")
    sm.add_argument("--preprocess-workers", type=int,
                    help="preprocess worker pool (requests wait for a free worker); default: "
                         "the --from-run run's, else unlimited")
    history_cli.add_db_flag(sm)
    sm.add_argument("--requests", type=int, default=100_000, help="simulated requests")
    sm.add_argument("--seed", type=int, default=0, help="seed of arrivals and service draws")
    sm.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    sm.add_argument("--force", action="store_true", help="overwrite an existing --json file")


def cmd_simulate(a: argparse.Namespace) -> int:
    from latency.analysis.summary_text import format_table
    from latency.core.config import MAX_BATCH, MAX_REQUESTS, positive_int
    from latency.simulation import queueing
    from latency.simulation.simulator import (
        ARRIVALS,
        DISTS,
        ServiceModel,
        SimConfig,
        summarize_simulation,
    )
    from latency.storage.outputs import check_output, write_atomic
    from latency.storage.store import default_path

    if a.json:  # checked before simulating; creates nothing
        check_output(a.json, "--json", force=a.force, history=a.db or default_path(),
                     inputs=(a.from_run,))
    for flag, value, top in (("replicas", a.replicas, 1024),
                             ("batch-size", a.batch_size, MAX_BATCH)):
        if value is not None:
            positive_int(flag, value, top)
    positive_int("requests", a.requests, MAX_REQUESTS)
    if a.preprocess_workers is not None:
        positive_int("preprocess-workers", a.preprocess_workers, 1024)
    if a.clients is not None:
        positive_int("clients", a.clients, 100_000)
        if a.rate is not None:
            raise UsageError("--clients (a closed loop) and --rate (arrivals) exclude each "
                             "other: choose one")
    if a.arrival not in ARRIVALS:
        raise ConfigError(f"--arrival must be one of: {', '.join(ARRIVALS)}")
    if a.service_dist not in DISTS:
        raise ConfigError(f"--service-dist must be one of: {', '.join(DISTS)}")
    if a.rate is not None and not 0 < a.rate <= 1e6:
        raise ConfigError(f"--rate must be > 0 and <= 1000000 requests/s (got {a.rate:g})")
    for flag, value in (("service-ms", a.service_ms), ("service-cv", a.service_cv)):
        if not 0 < value < 1e7:
            raise ConfigError(f"--{flag} must be > 0 (got {value:g})")
    if a.max_batch_delay_ms is not None and not 0 <= a.max_batch_delay_ms <= 1e5:
        raise ConfigError("--max-batch-delay-ms must be between 0 and 100000")
    if a.from_run is None and a.clients is None and (a.rate is None or a.arrival == "recorded"):
        raise UsageError("--rate is required (or --from-run RUN to take a recorded run's)"
                         if a.rate is None else "--arrival recorded needs --from-run RUN")
    times = None
    if a.from_run is not None:
        from latency.simulation.calibration import recorded_arrivals
        from latency.storage.run_files import load_run

        try:
            rows, recorded_config = load_run(a.from_run, a.db)
            svc = ServiceModel.from_rows(rows)
            times, recorded_rate = recorded_arrivals(rows)
        except ValueError as exc:
            raise ConfigError(f"--from-run: {exc}") from None
        # a closed-loop run replays as a closed loop of its clients: open-loop arrivals at a
        # saturated closed loop's throughput would run its server at ρ ≈ 1 and call it unstable
        if (a.clients is None and a.rate is None and a.arrival != "recorded"
                and recorded_config is not None and recorded_config.concurrency
                and recorded_config.rate is None):
            a.clients = int(recorded_config.concurrency)
        if a.rate is None or a.arrival == "recorded":
            a.rate = recorded_rate
        # the recorded server, unless a flag says otherwise: its worker pool, batching and
        # replicas (a batch-8 run must not replay as batch 1 and call itself unstable)
        if recorded_config is not None:  # (a CSV has none)
            rc = recorded_config
            for flag, value in (("preprocess_workers", rc.preprocess_workers),
                                ("batch_size", rc.batch_size),
                                ("max_batch_delay_ms", rc.max_batch_delay_ms),
                                ("replicas", rc.replicas)):
                if getattr(a, flag) is None and value is not None:
                    setattr(a, flag, value)
        source = (f"service resampled from {a.from_run} "
                  f"({len(rows)} recorded requests, batch sizes "
                  f"{', '.join(str(b) for b in sorted(svc.forward_by_batch))})")
    else:
        svc = ServiceModel(forward_ms=a.service_ms, dist=a.service_dist, cv=a.service_cv)
        source = f"service {a.service_ms:g} ms {a.service_dist}"
    a.replicas = a.replicas or 1
    a.batch_size = a.batch_size or 1
    a.max_batch_delay_ms = a.max_batch_delay_ms or 0.0
    cfg = SimConfig(rate=a.rate, replicas=a.replicas, batch_size=a.batch_size,
                    max_batch_delay_ms=a.max_batch_delay_ms, arrival=a.arrival,
                    requests=a.requests, seed=a.seed, arrival_times_ms=times,
                    preprocess_workers=a.preprocess_workers, clients=a.clients)
    sim = summarize_simulation(cfg, svc)
    s = sim.summary
    cv = {"constant": 0.0, "exponential": 1.0}.get(a.service_dist, a.service_cv)
    theory = None
    if (a.from_run is None and a.clients is None and a.batch_size == 1
            and a.arrival == "poisson" and not sim.unstable):
        rate_per_ms, tau = a.rate / 1000, a.service_ms
        theory = (queueing.mmc(rate_per_ms, tau, a.replicas) if cv == 1.0 else
                  queueing.mg1(rate_per_ms, tau, cv) if a.replicas == 1 else
                  queueing.allen_cunneen(rate_per_ms, tau, a.replicas, 1.0, cv))
    sim.closed_form = None if theory is None else {
        "model": theory.model, "wait_mean_ms": theory.wait_mean,
        "response_mean_ms": theory.response_mean}
    load = (f"closed loop, {a.clients} client(s)" if a.clients else
            f"{a.rate:g} req/s {a.arrival}")
    print(f"SIMULATED (no model ran): {load}, {a.replicas} replica(s), "
          f"batch ≤ {a.batch_size} / {a.max_batch_delay_ms:g} ms, "
          f"{a.preprocess_workers or 'unlimited'} preprocess worker(s), {source}; "
          f"utilisation {sim.utilisation:.2f}")
    print(f"requests {s.requests} (after a {s.warmup_requests}-request transient), "
          f"throughput {fmt.rate(s.throughput_rps)} req/s\n")
    print(format_table(s))
    if theory is not None:
        print(f"\nclosed form {theory.model}: mean wait {fmt.ms(theory.wait_mean)} ms, mean "
              f"response {fmt.ms(theory.response_mean)} ms (simulated: "
              f"{fmt.ms(s.components_ms['queue'].mean)} / {fmt.ms(s.latency_ms.mean)})")
    growth = sim.queue_growth
    if growth:
        print("\nqueue length over the simulated horizon (unstable: it only grows):")
        print("  " + "  ".join(f"{t:.1f}s:{q}" for t, q in growth))
    for w in s.warnings:
        print(f"warning: {w}")
    if a.json:
        try:
            write_atomic(a.json, json.dumps({"simulated": True, "config": vars(a),
                                             "summary": sim.to_dict()}, indent=2) + "\n")
        except OSError as exc:
            raise ConfigError(f"cannot write --json {a.json}: {exc.strerror or exc}") from None
    return EXIT_OK
