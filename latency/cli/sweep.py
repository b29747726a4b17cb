"""``python -m latency sweep``: how much load a generation server takes while meeting its
objectives, measured — a floor (one client), a ceiling (every slot busy), points between;
each point a run saved in the history; the highest load meeting the objectives with its
neighbours; the simulator's prediction beside every point (``latency.execution.sweep``).

    python -m latency sweep --target http://127.0.0.1:8080/v1 --slo-ttft-ms 500 \\
        --slo-tpot-ms 50 --max-duration 300
    python -m latency sweep --model synthetic-lm --rates 5,10,20 --slo llama3.1-8b-interactive
"""
from __future__ import annotations

import argparse
import dataclasses
import threading
from typing import Any

from latency.cli import history as history_cli
from latency.cli.args import EXIT_FAILED, EXIT_OK, FORMATTER, NO_DEFAULT, stop_on_signals
from latency.cli.run import add_measuring_flags
from latency.core import fmt
from latency.core.errors import ConfigError


def add_parser(sub: Any) -> None:
    from latency.execution.sweep import MAX_POINTS, SweepPlan

    d = SweepPlan.__dataclass_fields__
    s = sub.add_parser("sweep", formatter_class=FORMATTER,
                       help="measure the highest load a generation server takes while meeting "
                            "its objectives (a floor, a ceiling, points between)")
    add_measuring_flags(s)
    g = s.add_argument_group("the sweep")
    g.add_argument("--rates", metavar="R,R,…", type=_floats,
                   help="the arrival rates between floor and ceiling, a second each "
                        "(automatic when not given: shares of what the ceiling served, up to "
                        "all of it)" + NO_DEFAULT)
    g.add_argument("--concurrencies", metavar="N,N,…", type=_ints,
                   help="closed-loop clients between floor and ceiling instead of rates"
                        + NO_DEFAULT)
    g.add_argument("--points", type=int, default=d["points"].default,
                   help=f"automatic points between floor and ceiling (1 to {MAX_POINTS})")
    g.add_argument("--point-duration", type=float, default=d["point_s"].default,
                   dest="point_s", metavar="S",
                   help="measured seconds a point (a light rate measures longer, to reach "
                        "40 requests)")
    g.add_argument("--ceiling-clients", type=int, default=None, metavar="N",
                   help="the ceiling's closed-loop clients (when not given: twice "
                        "--max-running, at least 8)" + NO_DEFAULT)
    g.add_argument("--max-duration", type=float, default=d["max_duration_s"].default,
                   dest="max_duration_s", metavar="S",
                   help="the whole sweep's bound, in seconds: a point that would not fit "
                        "what is left is not started")
    g.add_argument("--attainment", type=float, default=d["attainment"].default,
                   help="the share of requests that must meet the objectives at the highest "
                        "load")
    g.add_argument("--no-simulate", dest="simulate", action="store_false",
                   help="no simulator prediction beside the points" + NO_DEFAULT)
    g.add_argument("--json", metavar="PATH", help="write the sweep (its points, predictions "
                                                  "and answer) as JSON" + NO_DEFAULT)
    g.add_argument("--force", action="store_true",
                   help="overwrite an existing --json file" + NO_DEFAULT)
    g.add_argument("--quiet", action="store_true",
                   help="no line a point as they finish" + NO_DEFAULT)
    history_cli.add_db_flag(s)


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a comma-separated list of numbers (got {text!r})") from None


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma-separated list of whole numbers "
                                         f"(got {text!r})") from None


def plan_from_args(a: argparse.Namespace) -> Any:
    """The checked SweepPlan the flags describe (ConfigError: one line)."""
    from latency.cli.run import config_from_args
    from latency.execution.sweep import SweepPlan
    from latency.execution.validate import validated
    from latency.pipelines.gen_checks import generative_run

    given = [flag for flag, attr in (("--rate", "rate"), ("--concurrency", "concurrency"),
                                     ("--requests", "requests"), ("--duration", "duration_s"),
                                     ("--arrival", "arrival"))
             if getattr(a, attr, None) is not None]
    if given:
        raise ConfigError(f"{', '.join(given)}: a sweep sets each point's load and length "
                          "(--rates or --concurrencies, --points, --point-duration)")
    raw = dataclasses.replace(config_from_args(a), duration_s=a.point_s, requests=None)
    if not generative_run(raw):
        raise ConfigError("sweep measures streamed generation: a --target LLM server or a "
                          "generative pipeline (synthetic-lm, tiny-lm, yours)")
    base = validated(raw, generation=True, user_code=raw.pipeline is None)
    return SweepPlan(base, rates=a.rates or (), concurrencies=a.concurrencies or (),
                     points=a.points, point_s=a.point_s, ceiling_clients=a.ceiling_clients,
                     max_duration_s=a.max_duration_s, attainment=a.attainment,
                     simulate=a.simulate).checked()


