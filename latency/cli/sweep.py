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
from collections.abc import Callable
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
    g.add_argument("--html", metavar="PATH",
                   help="write a report you can send: one self-contained HTML file (the "
                        "curves with the simulator beside them, the table, the answer, the "
                        "settings; opens offline)" + NO_DEFAULT)
    g.add_argument("--force", action="store_true",
                   help="overwrite an existing --json or --html file" + NO_DEFAULT)
    g.add_argument("--quiet", action="store_true",
                   help="no line a point as they finish" + NO_DEFAULT)
    history_cli.add_db_flag(s)


def _numbers(kind: Callable[[str], Any], what: str) -> Callable[[str], tuple[Any, ...]]:
    """An argparse type: a comma-separated list of ``kind`` (``what`` names them)."""
    def parse(text: str) -> tuple[Any, ...]:
        try:
            return tuple(kind(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"a comma-separated list of {what} "
                                             f"(got {text!r})") from None
    return parse


_floats, _ints = _numbers(float, "numbers"), _numbers(int, "whole numbers")


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
    from latency.storage.outputs import check_output, write_flag, write_json_flag
    from latency.storage.store import RunStore

    plan = plan_from_args(a)
    store = RunStore(a.db)
    store.check_writable()
    for flag, path in (("--json", a.json), ("--html", a.html)):
        if path:
            check_output(path, flag, force=a.force, history=store.path)
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
    print(repr(result))
    if a.json:
        write_json_flag(a.json, result.to_dict(), indent=1)
    if a.html:
        from latency.figures.report import report_html, sweep_report

        write_flag(a.html, report_html(sweep_report(result)), "--html")
    if "signal" in stopped_by:
        return 128 + stopped_by["signal"]
    return EXIT_OK if result.points else EXIT_FAILED


def point_line(p: Any) -> str:
    """'served 4.10/s, TTFT p99 120 ms, TPOT p99 21.3 ms, 96 % met'."""
    met = fmt.share(p.met_share)
    return (f"served {p.served_rps:.2f}/s, TTFT p99 {fmt.duration(p.ttft_p99_ms)}, "
            f"TPOT p99 {fmt.duration(p.tpot_p99_ms)}, {met} met"
            + ("" if p.valid else ", INVALID"))
