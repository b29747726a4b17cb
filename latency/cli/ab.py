"""``python -m latency ab``: an interleaved A/B of a baseline against levers, in this process.

    python -m latency ab --model image-cnn --pre naive --batch-size 8 --max-batch-delay-ms 10 \\
        --concurrency 8 --duration 3 --b-optimize int8

The run settings are the baseline (A); ``--b-*`` flags say what the B arm changes. Blocks run
A B B A … (see ``latency.analysis.ab``); the output is the headline, the Amdahl explanation, both
arms'
component tables and each arm's effect on the answers.
"""
from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from latency.cli.args import stop_on_signals
from latency.cli.config_flags import add_config_flags, config_values
from latency.cli.run_flags import pipeline_kwargs
from latency.core import fmt
from latency.core.config import AB, RunConfig
from latency.core.records import COMPONENTS


def add_parser(sub: Any, formatter: Any) -> None:
    ab = sub.add_parser("ab", help="interleaved A/B: baseline vs baseline + levers",
                        formatter_class=formatter,
                        description="The run flags are the baseline (A), levers given to "
                                    "--optimize are in both arms; the --b-* flags say what "
                                    "the B arm changes. Each block is a short ordinary run: "
                                    "--duration and --warmup are per block.")
    add_config_flags(ab, AB)
    ab.add_argument("--pairs", type=int, default=2, help="A/B block pairs (A B, B A, ...)")
    ab.add_argument("--b-optimize", default=None, metavar="LEVERS",
                    help="levers of the B arm (comma-separated)")
    ab.add_argument("--b-pre", default=None, help="B arm preprocessing: fast or naive")
    ab.add_argument("--b-post", default=None, help="B arm postprocessing: fast or naive")
    ab.add_argument("--b-replicas", type=int, default=None)
    ab.add_argument("--b-threads", type=int, default=None)
    ab.add_argument("--b-batch-size", type=int, default=None)
    ab.add_argument("--b-preprocess-workers", type=int, default=None)
    ab.add_argument("--json", metavar="PATH", help="write the merged A/B result as JSON")
    ab.add_argument("--force", action="store_true", help="overwrite an existing --json file")


def baseline_from_args(a: argparse.Namespace) -> RunConfig:
    """The A arm: the RunConfig the run flags describe (not yet validated)."""
    return RunConfig(**{**config_values(a, AB), **pipeline_kwargs(a)})


def plan_from_args(a: argparse.Namespace) -> Any:
    from latency.execution.ab import ABPlan, variant_config

    base = baseline_from_args(a)
    variant = variant_config(base, optimize=a.b_optimize, pre=a.b_pre, post=a.b_post,
                             replicas=a.b_replicas, threads=a.b_threads,
                             batch_size=a.b_batch_size,
                             preprocess_workers=a.b_preprocess_workers)
    return ABPlan(base, variant, a.pairs).validated()


def format_ab(result: Any) -> str:
    """The merged A/B as text: headline, explanation, components side by side, accuracy."""
    from latency.analysis.summary_text import optimization_lines

    a, b, h = result.a, result.b, result.headline
    lines = [f"A = {a.label} · B = {b.label} · blocks {' '.join(result.order)}",
             f"A: {a.requests} requests, {fmt.rate(a.throughput_rps)} req/s · "
             f"B: {b.requests} requests, {fmt.rate(b.throughput_rps)} req/s"]
    machine = arms_machine_line(a, b)
    if machine:
        lines.append(machine)
    if result.machine_warning:
        lines.append(f"warning: {result.machine_warning}")
    lines += ["", f"{'mean ms':<12}{'A':>10}{'B':>10}{'change':>9}"]
    for name, sa, sb in ([("total", a.latency_ms, b.latency_ms)]
                         + [(c, a.components_ms[c], b.components_ms[c]) for c in COMPONENTS]):
        ch = (sb.mean - sa.mean) / sa.mean if sa.mean else 0.0
        lines.append(f"{name:<12}{fmt.ms(sa.mean):>10}{fmt.ms(sb.mean):>10}"
                     f"{fmt.change(ch):>9}")
    for q in ("p50", "p99"):
        lines.append(f"{'total ' + q:<12}{fmt.ms(a.latency_ms.get(q)):>10}"
                     f"{fmt.ms(b.latency_ms.get(q)):>10}")
    lines += ["", f"headline: {h.text}", f"why: {h.explanation}"]
    for arm in (a, b):
        rep = optimization_lines({"optimization": arm.optimization})
        if rep:
            lines.append(f"\narm {arm.arm} ({arm.label}):")
            lines += [f"  {r}" for r in rep]
    for w in b.warnings:
        lines.append(f"warning (B): {w}")
    for w in a.warnings:
        lines.append(f"warning (A): {w}")
    return "\n".join(lines)


def arms_machine_line(a: Any, b: Any) -> str | None:
    """'machine: A other processes 0.02 of 2 cores, 0 of 2 blocks DISTURBED · B 0.90, 2 of 2
    blocks DISTURBED'; None when neither arm has samples of the machine."""
    parts = []
    for arm in (a, b):
        m = arm.machine
        if not m:
            continue
        other = m.get("other_cores_mean")
        parts.append(f"{arm.arm} other processes "
                     + (f"{other:.2f}" if other is not None else "?")
                     + (f" of {m['cores']} cores" if m.get("cores") else " cores")
                     + f", {m['disturbed_runs']} of {m['runs']} blocks DISTURBED")
    return "machine: " + " · ".join(parts) if parts else None


def cmd_ab(a: argparse.Namespace) -> int:
    from latency.execution.ab import NothingToCompare, run_ab
    from latency.execution.process import RunHandle, RunOptions, run_watched
    from latency.storage.outputs import check_output, write_json_flag
    from latency.storage.store import default_path

    plan = plan_from_args(a)  # ConfigError → one line, exit 2
    if a.json:  # checked before the blocks run; creates nothing
        check_output(a.json, "--json", force=a.force, history=default_path(),
                     inputs=(a.inputs,))

    def progress(i: int, n: int, arm: str, r: Any) -> None:
        s = r.summary
        print(f"[block {i + 1}/{n}] arm {arm}: {r.status}, {s.requests} requests, "
              f"p50 {fmt.ms(s.latency_ms.p50)} ms", file=sys.stderr)

    cancel = threading.Event()
    got = stop_on_signals(cancel, "the block in flight finish")  # keeps the finished blocks

    def isolated(config: Any, cancel: threading.Event) -> Any:  # a crash takes one block
        return run_watched(RunHandle(config, options=RunOptions(who="CLI A/B",
                                                                user_code_here=False)),
                           cancel=cancel)

    try:
        result = run_ab(plan, execute=isolated, on_block=progress, cancel=cancel)
    except NothingToCompare as exc:  # one line, and the blocks that did run
        ran = ", ".join(f"{arm} {r.status}" for arm, r in exc.blocks) or "none"
        stop = (f"stopped after {len(exc.blocks)} of {len(plan.blocks())} blocks; "
                if "signal" in got else "")
        print(f"latency: error: {stop}{exc} (blocks: {ran}); --json not written",
              file=sys.stderr)
        return 128 + got["signal"] if "signal" in got else 1
    print(format_ab(result))
    if a.json:
        write_json_flag(a.json, result.to_dict(), indent=2)
    if "signal" in got:
        print(f"stopped after {len(result.order)} of {len(plan.blocks())} blocks: the "
              "comparison above pools only those", file=sys.stderr)
        return 128 + got["signal"]
    return 0
