"""``python -m latency simulate --from-run RUN`` of a generation run: its server simulated
(iteration-level scheduling, the step cost fitted from the run's own steps), with what the
flags change, printed as a run is and labelled SIMULATED; beside it the recorded run's own
figures, every setting that differs named.
"""
from __future__ import annotations

import argparse
from typing import Any

from latency.cli.args import EXIT_OK
from latency.core.errors import ConfigError
from latency.simulation.gen_config import GEN_SETTINGS

#: one-shot simulation flags a generation simulation has no use for (flag, attribute)
ONE_SHOT_ONLY = (("--batch-size", "batch_size"), ("--max-batch-delay-ms", "max_batch_delay_ms"),
                 ("--preprocess-workers", "preprocess_workers"), ("--service-ms", "service_ms"),
                 ("--service-dist", "service_dist"), ("--service-cv", "service_cv"))
#: the figures set side by side with the recorded run's (the summary's attribute, its label)
SIDE_BY_SIDE = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E"))


def generation_flags_given(a: argparse.Namespace) -> list[str]:
    """The generation-only flags given on the command line (a one-shot simulation refuses
    them)."""
    return ["--" + name.replace("_", "-") for name in GEN_SETTINGS
            if getattr(a, name, None) is not None]


def cmd_simulate_generation(a: argparse.Namespace) -> int:
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
    settings = {name: getattr(a, name) for name in GEN_SETTINGS}
    setup = gen_replay(run, rate=a.rate, clients=a.clients, arrival=a.arrival,
                       replicas=a.replicas, requests=a.requests, seed=a.seed,
                       prompt_tokens=settings.pop("prompt_tokens"),
                       output_tokens=settings.pop("output_tokens"),
                       decode_scale=_one_unless(settings.pop("decode_scale")),
                       prefill_scale=_one_unless(settings.pop("prefill_scale")),
                       source=a.from_run, **settings)
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


def _one_unless(value: float | None) -> float:
    """A what-if scale: 1 (as fitted) unless given."""
    return 1.0 if value is None else value


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.2f}"
