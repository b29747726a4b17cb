"""``python -m latency history …`` and ``python -m latency compare …``: the run history from
the command line, and the p99 regression gate for CI.

    python -m latency history [--limit N] [--model M] [--status S] [--search TEXT] [--json]
    python -m latency history show ID
    python -m latency history rename ID NAME
    python -m latency history delete ID
    python -m latency history export ID --format csv|parquet|json|trace|html --out FILE
    python -m latency compare A B [C …] [--fail-if-p99-worse PCT] [--json]   # ids or run.json files

An ID is a run's short id, any unique prefix of it, ``latest`` or ``latest~N`` (N runs before
the latest). Every command takes ``--db PATH`` (default ``$LATENCY_LAB_DB`` or
``~/.latency_lab/runs.sqlite``). Exit codes: 0 fine, 1 the gate found a regression, 2 bad input
(unknown id, bad flag) with one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from latency.analysis.machine import DISTURBED, MACHINE_WORDS
from latency.cli.args import NO_DEFAULT
from latency.cli.compare_text import setup_and_machine_lines
from latency.core import fmt
from latency.core.errors import ConfigError

EXIT_OK, EXIT_REGRESSION = 0, 1
MAX_LIMIT = 1_000_000
DEFAULT_LIMIT = 20


def add_db_flag(parser: argparse.ArgumentParser, inherited: bool = False) -> None:
    parser.add_argument("--db", metavar="PATH",
                        default=argparse.SUPPRESS if inherited else None,
                        help="run history database (default: $LATENCY_LAB_DB or "
                             "~/.latency_lab/runs.sqlite)"
                             # a SUPPRESS default has no %(default) to format (argparse
                             # drops it): there the help must not name one
                             + ("" if inherited else NO_DEFAULT))


def add_parsers(sub: Any, fmt: Any) -> None:
    """The ``history`` and ``compare`` sub-commands."""
    h = sub.add_parser("history", help="list, show, rename, delete and export saved runs",
                       formatter_class=fmt,
                       description="Every run is saved (unless --no-save). Without an action: "
                                   "list runs, newest first. IDs may be a unique prefix, "
                                   "'latest' or 'latest~N'.")
    h.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="runs to list (0: all)")
    h.add_argument("--model", help="only runs of this pipeline" + NO_DEFAULT)
    h.add_argument("--status", choices=("completed", "stopped", "failed"),
                   help="only runs that ended so" + NO_DEFAULT)
    h.add_argument("--search", metavar="TEXT",
                   help="text in the id, name, model, load or setup" + NO_DEFAULT)
    h.add_argument("--json", action="store_true", help="print the list as JSON")
    add_db_flag(h)
    acts = h.add_subparsers(dest="action", required=False, parser_class=type(h))
    show = acts.add_parser("show", help="print a saved run's summary", formatter_class=fmt)
    show.add_argument("id")
    show.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                      help="print the result as JSON")
    ren = acts.add_parser("rename", help="name a saved run", formatter_class=fmt)
    ren.add_argument("id")
    ren.add_argument("name")
    rm = acts.add_parser("delete", help="delete a saved run", formatter_class=fmt)
    rm.add_argument("id")
    ex = acts.add_parser("export", help="write a saved run to a file", formatter_class=fmt)
    ex.add_argument("id")
    ex.add_argument("--format", required=True,
                    choices=("csv", "parquet", "json", "trace", "html"),
                    help="csv/parquet: one row per request; json: the result; trace: Chrome "
                         "trace-event JSON for ui.perfetto.dev, one span per component; "
                         "html: a self-contained report (its charts, text and settings)"
                         + NO_DEFAULT)
    ex.add_argument("--out", required=True, metavar="FILE", help="file to write" + NO_DEFAULT)
    ex.add_argument("--force", action="store_true", help="overwrite an existing file (never the "
                    "run history)")
    ex.add_argument("--max-requests", type=int,
                    help="trace: keep only the first N requests" + NO_DEFAULT)
    for action in (show, ren, rm, ex):
        add_db_flag(action, inherited=True)

    c = sub.add_parser("compare", help="diff saved runs component by component; CI gate",
                       formatter_class=fmt,
                       description="Mean/p50/p99 of the total and each component of every run, "
                                   "and each run's difference from the first (A).")
    c.add_argument("ids", nargs="+", metavar="ID", help="two or more runs — history ids, or run "
                                                        "JSON files (`run --json`); the first "
                                                        "is the baseline")
    c.add_argument("--fail-if-p99-worse", type=float, metavar="PCT",
                   help="exit 1 when a later run's p99 is more than PCT %% above A's"
                        + NO_DEFAULT)
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")
    add_db_flag(c)


def _store(a: argparse.Namespace) -> Any:
    from latency.storage.store import RunStore

    return RunStore(getattr(a, "db", None))


def cmd_history(a: argparse.Namespace) -> int:
    from latency.storage.export import export_bytes, run_json_text
    from latency.storage.outputs import check_output, write_atomic

    store = _store(a)
    if a.action == "rename":
        info = store.rename(a.id, a.name)
        print(f"renamed {info.id} to {info.name!r}")
        return EXIT_OK
    if a.action == "delete":
        info = store.delete(a.id)
        print(f"deleted {info.id} ({info.kind}, {info.label}, {info.when})")
        return EXIT_OK
    if a.action == "show":
        run = store.load(a.id)
        if getattr(a, "json", False):
            # the result without its request records (a terminal's worth); `history export
            # --format json` writes them too
            print(run_json_text(run, requests=False), end="")
        else:
            i = run.info
            print(f"{'generation' if i.kind == 'generation' else 'run'} {i.id}"
                  + (f" “{i.name}”" if i.name else "") + f", saved {i.when} from the "
                  f"{i.source}" + (f" · {DISTURBED}" if i.disturbed else ""))
            print(repr(run.result))
        return EXIT_OK
    if a.action == "export":
        if a.max_requests is not None and a.max_requests < 1:
            raise ConfigError("--max-requests must be >= 1")
        check_output(a.out, "--out", force=a.force, history=store.path)
        run = store.load(a.id)
        if a.format == "html":
            from latency.figures.report import stored_report_html

            data = stored_report_html(run)
        else:
            data = export_bytes(run, a.format, a.max_requests)
        try:
            write_atomic(a.out, data)
        except OSError as exc:
            raise ConfigError(f"cannot write {a.out}: {exc.strerror or exc}") from None
        print(f"wrote {a.out} ({export_what(run, a.format)}, {len(data):,} bytes) from "
              f"{run.info.kind} run {run.info.id}")
        return EXIT_OK
    if not 0 <= a.limit <= MAX_LIMIT:
        raise ConfigError(f"--limit must be from 0 (all) to {MAX_LIMIT:,}")
    runs = store.list(limit=a.limit or None, model=a.model, status=a.status, text=a.search)
    if a.json:
        print(json.dumps([r.to_dict() for r in runs], indent=2))
        return EXIT_OK
    if not runs:
        print(f"no saved runs{' matching' if a.model or a.status or a.search else ''} in "
              f"{store.path}")
        return EXIT_OK
    print(format_history(runs))
    total = store.count()
    if a.limit and total > len(runs) and not (a.model or a.status or a.search):
        print(f"({total - len(runs)} older; --limit 0 lists all)")
    return EXIT_OK


def export_what(run: Any, file_format: str) -> str:
    """What an export holds, in a few words."""
    if file_format in ("csv", "parquet"):
        return ("a row a token" if run.info.kind == "generation" and file_format == "parquet"
                else "a row a request")
    return file_format


def format_history(runs: list[Any]) -> str:
    """The listing of both kinds of run, one line each: p50/p99 are a one-shot run's
    end-to-end latency and a generation's TTFT (the rate is its requests or its tokens a
    second); the ``machine`` column says DISTURBED when the machine was busy while it
    measured, quiet when not, nothing for a run without samples of it."""
    cols = [("id", 8, "<"), ("kind", 10, "<"), ("name", 22, "<"), ("when", 19, "<"),
            ("model", 16, "<"), ("load", 22, "<"), ("status", 9, "<"), ("validity", 8, "<"),
            ("machine", 9, "<"), ("n", 7, ">"), ("p50 ms", 8, ">"), ("p99 ms", 8, ">"),
            ("rate", 12, ">"), ("setup", 0, "<")]
    lines = ["  ".join(f"{name:{al}{w}}" for name, w, al in cols)]
    for r in runs:
        name = r.name or ""
        if len(name) > 22:
            name = name[:21] + "…"
        per_s = r.tokens_per_s if r.kind == "generation" else r.throughput_rps
        rate = fmt.DASH if per_s is None else (
            f"{per_s:,.0f} tok/s" if r.kind == "generation" else f"{per_s:.1f} req/s")
        vals = [r.id, r.kind, name, r.when, r.model[:16], r.load[:22], r.status,
                {True: "VALID", False: "INVALID", None: "—"}[r.valid],
                MACHINE_WORDS[r.disturbed], f"{r.n:,}", fmt.ms(r.p50_ms), fmt.ms(r.p99_ms),
                rate, r.setup]
        lines.append("  ".join(f"{v:{al}{w}}" for v, (_, w, al) in zip(vals, cols)))
    if any(r.kind == "generation" for r in runs):
        lines.append("(p50/p99: a one-shot run's end-to-end latency, a generation's time to "
                     "first token; `history show ID` prints either)")
    if any(r.disturbed for r in runs):
        lines.append(f"({DISTURBED}: the machine was busy while the run measured — other "
                     "processes, CPU steal, throttling or memory pressure; its times are "
                     "inflated. `history show ID` says by how much)")
    return "\n".join(line.rstrip() for line in lines)


def _load_for_compare(store: Any, ref: str) -> Any:
    """A history id (or prefix, latest~N), or a run JSON file (a committed baseline), of
    either kind; a generation with its logs (its server split is derived from them)."""
    if ref.lower().endswith(".json") and Path(ref).is_file():
        from latency.storage.run_files import stored_run_from_json

        try:
            return stored_run_from_json(ref)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return store.load(ref, rows=store.info(ref).kind == "generation")


def cmd_compare(a: argparse.Namespace) -> int:
    """Runs of one kind side by side: each setting that differs, an unequal machine, the
    figure-by-figure table (a one-shot run's components; a generation's TTFT, TPOT, ITL, E2E,
    rates and parts) and the gate (a one-shot run's p99; a generation's TTFT, TPOT and ITL
    p99)."""
    from latency.analysis.compare import diff_rows, format_diff, p99_gate, setup_differences
    from latency.analysis.gen_compare import format_gen_diff, gen_diff_rows, gen_gate
    from latency.analysis.machine import is_disturbed, unequal_disturbance
    from latency.figures.compare_plots import letters as compare_letters

    if len(a.ids) < 2:
        raise ConfigError("compare needs at least two run ids (the first is the baseline)")
    pct = a.fail_if_p99_worse
    if pct is not None and not (math.isfinite(pct) and pct >= 0):
        raise ConfigError("--fail-if-p99-worse must be a percentage >= 0")
    store = _store(a)
    runs = [_load_for_compare(store, ref) for ref in a.ids]
    odd = next((r.info for r in runs if r.info.kind != runs[0].info.kind), None)
    if odd is not None:
        raise ConfigError(f"{runs[0].info.id} is a {runs[0].info.kind} run and {odd.id} a "
                          f"{odd.kind} one: their figures measure different things; compare "
                          "runs of one kind")
    generation = runs[0].info.kind == "generation"
    letters = compare_letters(len(runs))
    summaries: list[Any] = [r.summary for r in runs]
    gates: list[Any] = []
    for letter, summary in zip(letters[1:], summaries[1:]) if pct is not None else ():
        try:
            gates.append((gen_gate if generation else p99_gate)(summaries[0], summary, pct,
                                                                letters[0], letter))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    diffs = {letter: setup_differences(runs[0].config, r.config, runs[0].environment,
                                       r.environment)
             for letter, r in zip(letters[1:], runs[1:])}
    machine = unequal_disturbance({x: [r.environment] for x, r in zip(letters, runs)})
    # every generation a server of yours: their splits stand in for the client's components
    splits = ([r.result.target_view.to_dict() if r.result.target_view is not None else None
               for r in runs] if generation and all(r.config.target is not None for r in runs)
              else None)
    if a.json:
        print(json.dumps({
            "runs": [dict(r.info.to_dict(), letter=x) for x, r in zip(letters, runs)],
            "rows": gen_diff_rows(letters, summaries, splits) if generation
            else diff_rows(summaries), "setup_differences": diffs,
            "machine_warning": machine,
            "gate": None if pct is None else {
                "max_worse_pct": pct, "passed": all(g.passed for g in gates),
                "results": [{"run": x, "passed": g.passed, "message": g.message,
                             **({} if generation else {"change_pct": g.change_pct})}
                            for x, g in zip(letters[1:], gates)]},
        }, indent=2))
        return EXIT_OK if all(g.passed for g in gates) else EXIT_REGRESSION
    for x, r in zip(letters, runs):
        i = r.info
        print(f"{x}  {i.id}  " + (f"“{i.name}” · " if i.name else "")
              + f"{i.model} · {i.load} · {i.status} · {i.n:,} requests · {i.when}"
              + (f" · {DISTURBED}" if is_disturbed(r.environment) else ""))
    for line in setup_and_machine_lines(diffs, letters, [r.environment for r in runs],
                                        machine):
        print(line)
    print()
    if generation:
        print(format_gen_diff(letters, summaries, splits))
        print("(ms, or the unit the row says; Δ% against A)")
    else:
        print(format_diff(letters, summaries))
        print("(ms; Δ and Δ% against A; negative is faster)")
    for r, x in zip(runs, letters):
        if r.info.status != "completed":
            print(f"note: {x} {r.info.status}"
                  + (" before its planned length" if r.info.status == "stopped" else ""))
    for g in gates:
        print(g.message)
    return EXIT_OK if all(g.passed for g in gates) else EXIT_REGRESSION