def cmd_sweep(a: argparse.Namespace) -> int:
    from latency.execution.sweep import objectives_text, run_sweep, saved_runner
    from latency.simulation.sweep_prediction import predict_points
    from latency.storage.outputs import check_output, write_json_flag
    from latency.storage.store import RunStore

    plan = plan_from_args(a)
    store = RunStore(a.db)
    store.check_writable()
    if a.json:
        check_output(a.json, "--json", force=a.force, history=store.path)
    cancel = threading.Event()
    stopped_by = stop_on_signals(cancel)

    runner = saved_runner(store, cancel)

    def told(result: Any) -> None:
        if not a.quiet:
            p = result.points[-1]
            print(f"[{len(result.points)}] {p.label}: {point_line(p)} (run {p.run_id})",
                  flush=True)

    print(f"sweep of {plan.base.target or plan.base.model}: a floor (1 client), a ceiling "
          f"({plan.ceiling()} clients), then "
          + (f"rates {', '.join(f'{r:g}' for r in plan.rates)}/s" if plan.rates else
             f"{len(plan.concurrencies)} client counts" if plan.concurrencies else
             f"{plan.points} rates between")
          + f"; objectives {objectives_text(plan.base)}; at most {plan.max_duration_s:g} s",
          flush=True)
    result = run_sweep(plan, runner, predict=predict_points, cancel=cancel, on_point=told)
    print()
    print(sweep_table(result))
    print()
    for line in notes(result):
        print(line)
    print(f"answer: {result.answer.sentence(objectives_text(plan.base))}")
    if a.json:
        write_json_flag(a.json, result.to_dict(), indent=1)
    if "signal" in stopped_by:
        return 128 + stopped_by["signal"]
    return EXIT_OK if result.points else EXIT_FAILED


def point_line(p: Any) -> str:
    """'served 4.10/s, TTFT p99 120 ms, TPOT p99 21.3 ms, 96 % met'."""
    met = fmt.share(p.met_share)
    return (f"served {p.served_rps:.2f}/s, TTFT p99 {fmt.duration(p.ttft_p99_ms)}, "
            f"TPOT p99 {fmt.duration(p.tpot_p99_ms)}, {met} met"
            + ("" if p.valid else ", INVALID"))


def sweep_table(result: Any) -> str:
    """A row a point, in the order of their load: measured, and the simulator's prediction
    beside its p99s."""
    rows = sorted(zip(result.points, result.predicted), key=lambda pq: pq[0].rate)
    head = (f"{'point':<16}{'offered/s':>10}{'served/s':>10}{'TTFT p50':>10}{'TTFT p99':>10}"
            f"{'sim':>9}{'TPOT p50':>10}{'TPOT p99':>10}{'sim':>9}{'E2E p99':>10}"
            f"{'met':>6}{'goodput/s':>10}  run")
    lines = [head]
    for p, q in rows:
        lines.append(
            f"{p.label:<16}{_n(p.offered_rps):>10}{_n(p.served_rps):>10}"
            f"{fmt.ms(p.ttft_p50_ms):>10}{fmt.ms(p.ttft_p99_ms):>10}"
            f"{fmt.ms(q.ttft_p99_ms if q else None):>9}{fmt.ms(p.tpot_p50_ms):>10}"
            f"{fmt.ms(p.tpot_p99_ms):>10}{fmt.ms(q.tpot_p99_ms if q else None):>9}"
            f"{fmt.ms(p.e2e_p99_ms):>10}"
            f"{fmt.share(p.met_share):>6}"
            f"{_n(p.goodput_rps):>10}  {p.run_id or fmt.DASH}"
            + ("" if p.valid else " INVALID"))
    return "\n".join(lines)


def notes(result: Any) -> list[str]:
    out = ["times in ms; sim: the simulator's prediction at that load; met: the share of "
           "requests meeting the objectives; INVALID points (too few requests, overload) are "
           "not taken as the capacity",
           f"sweep {result.sweep_id}: {len(result.points)} point(s) in "
           f"{result.elapsed_s:.0f} s; each a run in the history: python -m latency history "
           f"--search sweep-{result.sweep_id}"]
    if result.fit:
        out.append(f"simulated beside (sim): {result.fit}")
    if result.stopped:
        out.append(f"stopped: {result.stopped}")
    for s in result.skipped:
        out.append(f"not run: {s}")
    return out


def _n(value: float | None) -> str:
    return fmt.DASH if value is None else f"{value:.2f}"




__all__ = ["add_parser", "cmd_sweep", "plan_from_args", "sweep_table"]
