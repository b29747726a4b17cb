"""``python -m latency simulate``: the serving system without a model (discrete-event
simulation), parametric or resampled from a recorded run, with the closed form where one
exists. Every output is labelled SIMULATED. Its settings' flags are made from the fields of
``SimConfig``, ``ServiceModel`` and ``GenSimSettings`` (their metadata), as ``run``'s are
from RunConfig's.

``--from-run`` of a generation run simulates its server instead (iteration-level scheduling,
the step cost fitted from the run's own steps), with what the flags change, printed as a run
is; beside it the recorded run's own figures, every setting that differs named.
"""
from __future__ import annotations

import argparse
from typing import Any

from latency.cli import history as history_cli
from latency.cli.args import EXIT_OK, FORMATTER
from latency.cli.config_flags import SIMULATED, add_config_flags
from latency.core import fmt
from latency.core.errors import ConfigError
from latency.simulation.config import GEN_SETTINGS

#: one-shot simulation flags a generation simulation has no use for (flag, attribute)
ONE_SHOT_ONLY = (("--batch-size", "batch_size"), ("--max-batch-delay-ms", "max_batch_delay_ms"),
                 ("--preprocess-workers", "preprocess_workers"), ("--service-ms", "service_ms"),
                 ("--service-dist", "service_dist"), ("--service-cv", "service_cv"))
#: the figures set side by side with the recorded run's (the summary's attribute, its label)
SIDE_BY_SIDE = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E"))


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
    from latency.storage.run_files import is_generation_file

    if a.from_run and is_generation_file(a.from_run, a.db):
        return _cmd_simulate_generation(a)
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
        max_batch_delay_ms=a.max_batch_delay_ms, arrival=a.arrival,
        preprocess_workers=a.preprocess_workers, requests=a.requests, seed=a.seed,
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


def generation_flags_given(a: argparse.Namespace) -> list[str]:
    """The generation-only flags given on the command line (a one-shot simulation refuses
    them)."""
    return ["--" + name.replace("_", "-") for name in GEN_SETTINGS
            if getattr(a, name, None) is not None]


def _cmd_simulate_generation(a: argparse.Namespace) -> int:
    from latency.simulation.gen_replay import gen_replay
    from latency.storage.outputs import check_output, write_json_flag
    from latency.storage.run_files import load_generation
    from latency.storage.store import default_path

    wrong = [f for f, attr in ONE_SHOT_ONLY if getattr(a, attr, None) is not None]
    if wrong:
        raise ConfigError(f"{', '.join(wrong)} simulate a one-shot server; {a.from_run} is a "
                          "generation run (its scheduler's flags: --max-running, "
                          "--chunked-prefill, …)")
    if a.json:
        check_output(a.json, "--json", force=a.force, history=a.db or default_path(),
                     inputs=(a.from_run,))
    run = load_generation(a.from_run, a.db)
    setup = gen_replay(run, rate=a.rate, clients=a.clients, arrival=a.arrival,
                       replicas=a.replicas, requests=a.requests, seed=a.seed,
                       source=a.from_run, **{name: getattr(a, name) for name in GEN_SETTINGS})
    result = setup.run()
    print(f"SIMULATED (no model ran): {setup.describe()}")
    what = "the server's costs" if run.is_target else "step cost"
    print(f"{what} fitted from {a.from_run}: {setup.about['fit']}")
    if "slots" in setup.about:
        print(f"the server's slots: {setup.about['slots']}")
    print()
    print(repr(result))
    print()
    print(side_by_side(result, run))
    if a.json:
        write_json_flag(a.json, result.to_dict(requests=False))
    return EXIT_OK


def side_by_side(simulated: Any, recorded: Any) -> str:
    """The simulated p50 and p99 of TTFT, TPOT, ITL and E2E beside the recorded run's, with
    the settings that differ named (none: the simulator's error on its own calibration)."""
    from latency.analysis.compare import setup_differences

    differ = setup_differences(recorded.config, simulated.config, {}, {})
    head = ("simulated vs the recorded run"
            + (f" (settings that differ: {'; '.join(differ)})" if differ
               else " (the same settings: the difference is the simulator's error)"))
    lines = [head, f"{'ms':<6}{'sim p50':>10}{'run p50':>10}{'diff':>8}{'sim p99':>10}"
             f"{'run p99':>10}{'diff':>8}"]
    for attr, label in SIDE_BY_SIDE:
        s, r = getattr(simulated.summary, attr), getattr(recorded.summary, attr)
        cells = []
        for stat in ("p50", "p99"):
            sv, rv = getattr(s, stat), getattr(r, stat)
            diff = f"{(sv - rv) / rv:+.0%}" if sv is not None and rv else "–"
            cells.append(f"{_ms(sv):>10}{_ms(rv):>10}{diff:>8}")
        lines.append(f"{label:<6}" + "".join(cells))
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.2f}"
