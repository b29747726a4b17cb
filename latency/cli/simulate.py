"""``python -m latency simulate``: the serving system without a model (discrete-event
simulation), parametric or resampled from a recorded run, with the closed form where one
exists. Every output is labelled SIMULATED. Its settings' flags are made from the fields of
``SimConfig`` and ``ServiceModel`` (their metadata), as ``run``'s are from RunConfig's.
"""
from __future__ import annotations

import argparse
from typing import Any

from latency.cli import history as history_cli
from latency.cli.args import EXIT_OK, FORMATTER
from latency.cli.config_flags import SIMULATED, add_config_flags
from latency.core import fmt
from latency.core.errors import ConfigError

#: a one-shot simulation's requests when none are given
DEFAULT_REQUESTS = 100_000


def add_parser(sub: Any) -> None:
    sm = sub.add_parser("simulate", help="simulate the serving system (no model runs)",
                        formatter_class=FORMATTER)
    add_config_flags(sm, "simulate", SIMULATED)
    sm.add_argument("--from-run", metavar="RUN",
                    help="resample service times (every component; forward per batch size) "
                         "from a recorded run: the JSON or CSV `run --json/--csv` wrote, or a "
                         "history run id; its rate (or clients), replicas, batching and "
                         "preprocess workers are the defaults. A generation run (a history id "
                         "or its JSON): its server is simulated step by step, the step "
                         "cost fitted from its own steps, its load, scheduler and lengths the "
                         "defaults")
    history_cli.add_db_flag(sm)
    sm.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    sm.add_argument("--force", action="store_true", help="overwrite an existing --json file")


def cmd_simulate(a: argparse.Namespace) -> int:
    from latency.cli.simulate_generation import cmd_simulate_generation, generation_flags_given
    from latency.storage.run_files import is_generation_file

    if a.from_run and is_generation_file(a.from_run, a.db):
        return cmd_simulate_generation(a)
    given = generation_flags_given(a)
    if given:
        raise ConfigError(f"{', '.join(given)} simulate a generation server: give --from-run "
                          "a generation run (a run of a generative pipeline)")
    return _cmd_simulate_one_shot(a)


def _cmd_simulate_one_shot(a: argparse.Namespace) -> int:
    from latency.analysis.summary import format_table
    from latency.simulation.setup import simulation_setup
    from latency.simulation.simulator import summarize_simulation
    from latency.simulation.utilisation import utilisation_text
    from latency.storage.outputs import check_output, write_json_flag
    from latency.storage.run_files import load_run
    from latency.storage.store import default_path

    if a.json:  # checked before simulating; creates nothing
        check_output(a.json, "--json", force=a.force, history=a.db or default_path(),
                     inputs=(a.from_run,))
    setup = simulation_setup(
        rate=a.rate, clients=a.clients, replicas=a.replicas, batch_size=a.batch_size,
        max_batch_delay_ms=a.max_batch_delay_ms, arrival=a.arrival or "poisson",
        preprocess_workers=a.preprocess_workers,
        requests=a.requests if a.requests is not None else DEFAULT_REQUESTS, seed=a.seed,
        service_ms=a.service_ms, service_dist=a.service_dist, service_cv=a.service_cv,
        from_run=a.from_run, load=lambda source: load_run(source, a.db))
    cfg, svc, source = setup.config, setup.service, setup.source
    sim = summarize_simulation(cfg, svc)
    s = sim.summary
    print(f"SIMULATED (no model ran): {cfg.describe()}, {source}; "
          f"utilisation {utilisation_text(sim.utilisation)}")
    print(f"requests {s.requests} (after a {s.warmup_requests}-request transient), "
          f"throughput {fmt.rate(s.throughput_rps)} req/s\n")
    print(format_table(s))
    theory = sim.closed_form
    if theory is not None:
        print(f"\n{theory.sentence()}"
              + (f" (simulated: mean wait {fmt.duration(s.components_ms['queue'].mean)}, "
                 f"mean response {fmt.duration(s.latency_ms.mean)})" if theory.applies else ""))
    growth = sim.queue_growth
    if growth:
        print("\nqueue length over the simulated horizon (unstable: it only grows):")
        print("  " + "  ".join(f"{t:.1f}s:{q}" for t, q in growth))
    for w in s.warnings:
        print(f"warning: {w}")
    if a.json:
        write_json_flag(a.json, {"simulated": True, "config": {**vars(a), **cfg.to_dict()},
                                 "summary": sim.to_dict()}, indent=2)
    return EXIT_OK
